"""`digest-bot doctor` against the Telegram and Discord doubles, broken rights included."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import sys
from pathlib import Path

import pytest

from bots.cli.doctor import run_checks
from bots.doctor import Check, Status
from bots.registry import load_settings
from tests import forkserver
from tests.fakes.discord_api import EMBED_LINKS, SEND_MESSAGES, FakeDiscord
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram
from tests.samples import SAMPLE_ARCHIVE

ROOT = Path(__file__).resolve().parents[2]

OK_CHANNEL, NO_POST_CHANNEL, LEFT_GROUP, RESTRICTED_GROUP = -1001, -1002, -1003, -1004
GUILD, ROLE = 500, 501
OPEN, DENIED, EMBEDS_BACK = 601, 602, 603


def by_name(checks: list[Check], area: str) -> dict[str, Check]:
    return {c.name: c for c in checks if c.area == area}


def write_config(
    folder: Path, *, telegram: FakeTelegram | None = None, discord: FakeDiscord | None = None
) -> Path:
    lines = [
        f'archive_dir = "{SAMPLE_ARCHIVE}"',
        f'database_url = "sqlite+aiosqlite:///{folder / "ledger.db"}"',
    ]
    if telegram is not None:
        lines += [
            "[telegram]",
            f'api_base_url = "{telegram.base_url}"',
            f'channels = ["{OK_CHANNEL}", "{NO_POST_CHANNEL}", "{LEFT_GROUP}", '
            f'"{RESTRICTED_GROUP}"]',
        ]
    if discord is not None:
        lines += [
            "[discord]",
            f'api_base_url = "{discord.api_base}"',
            f'channels = ["{OPEN}", "{DENIED}", "{EMBEDS_BACK}"]',
        ]
    path = folder / "doctor.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def break_telegram(tg: FakeTelegram) -> None:
    tg.add_chat(OK_CHANNEL, "channel", title="Digest")
    tg.add_chat(NO_POST_CHANNEL, "channel", title="No rights")
    tg.set_bot_member(NO_POST_CHANNEL, "administrator", can_post_messages=False)
    tg.add_chat(LEFT_GROUP, "supergroup", title="Gone")
    tg.set_bot_member(LEFT_GROUP, "left")
    tg.add_chat(RESTRICTED_GROUP, "supergroup", title="Muted")
    tg.set_bot_member(RESTRICTED_GROUP, "restricted", can_send_messages=False)


async def break_discord(dc: FakeDiscord) -> None:
    # the bot's role; #ro denies Send Messages to @everyone; #x denies Embed Links to
    # @everyone but allows them to the bot's role (a role's allow beats @everyone's deny)
    await dc.add_guild(
        GUILD,
        "AI",
        channels=[(OPEN, "news"), (DENIED, "ro"), (EMBEDS_BACK, "x")],
        roles=[(ROLE, "bot", 0)],
    )
    dc.set_bot_roles(GUILD, [ROLE])
    dc.set_overwrite(DENIED, GUILD, deny=SEND_MESSAGES)
    dc.set_overwrite(EMBEDS_BACK, GUILD, deny=EMBED_LINKS)
    dc.set_overwrite(EMBEDS_BACK, ROLE, allow=EMBED_LINKS)


async def test_telegram_rights_webhook_and_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
    async with FakeTelegram() as tg:
        break_telegram(tg)
        tg.webhook = {
            "url": "https://old.example/hook",
            "allowed_updates": None,
            "max_connections": 40,
        }
        tg.date_offset = 120.0  # the server's clock is two minutes ahead of ours
        settings = load_settings(write_config(tmp_path, telegram=tg))
        checks = by_name(await run_checks(settings), "telegram")
    assert checks["token"].status is Status.OK
    assert checks[f"rights {OK_CHANNEL}"].status is Status.OK
    no_post = checks[f"rights {NO_POST_CHANNEL}"]
    assert no_post.status is Status.FAIL and "Post Messages" in no_post.fix
    assert checks[f"rights {LEFT_GROUP}"].status is Status.FAIL
    assert "left" in checks[f"rights {LEFT_GROUP}"].detail
    assert checks[f"rights {RESTRICTED_GROUP}"].status is Status.FAIL
    assert checks["webhook"].status is Status.WARN  # polling would delete it
    assert checks["clock"].status is Status.FAIL and "behind" in checks["clock"].detail
    assert "getChatMember" in caplog.text  # httpx logged the requests...
    assert DEFAULT_TOKEN.split(":")[1] not in caplog.text  # ...without the token


async def test_telegram_rights_agree_with_what_the_double_lets_post(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chat doctor fails is one where sendMessage is refused, and the other way round."""
    import httpx

    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
    async with FakeTelegram() as tg, httpx.AsyncClient() as client:
        break_telegram(tg)
        checks = by_name(
            await run_checks(load_settings(write_config(tmp_path, telegram=tg))), "telegram"
        )
        for chat in (OK_CHANNEL, NO_POST_CHANNEL, LEFT_GROUP, RESTRICTED_GROUP):
            answer = await client.post(
                f"{tg.base_url}{DEFAULT_TOKEN}/sendMessage", json={"chat_id": chat, "text": "x"}
            )
            posted = answer.json()["ok"]
            assert posted == (checks[f"rights {chat}"].status is Status.OK), chat


async def test_telegram_bad_token_and_a_failing_webhook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeTelegram() as tg:
        monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", "123:wrong")
        checks = by_name(
            await run_checks(load_settings(write_config(tmp_path, telegram=tg))), "telegram"
        )
        assert checks["token"].status is Status.FAIL and "BotFather" in checks["token"].fix

        monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
        monkeypatch.setenv("DIGEST_BOT_TELEGRAM__MODE", "webhook")
        monkeypatch.setenv("DIGEST_BOT_TELEGRAM__WEBHOOK_URL", "https://bot.example/tg")
        monkeypatch.setenv("DIGEST_BOT_TELEGRAM__WEBHOOK_SECRET", "s3cret")
        break_telegram(tg)
        tg.webhook = {
            "url": "https://bot.example/tg",
            "allowed_updates": None,
            "max_connections": 4,
        }
        tg.webhook_error = ("Connection timed out", 1_700_000_000)
        checks = by_name(
            await run_checks(load_settings(write_config(tmp_path, telegram=tg))), "telegram"
        )
    assert checks["webhook"].status is Status.FAIL
    assert "Connection timed out" in checks["webhook"].detail
    assert checks["clock"].status is Status.OK


async def test_discord_permissions_from_roles_and_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDiscord() as dc:
        monkeypatch.setenv("DIGEST_BOT_DISCORD__TOKEN", dc.token)
        await break_discord(dc)
        dc.interactions_endpoint_url = "https://old.example/interactions"
        checks = by_name(
            await run_checks(load_settings(write_config(tmp_path, discord=dc))), "discord"
        )
        assert checks["token"].status is Status.OK
        assert checks["clock"].status is Status.OK
        assert checks[f"rights {OPEN}"].status is Status.OK
        denied = checks[f"rights {DENIED}"]
        assert denied.status is Status.FAIL and "Send Messages" in denied.detail
        assert checks[f"rights {EMBEDS_BACK}"].status is Status.OK
        assert checks["interactions"].status is Status.FAIL
        # and the double computes the same: the denied channel refuses a post
        assert dc.bot_permissions(DENIED) & SEND_MESSAGES == 0
        assert dc.bot_permissions(EMBEDS_BACK) & EMBED_LINKS

        # an administrator role overrides every overwrite
        dc.set_role_permissions(GUILD, ROLE, 1 << 3)
        checks = by_name(
            await run_checks(load_settings(write_config(tmp_path, discord=dc))), "discord"
        )
        assert checks[f"rights {DENIED}"].status is Status.OK


@pytest.mark.slow
async def test_doctor_command_prints_the_table_with_fixes_and_exits_1(tmp_path: Path) -> None:
    """The real command in a subprocess against both doubles, with broken permissions."""
    async with FakeTelegram() as tg, FakeDiscord() as dc:
        break_telegram(tg)
        await break_discord(dc)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
        env |= {
            "PYTHONPATH": str(ROOT),
            "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN,
            "DIGEST_BOT_DISCORD__TOKEN": dc.token,
        }
        config = write_config(tmp_path, telegram=tg, discord=dc)
        proc = await forkserver.create_subprocess_exec(
            sys.executable, "-m", "bots.cli", "doctor", "--config", str(config),
            cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    table = out.decode()
    assert proc.returncode == 1, err.decode()
    assert "Traceback" not in err.decode()
    lines = table.splitlines()
    failing = [i for i, line in enumerate(lines) if line.startswith("FAIL")]
    assert len(failing) == 4  # three Telegram chats and one Discord channel
    for i in failing:
        assert lines[i + 1].strip().startswith("fix: "), lines[i : i + 2]
    assert any(f"rights {DENIED}" in lines[i] for i in failing)
    assert "failed" in lines[-1]


def test_doctor_passes_on_a_healthy_setup(tmp_path: Path) -> None:
    """No platform, an existing ledger: exit 0 (the missing platforms are a warning)."""
    from bots.cli import main

    config = write_config(tmp_path)
    assert main(["status", "--config", str(config)]) == 0
    ledger = tmp_path / "ledger.db"
    assert ledger.exists()
    assert main(["doctor", "--config", str(config)]) == 0


def test_doctor_fails_on_a_lost_ledger_without_creating_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots.cli import main

    config = write_config(tmp_path)
    (tmp_path / "ledger.db.marker").write_text("some-ledger-id\n")
    assert main(["doctor", "--config", str(config)]) == 1
    assert "restore the backup" in capsys.readouterr().out
    assert not (tmp_path / "ledger.db").exists()


def test_clock_judged_beyond_the_header_second_and_the_round_trip() -> None:
    from bots.doctor import clock_check

    sent = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=dt.UTC)
    received = sent + dt.timedelta(seconds=2)
    near = clock_check("x", "Thu, 01 Jan 2026 00:00:02 GMT", sent=sent, received=received)
    assert near.status is Status.OK
    late = clock_check("x", "Thu, 01 Jan 2026 00:00:10 GMT", sent=sent, received=received)
    assert late.status is Status.WARN
    far = clock_check("x", "Wed, 31 Dec 2025 23:59:00 GMT", sent=sent, received=received)
    assert far.status is Status.FAIL and "ahead of" in far.detail


def test_no_archive_is_a_failure_with_its_fix(tmp_path: Path) -> None:
    from bots.doctor import archive_check

    settings = load_settings(write_config(tmp_path), overrides={"archive_dir": tmp_path / "none"})
    [check] = archive_check(settings)
    assert check.status is Status.FAIL and "archive_dir" in check.fix


async def test_work_chat_webhooks_checked_without_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from tests.fakes.feishu_api import FakeFeishu

    async with FakeFeishu() as fs:
        fs.add_robot("ai-team", "tok-aiteam-123456", secret="sig")
        config = write_config(tmp_path)
        config.write_text(
            config.read_text() + f'[feishu]\ntargets = ["ai-team"]\napi_base = "{fs.url}"\n'
        )
        monkeypatch.setenv(
            "DIGEST_BOT_FEISHU__WEBHOOKS", json.dumps({"ai-team": "tok-aiteam-123456"})
        )
        monkeypatch.setenv("DIGEST_BOT_FEISHU__SECRETS", json.dumps({"ai-team": "sig"}))
        checks = by_name(await run_checks(load_settings(config)), "feishu")
        assert checks["webhook ai-team"].status is Status.OK
        assert "signed" in checks["webhook ai-team"].detail
        assert checks["reachable"].status is Status.OK
        assert checks["clock"].status is Status.OK
        assert fs.answers == []  # nothing was posted
        port = fs.port
    # the service gone: unreachable is a failure with its fix
    config.write_text(config.read_text().replace(fs.url, f"http://127.0.0.1:{port}"))
    checks = by_name(await run_checks(load_settings(config)), "feishu")
    assert checks["reachable"].status is Status.FAIL
    assert "refused" in checks["reachable"].detail
