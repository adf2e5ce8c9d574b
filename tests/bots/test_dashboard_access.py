"""The dashboard's access rules without a browser: sessions signed and expiring, a new
password ending every session, CSRF tokens compared, login failures limited per client and
overall, the password only from the environment or a file, and Telegram's Login Widget for
the admins (its signature as Telegram documents it, fresh, of an admin), on the real endpoint
too."""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path

import aiohttp
import pytest
import yarl

from bots.dashboard.auth import (
    ALL_FAILURES,
    CLIENT_FAILURES,
    TELEGRAM_FRESH,
    WINDOW,
    Access,
    TelegramLogin,
)
from bots.registry import load_settings
from digest_core.errors import ConfigError
from tests.bots.dashboard_harness import running
from tests.bots.telegram.harness import ADMIN

BOT_TOKEN = "123456:ABC-the-bot-token"


def test_a_session_is_signed_and_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    access = Access("secret", hours=1)
    session, cookie = access.new_session("ann")
    assert access.session(cookie) == session and session.name == "ann"
    assert access.session(cookie[:-3] + "abc") is None
    assert Access("another password", hours=1).session(cookie) is None  # a new password
    assert access.session(None) is None and access.session("x" * 600) is None
    later = time.time() + 3601
    monkeypatch.setattr(time, "time", lambda: later)
    assert access.session(cookie) is None  # expired


def test_csrf_tokens_are_the_sessions_own() -> None:
    access = Access("secret", hours=1)
    session, _ = access.new_session("ann")
    other, _ = access.new_session("ann")
    assert access.csrf_ok(session, session.csrf)
    assert not access.csrf_ok(session, other.csrf)
    assert not access.csrf_ok(session, None) and not access.csrf_ok(session, "")


def test_failed_logins_are_limited_per_client_and_overall() -> None:
    access = Access("secret", hours=1)
    for _ in range(CLIENT_FAILURES):
        assert not access.limited("10.0.0.1", now=0.0)
        assert not access.check("10.0.0.1", "guess", now=0.0)
    assert access.limited("10.0.0.1", now=1.0)
    assert not access.limited("10.0.0.2", now=1.0)  # another client may still try
    assert not access.limited("10.0.0.1", now=WINDOW + 1)  # the window passed
    for n in range(ALL_FAILURES):
        access.check(f"10.1.0.{n}", "guess", now=WINDOW + 2)
    assert access.limited("10.9.9.9", now=WINDOW + 3)  # everyone, once too many overall
    assert access.check("10.9.9.9", "secret", now=WINDOW + 3)  # (the check itself is right)


def test_the_password_comes_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text('[http]\nlisten = "127.0.0.1:9464"\nadmin = true\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="ADMIN_PASSWORD"):
        load_settings(config)
    secret = tmp_path / "admin-password"
    secret.write_text("from a file\n", encoding="utf-8")
    monkeypatch.setenv("DIGEST_BOT_HTTP__ADMIN_PASSWORD_FILE", str(secret))
    assert load_settings(config).http.resolved_admin_password() == "from a file"
    config.write_text('[http]\nadmin_password = "in the file"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="must not be written in the config file"):
        load_settings(config)


def signed(token: str, **fields: str) -> dict[str, str]:
    """``fields`` as Telegram's Login Widget sends them: with the hash Telegram computes
    (core.telegram.org/widgets/login#checking-authorization), written out here on its own."""
    check = "\n".join(f"{k}={v}" for k, v in sorted(fields.items()))
    key = hashlib.sha256(token.encode()).digest()
    return {**fields, "hash": hmac.new(key, check.encode(), hashlib.sha256).hexdigest()}


def test_a_telegram_login_is_checked_as_telegram_documents() -> None:
    login = TelegramLogin(BOT_TOKEN, frozenset({42}))
    now = 1_800_000_000
    fields = {"id": "42", "first_name": "安", "username": "ann", "auth_date": str(now - 5)}
    assert login.admin(signed(BOT_TOKEN, **fields), now=now) == 42
    # forged: another bot's signature, a changed field, a field added, no hash
    assert login.admin(signed("654321:another-bot", **fields), now=now) is None
    assert login.admin({**signed(BOT_TOKEN, **fields), "first_name": "Eve"}, now=now) is None
    assert login.admin({**signed(BOT_TOKEN, **fields), "is_admin": "1"}, now=now) is None
    assert login.admin(fields, now=now) is None
    # stale (a replayed login), or dated ahead of the clock
    old = {**fields, "auth_date": str(now - TELEGRAM_FRESH - 1)}
    assert login.admin(signed(BOT_TOKEN, **old), now=now) is None
    ahead = {**fields, "auth_date": str(now + 3600)}
    assert login.admin(signed(BOT_TOKEN, **ahead), now=now) is None
    # a real Telegram user, but no admin
    other = {**fields, "id": "43"}
    assert login.admin(signed(BOT_TOKEN, **other), now=now) is None


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_an_admin_logs_in_with_telegram_on_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch, telegram_login=True) as bot:
        token = bot.telegram.token
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            async with http.get(bot.url + "/admin/login") as page:
                text = await page.text()
                assert 'src="https://telegram.org/js/telegram-widget.js' in text
                assert f'data-auth-url="{bot.url}/admin/login/telegram"' in text
                assert "https://telegram.org" in page.headers["Content-Security-Policy"]
            now = int(time.time())
            for bad in (
                signed("654321:another-bot", id=str(ADMIN), auth_date=str(now)),
                signed(token, id=str(ADMIN), auth_date=str(now - TELEGRAM_FRESH - 60)),
                signed(token, id=str(ADMIN + 1), auth_date=str(now)),
            ):
                async with http.get(bot.url + "/admin/login/telegram", params=bad) as refused:
                    assert refused.status == 401
                    assert "digest_admin" not in jar.filter_cookies(yarl.URL(bot.url + "/admin/"))
            good = signed(token, id=str(ADMIN), first_name="Admin", auth_date=str(now))
            async with http.get(bot.url + "/admin/login/telegram", params=good) as answer:
                assert answer.status == 200 and answer.url.path == "/admin/today"
                assert f"telegram.{ADMIN}" in await answer.text()
