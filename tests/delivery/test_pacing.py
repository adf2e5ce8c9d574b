"""Token buckets, the per-platform pacer and the backoff policy, on plain numbers."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots.discord.spec import DISCORD_LIMITS
from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.delivery.pacing import Backoff, Pacer, TokenBucket
from digest_core.platform import PlatformLimits, Rate, Target, TargetKind
from digest_core.testing import windows_exceeded


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
    pacer.forget_idle(1.0)  # the private chat refilled, the group did not
    assert pacer.ready_at(idle, 1.0) == 1.0
    assert pacer.ready_at(busy, 1.0) == pytest.approx(60 / 17)  # its state was kept


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
