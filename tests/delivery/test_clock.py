"""The clocks and the test helpers the delivery tests rely on."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest

from digest_core.clock import Clock, SystemClock
from digest_core.errors import TargetGone
from digest_core.platform import Platform, Target
from digest_core.testing import (
    FakePlatform,
    ManualClock,
    Slow,
    make_issue,
    make_messages,
    windows_exceeded,
)


async def test_system_clock_is_aware_utc_and_sleeps() -> None:
    clock = SystemClock()
    assert isinstance(clock, Clock)
    assert clock.now().utcoffset() == dt.timedelta(0)
    start = clock.monotonic()
    await clock.sleep(0.01)
    assert clock.monotonic() - start >= 0.01


async def test_manual_clock_wakes_concurrent_sleepers_in_deadline_order() -> None:
    clock = ManualClock()
    woke: list[tuple[str, float]] = []

    async def nap(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.monotonic()))

    started = time.monotonic()
    await asyncio.gather(nap("long", 3600.0), nap("short", 5.0), nap("mid", 60.0))
    assert woke == [("short", 5.0), ("mid", 60.0), ("long", 3600.0)]
    assert clock.now() == ManualClock().now() + dt.timedelta(hours=1)
    assert time.monotonic() - started < 1.0  # an hour of virtual time, instantly


async def test_manual_clock_holds_still_while_watched_work_is_busy() -> None:
    clock = ManualClock()
    busy = True
    clock.watch(lambda: busy)

    async def release() -> None:
        nonlocal busy
        await asyncio.sleep(0.01)  # real work the loop cannot see, e.g. a database thread
        busy = False

    releaser = asyncio.create_task(release())
    await clock.sleep(10.0)
    assert not busy and releaser.done() and clock.monotonic() == 10.0


async def test_manual_clock_without_autoadvance_moves_only_when_told() -> None:
    clock = ManualClock(autoadvance=False)
    sleeper = asyncio.create_task(clock.sleep(10.0))
    await asyncio.sleep(0)
    clock.advance(9.0)
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(1.0)
    await asyncio.wait_for(sleeper, 1.0)
    with pytest.raises(ValueError):
        clock.advance(-1.0)


async def test_cancelled_sleeps_do_not_stall_the_clock() -> None:
    clock = ManualClock()
    doomed = asyncio.create_task(clock.sleep(1.0))
    await asyncio.sleep(0)
    doomed.cancel()
    await clock.sleep(5.0)
    assert clock.monotonic() == 5.0 and doomed.cancelled()


def test_manual_clock_refuses_naive_start() -> None:
    with pytest.raises(ValueError):
        ManualClock(dt.datetime(2026, 1, 1))  # noqa: DTZ001


async def test_fake_platform_follows_its_script_then_succeeds() -> None:
    clock = ManualClock()
    platform = FakePlatform(clock)
    assert isinstance(platform, Platform)
    chat, message = Target("fake", "1"), make_messages(1)[0]
    platform.script("1", TargetGone("blocked"), Slow(30.0))
    with pytest.raises(TargetGone):
        await platform.send(chat, message)
    assert await platform.send(chat, message) == "1"
    assert platform.times("1") == [30.0] and len(platform.calls) == 2


def test_make_issue_builds_a_valid_issue_with_a_stable_revision() -> None:
    issue = make_issue(briefs=3)
    assert len(issue.briefs) == 3 and issue.classic is not None
    assert issue.ref == make_issue(briefs=3).ref != make_issue(briefs=2).ref


@pytest.mark.parametrize(
    ("times", "exceeded"),
    [([0, 0, 0, 1, 2], False), ([0, 0, 0, 0.5], True), ([0, 0.3, 0.6, 0.9], True), ([], False)],
)
def test_windows_exceeded_counts_sends_within_any_window(
    times: list[float], exceeded: bool
) -> None:
    assert windows_exceeded(times, window=1.0, limit=3) is exceeded
