"""Corrections of an issue already mailed: ``digest-bot correct`` cannot edit mail and resends
nothing; ``digest-bot email notify-correction DATE`` (or ``correct --notify-email``) mails each
reader who got the earlier revision one short, linked notice, through the ledger (a rerun sends
nothing more), and none to a reader who unsubscribed meanwhile."""

from __future__ import annotations

import asyncio
import shutil
import sys
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest

from tests import forkserver
from tests.bots.email.test_exactly_once import (
    READERS,
    env,
    start_post,
    subscribe_all,
    write_config,
)
from tests.bots.workchat_helpers import ARCHIVE, ROOT
from tests.fakes.smtp import FakeRelay, Received

pytestmark = pytest.mark.slow  # real processes, servers or a browser

DAY = "2026-11-26"


async def cli(config: Path, *args: str) -> tuple[int, str]:
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", *args, "--config", str(config),
        cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def mailed_then_corrected(tmp_path: Path, relay: FakeRelay) -> Path:
    """Every reader mailed DAY's issue, the file corrected (a new revision) and one reader
    forgotten meanwhile; the config."""
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copy(ARCHIVE / f"{DAY}.txt", archive / f"{DAY}.txt")
    config = write_config(tmp_path, relay.port, rate=100)
    config.write_text(config.read_text().replace(str(ARCHIVE), str(archive)))
    ids = await subscribe_all(config, tmp_path)
    relay.handler.senders = {f"digest+{rid}@example.org" for rid in ids.values()}
    post = await start_post(config)
    assert await post.wait() == 0
    assert len(relay.received) == len(READERS)
    # the editor corrects the day's file: a new revision
    path = archive / f"{DAY}.txt"
    path.write_text(path.read_text(encoding="utf-8").replace("。", "！", 1), encoding="utf-8")
    code, out = await cli(config, "email", "forget", READERS[0])
    assert code == 0, out
    return config


def check_notices(notices: list[Received]) -> None:
    """One notice to each reader but the forgotten one, linking the issue's page."""
    assert sorted(r.recipients[0] for r in notices) == sorted(READERS[1:])
    first = BytesParser(policy=policy.default).parsebytes(notices[0].data)
    assert str(first["Subject"]).startswith("更正 / Correction: ")
    body = first.get_body(("plain",))
    assert body is not None
    assert "https://digest.example.org/2026/11/26/" in body.get_content()
    assert first["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


async def test_a_correction_notice_once_per_reader_who_got_the_old_revision(
    tmp_path: Path,
) -> None:
    with FakeRelay(senders=set()) as relay:
        config = await mailed_then_corrected(tmp_path, relay)
        code, out = await cli(config, "correct", "--date", DAY, "--platform", "email")
        assert code == 0, out
        assert len(relay.received) == len(READERS)  # mail cannot be edited: nothing resent

        code, out = await cli(config, "email", "notify-correction", DAY)
        assert code == 0, out
        assert f"sent {len(READERS) - 1} of {len(READERS) - 1} readers" in out
        check_notices(relay.received[len(READERS) :])

        code, out = await cli(config, "email", "notify-correction", DAY)  # once only
        assert code == 0, out
        assert len(relay.received) == len(READERS) + len(READERS) - 1


async def test_correct_notify_email_mails_the_notice_and_only_with_the_flag(
    tmp_path: Path,
) -> None:
    with FakeRelay(senders=set()) as relay:
        config = await mailed_then_corrected(tmp_path, relay)
        code, out = await cli(config, "correct", "--date", DAY)
        assert code == 0, out
        assert "correction notice" not in out
        assert len(relay.received) == len(READERS)  # without the flag, no mail

        code, out = await cli(config, "correct", "--date", DAY, "--notify-email")
        assert code == 0, out
        assert f"correction notice: sent {len(READERS) - 1} of {len(READERS) - 1} readers" in out
        check_notices(relay.received[len(READERS) :])

        code, out = await cli(config, "correct", "--date", DAY, "--notify-email")  # once only
        assert code == 0, out
        assert len(relay.received) == len(READERS) + len(READERS) - 1
        assert not any(a in out for a in READERS)


async def test_notify_email_without_the_email_platform_corrects_nothing(tmp_path: Path) -> None:
    config = tmp_path / "digest-bot.toml"
    config.write_text(
        f'archive_dir = "{ARCHIVE}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n',
        encoding="utf-8",
    )
    code, out = await cli(config, "correct", "--date", DAY, "--notify-email")
    assert code == 1 and "--notify-email: the email platform is not configured" in out
    assert not (tmp_path / "ledger.db").exists()  # refused before anything opened
