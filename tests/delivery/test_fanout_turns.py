"""A send's end takes the next send's turn itself (``Fanout._take_at_end``): at a paced rate
its claim shares the transaction of the record of the send that ended, the dispatcher is not
woken for it, and pacing, order and the claim before each send are as before."""

from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.delivery.fanout import _Alarm
from digest_core.platform import PartKey, PlatformLimits, Rate, Target
from digest_core.rendering import Message
from digest_core.testing import (
    FakePlatform,
    ManualClock,
    make_issue,
    make_messages,
    make_targets,
    open_ledger,
    windows_exceeded,
)

REF = make_issue().ref


@pytest.fixture
async def ledger(clock: ManualClock, tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(clock, f"sqlite+aiosqlite:///{tmp_path / 'ledger.sqlite3'}") as ledger:
        yield ledger


class ClaimedFirst(FakePlatform):
    """A FakePlatform that checks, at each send, that the ledger has the part in flight."""

    ledger: Ledger | None = None
    unclaimed: int = 0
    reads: int = 0  # (each a transaction of the ledger's)

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        assert self.ledger is not None and key is not None
        rows = await self.ledger.records(REF, platform=self.name, limit=10_000)
        self.reads += 1
        [row] = [r for r in rows if r.target == target.id and r.part == key.part]
        if row.state is not PartState.IN_FLIGHT:
            self.unclaimed += 1
        return await super().send(target, message, key=key)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_at_a_paced_rate_a_claim_shares_the_transaction_of_the_record_before_it(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Telegram's limits (30 a second in any second, 3 per 3.3 s per private chat): before,
    each part took two transactions (its claim, then its record); now a send's end claims
    the next one with its record. Pacing and order are Telegram's as before, and every part
    is in flight in the ledger when it is sent."""
    platform = ClaimedFirst(clock, limits=TELEGRAM_LIMITS, latency=0.005)
    platform.ledger = ledger
    targets, messages = make_targets(60), make_messages(2)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    await engine.deliver(REF, platform, messages, targets[:1])  # (the writer's connection)
    before, reads = ledger.stats.transactions, platform.reads
    report = await engine.deliver(REF, platform, messages, targets)
    assert report.ok and report.sent == 118
    writes = ledger.stats.transactions - before - (platform.reads - reads)
    assert writes < 1.5 * 118  # (two a part before: 247)
    assert platform.unclaimed == 0
    calls = [(t.id, m.payload["part"], at) for t, m, at in platform.calls[2:]]
    # each target's parts in order, the targets in request order (a target's second part
    # and the next target's first, both waiting for their turns, may swap, as before)
    assert [t for t, part, _ in calls if part == 0] == [t.id for t in targets[1:]]
    assert all([p for t, p, _ in calls if t == target.id] == [0, 1] for target in targets[1:])
    times = [at for _, _, at in calls]
    assert not windows_exceeded(times, window=1.0, limit=30)
    ideal = (len(times) - 1) / 30  # (the window's sends are spread over it)
    assert times[-1] - times[0] <= ideal * 1.03


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_turn_taken_early_leaves_the_overall_rate_as_it_was(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A send's end takes a turn of the overall bucket up to one interval early, never an
    extra one: a token bucket without a window (20 a second, bursts of 2) is kept as it
    counts, and used as fully as before."""
    limits = PlatformLimits(overall=Rate(20.0, 2), per_target={})
    platform = FakePlatform(clock, limits=limits, latency=0.01)
    report = await DeliveryEngine(ledger, clock=clock).deliver(
        REF, platform, make_messages(3), make_targets(40)
    )
    assert report.ok
    calls = [at for _, _, at in platform.calls]
    assert not windows_exceeded(calls, window=1.0, limit=22)  # burst 2 + 20/s
    ideal = (120 - 2) / 20
    assert ideal <= calls[-1] <= ideal * 1.02


async def test_an_alarm_rings_once_at_its_last_time() -> None:
    clock = ManualClock(autoadvance=False)
    rang: list[float] = []
    alarm = _Alarm(clock, lambda: rang.append(clock.monotonic()))
    alarm.set(5.0)
    alarm.set(3.0)  # moved sooner
    alarm.set(3.0)  # (the same time: kept)
    for _ in range(3):
        await asyncio.sleep(0)  # (its task sleeps on the clock)
    clock.advance(3.0)
    await _settle()
    assert rang == [3.0]
    alarm.set(1.0)
    alarm.set(4.0)  # moved later: the sooner one never rings
    await _settle()
    clock.advance(1.0)
    await _settle()
    assert rang == [3.0]
    clock.advance(3.0)
    await _settle()
    assert rang == [3.0, 7.0]
    alarm.set(1.0)
    alarm.cancel()
    await _settle()
    clock.advance(5.0)
    await _settle()
    assert rang == [3.0, 7.0]


async def test_on_the_real_clock_an_alarm_is_a_timer_of_the_loop() -> None:
    rang = asyncio.Event()
    alarm = _Alarm(SystemClock(), rang.set)
    alarm.set(60.0)
    assert isinstance(alarm._handle, asyncio.TimerHandle)
    alarm.set(0.001)  # moved sooner
    await asyncio.wait_for(rang.wait(), 30)
    alarm.set(0.001)
    alarm.cancel()
    assert alarm._handle is None


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_at_a_paced_rate_sends_go_out_in_clumps_sharing_their_wake_ups_and_writes(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Telegram's 30 in any second goes out 5 at a time, 6 times a second: the sends of a
    clump leave together, end together, and their records and next claims share one
    transaction (one a part when sends went one at a time), at the same overall rate."""
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS, latency=0.005)
    targets, messages = make_targets(90), make_messages(2)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    await engine.deliver(REF, platform, messages, targets[:1])  # (the writer's connection)
    before = ledger.stats.transactions
    report = await engine.deliver(REF, platform, messages, targets[1:])
    assert report.ok and report.sent == 178
    times = [at for _, _, at in platform.calls[2:]]
    together = collections.Counter(times)
    assert max(together.values()) == 5
    assert sum(n for n in together.values() if n == 5) >= 0.9 * len(times)
    writes = ledger.stats.transactions - before
    assert writes < 0.3 * len(times)
    assert not windows_exceeded(times, window=1.0, limit=30)
    assert times[-1] - times[0] <= (len(times) - 1) / 30 * 1.03
