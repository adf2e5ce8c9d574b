"""Token buckets, the per-platform pacer and the backoff policy, on plain numbers."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots.discord.spec import DISCORD_LIMITS
from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.delivery.pacing import Backoff, Pacer, SendWindow, TokenBucket, clump_size
from digest_core.platform import PlatformLimits, Rate, Target, TargetKind
from digest_core.testing import ManualClock, windows_exceeded


def drain(bucket: TokenBucket, n: int, *, start: float = 0.0) -> list[float]:
    """Take ``n`` tokens as early as the bucket allows; the times they were taken."""
    now, times = start, []
    for _ in range(n):
        now += bucket.delay(now)
        bucket.take(now)
        times.append(now)
    return times


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (Rate(1.0, 3), [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]),
        (Rate(2.0, 1), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]),
        (Rate(20 / 60, 1), [0.0, 3.0, 6.0, 9.0, 12.0, 15.0]),
    ],
)
def test_bucket_spends_the_burst_then_paces(rate: Rate, expected: list[float]) -> None:
    assert drain(TokenBucket(rate, now=0.0), 6) == pytest.approx(expected)


def test_bucket_refills_only_up_to_its_burst() -> None:
    bucket = TokenBucket(Rate(1.0, 3), now=0.0)
    drain(bucket, 3)
    # an hour idle buys a burst of 3, not 3600 sends
    assert drain(bucket, 5, start=3600.0) == pytest.approx([3600, 3600, 3600, 3601, 3602])


def test_bucket_rejects_impossible_rates() -> None:
    with pytest.raises(ValueError):
        TokenBucket(Rate(0.0, 1), now=0.0)
    with pytest.raises(ValueError):
        TokenBucket(Rate(1.0, 0), now=0.0)


@given(
    per_second=st.floats(0.05, 100.0),
    burst=st.integers(1, 30),
    gaps=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=80),
)
def test_bucket_never_allows_more_than_burst_plus_rate_times_window(
    per_second: float, burst: int, gaps: list[float]
) -> None:
    """Whatever the arrival pattern, sends in any window W number at most burst + rate * W."""
    bucket = TokenBucket(Rate(per_second, burst), now=0.0)
    now, times = 0.0, []
    for gap in gaps:
        now += gap
        now += bucket.delay(now)
        bucket.take(now)
        times.append(now)
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            window = times[j] - start
            assert j - i + 1 <= burst + per_second * window + 1e-6


@pytest.mark.parametrize(
    ("limits", "kind", "window", "limit"),
    [
        (TELEGRAM_LIMITS, TargetKind.GROUP, 60.0, 20),  # 20/min per group
        (TELEGRAM_LIMITS, TargetKind.CHANNEL, 60.0, 20),
        (TELEGRAM_LIMITS, TargetKind.PRIVATE, 1.0, 3),  # ~1/s, bursts of 3 tolerated
        (TELEGRAM_LIMITS, TargetKind.PRIVATE, 3.0, 3),  # as counted: 3 in any 3 s
        (DISCORD_LIMITS, TargetKind.CHANNEL, 5.0, 5),  # 5 per 5 s per channel
    ],
)
def test_default_limits_keep_every_window_within_the_documented_limit(
    limits: PlatformLimits, kind: TargetKind, window: float, limit: int
) -> None:
    times = drain(TokenBucket(limits.for_kind(kind), now=0.0), 200)
    assert not windows_exceeded(times, window=window, limit=limit)
    # and the pacing is not needlessly slow: 200 sends take at most ~ 200 / rate
    assert times[-1] <= 200 / limits.for_kind(kind).per_second


def test_pacer_defers_only_the_rate_limited_target() -> None:
    pacer = Pacer(TELEGRAM_LIMITS, now=0.0)
    slow, other = Target("tg", "1", TargetKind.PRIVATE), Target("tg", "2", TargetKind.PRIVATE)
    pacer.take(slow, 0.0)
    pacer.defer(slow, 30.0)
    assert pacer.ready_at(slow, 1.0) == 30.0
    assert pacer.ready_at(other, 1.0) == 1.0
    pacer.defer(slow, 10.0)  # a shorter deferral never shortens a longer one
    assert pacer.ready_at(slow, 1.0) == 30.0


def test_pacer_overall_bucket_is_shared_by_all_targets() -> None:
    pacer = Pacer(PlatformLimits(Rate(10.0, 2), {}), now=0.0)
    for i in range(2):
        pacer.take(Target("tg", str(i)), 0.0)
    assert pacer.overall_delay(0.0) == pytest.approx(0.1)


def test_pacer_forgets_idle_targets() -> None:
    pacer = Pacer(TELEGRAM_LIMITS, now=0.0)
    busy, idle = Target("tg", "busy", TargetKind.GROUP), Target("tg", "idle", TargetKind.PRIVATE)
    for _ in range(3):
        pacer.take(busy, 0.0)
    pacer.take(idle, 0.0)
    for _ in pacer.forget_idle_steps(1.0):  # the private chat refilled, the group did not
        pass
    assert pacer.ready_at(idle, 1.0) == 1.0
    assert pacer.ready_at(busy, 1.0) == pytest.approx(60 / 17)  # its state was kept


async def send_through(
    window: SendWindow, latencies: list[float], clock: ManualClock, *, seed: int = 0
) -> tuple[list[float], list[float]]:
    """Send one request per latency at once through ``window``: (when each turn began, when
    the platform counted each: somewhere between it leaving and its answer)."""
    rng = random.Random(seed)
    starts: list[float] = []
    arrivals: list[float] = []

    async def one(latency: float) -> None:
        slot = window.reserve(clock.monotonic())
        await slot.wait(clock)
        start = clock.monotonic()
        starts.append(start)
        arrivals.append(start + rng.uniform(0.0, latency))
        await clock.sleep(latency)
        slot.done(clock.monotonic())

    await asyncio.gather(*(one(latency) for latency in latencies))
    return starts, arrivals


@given(
    count=st.integers(1, 30),
    latencies=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=120),
    seed=st.integers(0, 1000),
)
async def test_send_window_never_lets_the_platform_count_more_than_its_limit(
    count: int, latencies: list[float], seed: int
) -> None:
    """However requests' latencies differ, the platform (counting each on arrival, anywhere
    between its leaving and its answer) never sees more than ``count`` in one window."""
    _, arrivals = await send_through(
        SendWindow(count, 1.0, now=0.0), latencies, ManualClock(), seed=seed
    )
    assert not windows_exceeded(arrivals, window=1.0, limit=count)


@pytest.mark.parametrize(
    ("spread", "first", "last"), [(30, 23 * 1.01, 23 * 1.01), (None, 23.0, 699 / 30 * 1.01)]
)
async def test_send_window_goes_at_the_limit_less_one_latency_per_window(
    spread: int | None, first: float, last: float
) -> None:
    clock = ManualClock()
    window = SendWindow(30, 1.0, now=0.0, spread=spread)
    starts = sorted((await send_through(window, [0.01] * 700, clock))[0])
    # in bursts of 30 (spread=30): 23 windows after the first, each one latency longer than
    # the limit's; spread over each window by default, as 30 a second and one latency
    assert first - 1e-9 <= starts[-1] <= last + 1e-9
    assert starts[2] == 0.0


def test_send_window_turns_go_out_in_clumps_of_its_spread() -> None:
    """30 in any second, 3 at a time: the turns reserved together share a time, one clump a
    tenth of a second; a turn that comes while a clump has room joins it (at once if its time
    has passed), and one that comes after the next clump is due starts a new one."""
    window = SendWindow(30, 1.0, now=0.0, spread=3)
    assert [window.reserve(0.0)._at for _ in range(7)] == pytest.approx(
        [0.0] * 3 + [0.1] * 3 + [0.2]
    )
    assert window.reserve(0.15)._at == pytest.approx(0.2)  # room in the clump at 0.2
    assert window.reserve(0.25)._at == pytest.approx(0.25)  # joins it late, going at once
    assert window.reserve(0.31)._at == pytest.approx(0.31)  # the next clump was due at 0.3
    lone = SendWindow(30, 1.0, now=0.0, spread=3)
    assert [lone.reserve(t)._at for t in (0.0, 0.01, 0.02, 0.03)] == pytest.approx(
        [0.0, 0.01, 0.02, 0.1]
    )


@pytest.mark.parametrize(("count", "spread"), [(30, 5), (50, 5), (20, 2), (7, 1), (1, 1), (60, 10)])
def test_a_send_window_clumps_about_a_sixth_of_its_count_and_whole_clumps_a_window(
    count: int, spread: int
) -> None:
    assert SendWindow(count, 1.0, now=0.0).spread == spread == clump_size(count)


async def test_a_clump_split_by_a_late_turn_goes_out_together_again() -> None:
    """Turns of one clump that left a few milliseconds apart (a late one joined it) are
    waited for together a window later: the next clump goes at its last answer's time, not
    split for good (each split clump is a wake-up of the loop more, for every window)."""
    clock = ManualClock()
    window = SendWindow(3, 1.0, now=0.0, spread=3)
    first = []
    for late in (0.0, 0.004, 0.008):  # one clump, its turns joining a little late
        await clock.sleep(late - clock.monotonic())
        slot = window.reserve(clock.monotonic())
        assert slot.begin_if_due(clock.monotonic())
        first.append(slot)
    second = [window.reserve(clock.monotonic()) for _ in range(3)]
    for slot in first:
        slot.done(slot.start + 0.002)
    waited = await asyncio.gather(*(slot.wait(clock) for slot in second))
    assert [slot.start for slot in second] == pytest.approx([1.010] * 3)
    assert len(set(waited)) == 1


async def test_a_hung_request_holds_the_window_for_its_grace_only() -> None:
    clock = ManualClock()
    window = SendWindow(2, 1.0, now=0.0, grace=3.0, spread=2)
    starts, _ = await send_through(window, [60.0, 0.0, 0.0, 0.0], clock)
    # the third waits for the first's answer, counted as arrived 3 s after it left
    assert sorted(starts) == pytest.approx([0.0, 0.0, 1.0, 4.0])


async def test_a_cancelled_turn_does_not_hold_up_later_ones() -> None:
    clock = ManualClock()
    window = SendWindow(1, 1.0, now=0.0, spread=1)
    first = window.reserve(clock.monotonic())
    await first.wait(clock)
    second, third = window.reserve(clock.monotonic()), window.reserve(clock.monotonic())
    waiting = asyncio.ensure_future(second.wait(clock))
    await asyncio.sleep(0)
    waiting.cancel()
    first.done(clock.monotonic())
    # not held up for ever by the second, which never went: at its own time, 1 s apart
    assert await third.wait(clock) == pytest.approx(2.0)


def test_a_turn_begins_at_once_only_when_it_waits_for_nothing() -> None:
    """``begin_if_due``: what ``wait`` does without sleeping (the fan-out's way when pacing
    lets a send go at once); a turn due later, or behind another's answer, must ``wait``."""
    pacer = Pacer(PlatformLimits(overall=Rate(1.0, 1), per_target={}), now=0.0)
    first, second = pacer.send_slot(0.0), pacer.send_slot(0.0)
    assert first.begin_if_due(0.0) and first.start == 0.0
    assert not second.begin_if_due(0.5) and second.start is None  # due at 1.0
    assert second.begin_if_due(1.0) and second.start == 1.0
    window = SendWindow(1, 1.0, now=0.0, spread=1)
    ahead = window.reserve(0.0)
    assert ahead.begin_if_due(0.0)
    behind = window.reserve(5.0)  # due, but it waits to hear from the turn before it
    assert not behind.begin_if_due(5.0) and behind.start is None


def test_platform_windows_are_their_documented_limits() -> None:
    # 30 messages in any second on Telegram, 50 requests on Discord (the send window's)
    assert TELEGRAM_LIMITS.overall == Rate(30.0, burst=30, window=1.0)
    assert DISCORD_LIMITS.overall == Rate(50.0, burst=50, window=1.0)


@pytest.mark.parametrize(
    ("attempt", "ceiling"), [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (30, 60.0)]
)
def test_backoff_full_jitter_stays_under_the_exponential_ceiling(
    attempt: int, ceiling: float
) -> None:
    policy = Backoff(base=1.0, cap=60.0)
    rng = random.Random(7)
    delays = [policy.delay(attempt, rng) for _ in range(500)]
    assert all(0.0 <= d <= ceiling for d in delays)
    # full jitter spreads over the whole range, not just near the ceiling
    assert min(delays) < ceiling * 0.1 and max(delays) > ceiling * 0.9
