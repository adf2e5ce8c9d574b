"""Shutdown mid-delivery: cancelled deliveries leave the ledger resumable, never failed."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import logging
import shutil
from pathlib import Path

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bots.console import ConsolePlatform
from bots.console.spec import CONSOLE_LIMITS
from digest_core.archive import Archive
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.platform import PartKey, Target
from digest_core.publishing.schedule import ScheduleConfig
from digest_core.rendering import Message
from digest_core.service.root import DigestService
from tests.samples import SAMPLE_ARCHIVE

DAY = dt.date(2026, 11, 27)  # the long issue: several parts per target


class SlowConsole(ConsolePlatform):
    """A console with twenty targets whose sends take ``delay`` seconds."""

    def __init__(self, delay: float):
        super().__init__(out=io.StringIO(), interactive=False, limits=CONSOLE_LIMITS)
        self.delay = delay
        self.sent: list[tuple[str, str]] = []

    def channel_targets(self) -> list[Target]:
        return [Target("console", f"t{i}") for i in range(20)]

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        await asyncio.sleep(self.delay)
        self.sent.append((target.id, str(message.payload["text"])[:40]))
        return await super().send(target, message, key=key)


def service_for(ledger: Ledger, archive: Archive, platform: SlowConsole) -> DigestService:
    clock = SystemClock()
    return DigestService(
        archive=archive,
        ledger=ledger,
        engine=DeliveryEngine(ledger, clock=clock),
        clock=clock,
        zone=dt.UTC,
        schedule=ScheduleConfig(zone=dt.UTC, post_time=dt.time(8)),
        platforms=[platform],
    )


async def test_cancelled_delivery_resumes_without_loss(tmp_path: Path) -> None:
    archive_dir = tmp_path / "archive"
    archive_dir.mkdir()
    shutil.copy(SAMPLE_ARCHIVE / f"{DAY}.txt", archive_dir)
    archive = Archive(archive_dir)
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"

    slow = SlowConsole(delay=30.0)
    async with Ledger.open(url) as ledger:
        service = service_for(ledger, archive, slow)
        post = asyncio.create_task(service.post(DAY))
        for _ in range(200):  # until every target has a part in flight
            await asyncio.sleep(0.01)
            if len(await ledger.in_flight()) == 20:
                break
        assert not await service.idle(0.05)
        assert await service.cancel_deliveries() == 1
        assert post.cancelled()
        records = await ledger.records()
        states = {r.state for r in records}
        assert PartState.FAILED not in states and PartState.GONE not in states
        assert slow.sent == []

    fast = SlowConsole(delay=0.0)
    async with Ledger.open(url) as ledger:
        [report] = await service_for(ledger, archive, fast).post(DAY)
        assert report.ok
        parts = max(r.part for r in await ledger.records()) + 1
        assert len(fast.sent) == 20 * parts  # everything, once: nothing was sent before


async def test_a_scheduled_post_cancelled_by_the_shutdown_ends_its_job_without_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The shutdown cancels the deliveries still running after their grace period, before it
    stops the poster. A delivery run by a scheduler job (here the look again for a late file)
    is that job's own task: its cancellation reached APScheduler, which logged it as an ERROR
    with a traceback (the fault suite's sigterm-rerun). It ends quietly now."""
    caplog.set_level(logging.INFO)
    archive_dir = tmp_path / "archive"
    archive_dir.mkdir()
    shutil.copy2(SAMPLE_ARCHIVE / f"{DAY}.txt", archive_dir)  # (saved long ago)
    slow = SlowConsole(delay=30.0)
    scheduler = AsyncIOScheduler(timezone=dt.UTC)
    async with Ledger.open(f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}") as ledger:
        service = service_for(ledger, Archive(archive_dir), slow)
        service.poster.install(scheduler)
        scheduler.start()
        try:
            service.poster._later(dt.datetime.now(dt.UTC), DAY)  # a late file's look again
            for _ in range(500):  # until the job's delivery has every target in flight
                await asyncio.sleep(0.01)
                if len(await ledger.in_flight()) == 20:
                    break
            assert not await service.idle(0.05), "the job's delivery did not start"
            assert await service.cancel_deliveries() == 1
            await service.poster.stop()
            for _ in range(3):  # the job's end is reported by the scheduler's own task
                await asyncio.sleep(0)
        finally:
            scheduler.shutdown(wait=False)
        states = {r.state for r in await ledger.records()}
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    stopped = [
        r.getMessage() for r in caplog.records if "stopped by the shutdown" in r.getMessage()
    ]
    assert stopped == [
        f"the look for the issue of {DAY} was stopped by the shutdown; the next start catches up"
    ]
    assert PartState.FAILED not in states and slow.sent == []
