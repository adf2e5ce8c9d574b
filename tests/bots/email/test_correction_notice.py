"""Corrections of an issue already mailed: ``digest-bot correct`` cannot edit mail and resends
nothing; ``digest-bot email notify-correction DATE`` mails each reader who got the earlier
revision one short, linked notice, through the ledger (a rerun sends nothing more), and none to
a reader who unsubscribed meanwhile."""

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
from tests.fakes.smtp import FakeRelay

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


async def test_a_correction_notice_once_per_reader_who_got_the_old_revision(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copy(ARCHIVE / f"{DAY}.txt", archive / f"{DAY}.txt")
    with FakeRelay(senders=set()) as relay:
        config = write_config(tmp_path, relay.port)
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

        code, out = await cli(config, "correct", "--date", DAY, "--platform", "email")
        assert len(relay.received) == len(READERS)  # mail cannot be edited: nothing resent

        code, out = await cli(config, "email", "notify-correction", DAY)
        assert code == 0, out
        assert f"sent {len(READERS) - 1} of {len(READERS) - 1} readers" in out
        notices = relay.received[len(READERS) :]
        assert sorted(r.recipients[0] for r in notices) == sorted(READERS[1:])
        first = BytesParser(policy=policy.default).parsebytes(notices[0].data)
        assert str(first["Subject"]).startswith("更正 / Correction: ")
        body = first.get_body(("plain",))
        assert body is not None
        assert "https://digest.example.org/2026/11/26/" in body.get_content()
        assert first["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"

        code, out = await cli(config, "email", "notify-correction", DAY)  # once only
        assert code == 0, out
        assert len(relay.received) == len(READERS) + len(READERS) - 1
