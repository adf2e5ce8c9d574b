"""A ledger that stops answering mid-post (another process holds SQLite's write lock): the post
waits, admins hear of it once, status shows it, and the post completes once the lock is gone."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import shutil
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from digest_core.archive import Archive
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.health import RetryPolicy
from digest_core.platform import PlatformLimits, Rate, Target, TargetKind
from digest_core.publishing.schedule import ScheduleConfig
from digest_core.rendering import Part, render
from digest_core.rendering import plain as plain_render
from digest_core.service.root import DigestService
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets
from tests import forkserver
from tests.samples import SAMPLE_ARCHIVE
from tests.tmpfs import tmpfs

ROOT = Path(__file__).resolve().parents[2]
DAY = dt.date(2026, 11, 27)  # three plain-text parts
TARGETS = 100
ZONE = ZoneInfo("Asia/Shanghai")

pytestmark = pytest.mark.slow  # real processes, servers or a browser

#: a second SQLite client: takes the write lock on "lock", gives it back on "release"
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "lock":
        db.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
    elif line.strip() == "release":
        db.execute("COMMIT")
        print("released", flush=True)
"""


@dataclass
class AlertingPlatform(FakePlatform):
    """A FakePlatform that is also an Adapter: channels from a list, alerts recorded."""

    channels: list[Target] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)

    def channel_targets(self) -> list[Target]:
        return list(self.channels)

    async def alert_admins(self, text: str) -> None:
        self.alerts.append(text)

    async def start(self, service: Any, *, receive: bool = True) -> None:
        return None

    async def stop(self) -> None:
        return None


class Locker:
    """The second process holding ``BEGIN EXCLUSIVE`` on the ledger file."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def say(self, word: str, answer: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{word}\n".encode())
        await self.proc.stdin.drain()
        assert (await self.proc.stdout.readline()).decode().strip() == answer


@pytest.fixture
async def locker(tmp_path: Path) -> AsyncIterator[Locker]:
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER, str(tmp_path / "l.db"), stdin=pipe, stdout=pipe
    )
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).decode().strip() == "ready"
    try:
        yield Locker(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def wait_for(condition: Any, what: str, *, seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def more_failed_attempts(ledger: Ledger) -> None:
    """Wait until the ledger has tried its transaction again, and failed again: whatever the
    delivery would send without a recorded claim, it would have sent by then."""
    trouble = ledger.health.trouble
    assert trouble is not None, "the ledger is not in trouble"
    seen = trouble.failures

    def again() -> bool:
        now = ledger.health.trouble
        return now is not None and now.failures > seen

    await wait_for(again, "another failed attempt at the ledger")


async def cli_status(tmp_path: Path) -> str:
    cfg = tmp_path / "bot.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = await forkserver.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli",
        "status",
        "--config",
        str(cfg),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_post_waits_out_a_locked_ledger_and_completes(
    tmp_path: Path, locker: Locker
) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copy(SAMPLE_ARCHIVE / f"{DAY}.txt", archive)
    # a short busy timeout, so the lock is noticed quickly
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}?timeout=0.2"
    (tmp_path / "bot.toml").write_text(
        f'archive_dir = "{archive}"\ndatabase_url = "{url}"\n', encoding="utf-8"
    )
    clock = SystemClock()
    platform = AlertingPlatform(
        clock,
        flavor=plain_render,
        limits=PlatformLimits(overall=Rate(1000.0, 100), per_target={}),
        latency=0.02,
        channels=[Target("fake", f"c{i}", TargetKind.CHANNEL) for i in range(TARGETS)],
    )
    async with Ledger.open(url, clock=clock) as ledger:
        ledger.retry_policy = RetryPolicy(base=0.05, cap=0.2)  # quick to see the lock go
        service = DigestService(
            archive=Archive(archive),
            ledger=ledger,
            engine=DeliveryEngine(ledger, clock=clock, max_in_flight=6),
            clock=clock,
            zone=ZONE,
            schedule=ScheduleConfig(zone=ZONE, post_time=dt.time(8, 0)),
            platforms=[platform],
        )
        parts = len(render(service.archive.on(DAY), plain_render, Part.ALL))
        total = TARGETS * parts
        post = asyncio.create_task(service.post(DAY))
        await wait_for(lambda: len(platform.sent) >= total // 4, "a quarter of the post")
        await locker.say("lock", "locked")

        # the writer's next transaction finds the lock: the admins hear of it, once
        await wait_for(lambda: platform.alerts or post.done(), "the trouble alert")
        assert not post.done(), "the post ended instead of waiting for the ledger"
        assert len(platform.alerts) == 1 and "ledger trouble since" in platform.alerts[0]
        assert "database is locked" in platform.alerts[0]
        status = await service.status()
        assert "ledger trouble since" in status and "database is locked" in status
        # another process (digest-bot status) sees it too, without writing to the ledger
        assert "ledger trouble since" in await cli_status(tmp_path)
        # the delivery waits: nothing is sent without a claim recorded first
        stalled = len(platform.sent)
        await more_failed_attempts(ledger)
        assert len(platform.sent) == stalled < total
        assert not post.done()

        await locker.say("release", "released")
        (report,) = await asyncio.wait_for(post, 30)

        assert report.ok and report.failed == 0
        sent = Counter((s.target.id, s.message.payload["text"]) for s in platform.sent)
        assert len(sent) == total and max(sent.values()) == 1  # all of it, nothing twice
        for i in range(TARGETS):  # in order for every reader
            texts = [m.payload["text"] for m in platform.sent_to(f"c{i}")]
            assert texts == [
                m.payload["text"] for m in render(service.archive.on(DAY), plain_render)
            ]
        assert len(platform.alerts) == 2 and "answers again" in platform.alerts[1]
        assert "ledger trouble" not in await service.status()
        assert not (tmp_path / "l.db.health").exists()  # what digest-bot status would show


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs of our own, to fill for real (needs root; skipped elsewhere)."""
    with tmpfs(tmp_path / "disk", 16) as mount:
        yield mount


async def test_a_full_disk_mid_post_is_waited_out(small_disk: Path) -> None:
    clock = SystemClock()
    platform = FakePlatform(
        clock, limits=PlatformLimits(overall=Rate(1000.0, 100), per_target={}), latency=0.01
    )
    filler = small_disk / "filler"
    async with Ledger.open(f"sqlite+aiosqlite:///{small_disk / 'l.db'}", clock=clock) as ledger:
        ledger.retry_policy = RetryPolicy(base=0.05, cap=0.2)
        troubles: list[str] = []
        ledger.health.subscribe(
            lambda t, cleared: troubles.append("cleared" if cleared else t.error)
        )
        engine = DeliveryEngine(ledger, clock=clock, max_in_flight=6)
        targets, messages = make_targets(40), make_messages(5)
        post = asyncio.create_task(engine.deliver(make_issue().ref, platform, messages, targets))
        await wait_for(lambda: len(platform.sent) >= 40, "some sends")
        # every free block; unbuffered, so closing the file has nothing left to fail on
        with contextlib.suppress(OSError), filler.open("wb", buffering=0) as fh:
            while True:
                fh.write(b"\0" * 65536)
        await wait_for(lambda: troubles or post.done(), "the trouble")
        assert not post.done(), "the post ended instead of waiting for the ledger"
        assert troubles == ["database or disk is full"]
        stalled = len(platform.sent)
        await more_failed_attempts(ledger)
        assert len(platform.sent) == stalled  # nothing sent without a recorded claim
        filler.unlink()
        report = await asyncio.wait_for(post, 30)
    assert report.ok and troubles == ["database or disk is full", "cleared"]
    sent = Counter((s.target.id, s.message.payload["part"]) for s in platform.sent)
    assert len(sent) == len(targets) * len(messages) and max(sent.values()) == 1
