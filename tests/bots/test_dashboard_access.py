"""The dashboard's access rules without a browser: sessions signed and expiring, a new
password ending every session, CSRF tokens compared, login failures limited per client and
overall, and the password only from the environment or a file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bots.dashboard.auth import ALL_FAILURES, CLIENT_FAILURES, WINDOW, Access
from bots.registry import load_settings
from digest_core.errors import ConfigError


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
