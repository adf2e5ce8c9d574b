"""``digest-bot email export`` and ``forget`` as real processes: export shows the reader's
address, subscription and mails; forget unsubscribes and erases the address, after which a
post sends the reader nothing and export finds nothing but the pseudonymous history."""

from __future__ import annotations

import asyncio
import json
import sys
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
from tests.bots.workchat_helpers import ROOT
from tests.fakes.smtp import FakeRelay

pytestmark = pytest.mark.slow  # real processes, servers or a browser


async def cli(config: Path, *args: str) -> tuple[int, str, str]:
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "email", *args, "--config", str(config),
        cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_export_then_forget_a_reader(tmp_path: Path) -> None:
    with FakeRelay(senders=set()) as relay:
        config = write_config(tmp_path, relay.port, rate=100)
        ids = await subscribe_all(config, tmp_path)
        relay.handler.senders = {f"digest+{rid}@example.org" for rid in ids.values()}
        post = await start_post(config)
        assert await post.wait() == 0
        reader = READERS[7]

        code, out, err = await cli(config, "export", reader)
        assert code == 0, err
        data = json.loads(out)
        assert data["reader"] == ids[reader] and data["address"] == reader
        assert data["subscribed"] is True
        assert [m["issue"] for m in data["mails"]] == ["2026-11-26"]
        assert data["mails"][0]["message_id"].startswith("<2026-11-26.")

        code, out, err = await cli(config, "forget", reader)
        assert code == 0 and out.strip() == "forgotten", err
        assert reader not in err  # logs name reader ids only

        code, out, _ = await cli(config, "export", reader)
        data = json.loads(out)
        assert data["address"] is None and data["subscribed"] is False
        assert len(data["mails"]) == 1  # the count stays, under the id alone

        before = len(relay.received)
        forced = await forkserver.create_subprocess_exec(
            sys.executable, "-m", "bots.cli", "post", "--config", str(config),
            "--platform", "email", "--date", "2026-11-26", "--force",
            cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert await asyncio.wait_for(forced.wait(), 120) == 0
        again = relay.received[before:]
    assert len(again) == len(READERS) - 1
    assert reader not in {r.recipients[0] for r in again}
