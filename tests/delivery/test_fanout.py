"""The delivery engine on a FakePlatform and a virtual clock: order, pacing, retries, targets."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import random
from pathlib import Path

import pytest

from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.delivery import (
    Backoff,
    DayState,
    DeliveryBusy,
    DeliveryEngine,
    Ledger,
    PartOutcome,
    PartState,
    delivery_lease,
)
from digest_core.delivery.reports import due_of
from digest_core.errors import (
    DeliveryError,
    LedgerLost,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    TargetGone,
    TargetMoved,
    TransientError,
)
from digest_core.platform import PartKey, PlatformLimits, Rate, Target, TargetKind
from digest_core.rendering import Message
from digest_core.testing import (
    FakePlatform,
    ManualClock,
    Slow,
    make_issue,
    make_messages,
    make_targets,
    open_ledger,
    part_counts,
    windows_exceeded,
)

REF = make_issue().ref
PARTS = make_messages(3)
FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})


def engine_for(ledger: Ledger, clock: ManualClock, **kwargs: object) -> DeliveryEngine:
    return DeliveryEngine(ledger, clock=clock, rng=random.Random(1), **kwargs)  # type: ignore[arg-type]


def parts_at(platform: FakePlatform, target_id: str) -> list[int]:
    return [m.payload["part"] for m in platform.sent_to(target_id)]


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_every_target_gets_every_part_in_order(ledger: Ledger, clock: ManualClock) -> None:
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS, latency=0.05)
    targets = make_targets(40)
    outcomes: list[PartOutcome] = []
    report = await engine_for(ledger, clock).deliver(
        REF, platform, PARTS, targets, progress=outcomes.append
    )
    assert report.ok and report.sent == 120
    assert all(parts_at(platform, t.id) == [0, 1, 2] for t in targets)
    assert len(outcomes) == 120 and {o.state for o in outcomes} == {PartState.SENT}
    assert (await part_counts(ledger, REF))[PartState.SENT] == 120


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_target_gets_its_parts_together_not_after_everyone_else(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS)
    await engine_for(ledger, clock).deliver(REF, platform, PARTS, make_targets(300))
    first = platform.times("c0")
    # 900 messages at 30/s take 30 s; the first reader's issue is complete within a second
    assert max(first) < 1.0 < max(platform.times())


@pytest.mark.parametrize("in_flight", [1, 2])
async def test_sends_go_in_request_order_each_targets_parts_first(
    ledger: Ledger, clock: ManualClock, in_flight: int
) -> None:
    """Unpaced, the ready target first in request order goes next: a target whose part is
    back goes before the targets not started yet (its next part was ready first)."""
    platform = FakePlatform(clock, limits=FAST, latency=0.01)
    targets = make_targets(4)
    await engine_for(ledger, clock, max_in_flight=in_flight).deliver(REF, platform, PARTS, targets)
    sent = [(t.id, m.payload["part"]) for t, m, _ in platform.calls]
    if in_flight == 1:
        assert sent == [(t.id, part) for t in targets for part in range(3)]
    else:  # two at a time: c0 and c1 together, then c2 and c3
        pairs = [(0, 1), (2, 3)]
        assert sent == [(f"c{i}", part) for pair in pairs for part in range(3) for i in pair], sent


async def test_rerun_is_idempotent(ledger: Ledger, clock: ManualClock) -> None:
    platform = FakePlatform(clock, limits=FAST)
    engine = engine_for(ledger, clock)
    await engine.deliver(REF, platform, PARTS, make_targets(5))
    again = await engine.deliver(REF, platform, PARTS, make_targets(5))
    assert again.sent == 0 and [t.already_sent for t in again.targets] == [3] * 5
    assert len(platform.calls) == 15


async def test_force_resends_everything_as_a_new_generation(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    engine = engine_for(ledger, clock)
    await engine.deliver(REF, platform, PARTS, make_targets(2))
    forced = await engine.deliver(REF, platform, PARTS, make_targets(2), force=True)
    assert (forced.generation, forced.sent) == (2, 6)
    assert parts_at(platform, "c0") == [0, 1, 2, 0, 1, 2]


async def test_one_failing_target_never_blocks_the_others(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST, latency=0.01)
    platform.always("c3", TransientError("502 Bad Gateway"))
    platform.script("c5", Slow(600.0))  # a send that hangs for ten minutes
    engine = engine_for(ledger, clock, backoff=Backoff(base=1.0, cap=8.0, max_attempts=4))
    report = await engine.deliver(REF, platform, PARTS, make_targets(8))
    bad = report.targets[3]
    # never given up: its parts wait, pending, for the next delivery
    assert (bad.sent, bad.failed, bad.skipped, bad.waiting) == (0, 0, 0, 3)
    assert "after 4 attempts" in bad.errors[0]
    assert bad.due is not None and due_of(bad.errors[0].split(": ", 1)[1]) == bad.due
    assert [t.complete for t in report.targets] == [True] * 3 + [False] + [True] * 4
    others = [s.at for s in platform.sent if s.target.id not in ("c3", "c5")]
    assert max(others) < 1.0  # neither the failing nor the slow target held anyone up
    assert parts_at(platform, "c5") == [0, 1, 2]
    assert await ledger.failures(REF) == []
    waiting = await ledger.records(REF, states=[PartState.PENDING], target="c3")
    assert sorted(r.part for r in waiting) == [0, 1, 2]
    assert await ledger.day_state(REF.date, platform="fake") is DayState.PARTIAL


async def test_transient_errors_back_off_exponentially_then_succeed(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.script("c0", *[TransientError("timeout")] * 4)
    engine = engine_for(ledger, clock, backoff=Backoff(base=2.0, cap=60.0, max_attempts=6))
    report = await engine.deliver(REF, platform, PARTS[:1], make_targets(1))
    assert report.ok
    calls = [at for _, _, at in platform.calls]
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    ceilings = [2.0, 4.0, 8.0, 16.0]
    assert len(gaps) == 4 and all(g <= c + 1e-9 for g, c in zip(gaps, ceilings, strict=True))
    record = await ledger.last_sent("fake", "c0")
    assert record is not None and record.attempts == 5


async def test_a_wait_longer_than_max_wait_leaves_the_target_pending_and_due(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A channel's 429 of an hour does not hold the delivery: the others are sent, its parts
    stay pending with the reason and the time they are due, and the next delivery after that
    time sends them (an earlier one in this process does not even try)."""
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS)
    platform.script("c1", RateLimited("Too Many Requests", retry_after=3600))
    engine = engine_for(ledger, clock)
    started = clock.now()
    report = await engine.deliver(REF, platform, PARTS, make_targets(3))
    assert clock.now() - started < dt.timedelta(seconds=60)
    c1 = report.targets[1]
    assert (c1.sent, c1.failed, c1.waiting) == (0, 0, 3)
    assert c1.due is not None and report.due == c1.due
    assert dt.timedelta(seconds=3600) <= c1.due - started <= dt.timedelta(seconds=3601)
    assert report.sent == 6 and not report.ok
    # part 0, the one asked to wait (its later parts wait behind it; the newest of the three
    # is whichever was updated last, a tie when all go at once)
    rows = await ledger.records(REF, states=[PartState.PENDING], target="c1")
    row = min(rows, key=lambda r: r.part)
    assert due_of(row.last_error) == c1.due and "Too Many Requests" in (row.last_error or "")
    again = await engine.deliver(REF, platform, PARTS, make_targets(3))
    assert again.waiting == 3 and len(platform.calls) == 7  # not asked again before it is due
    await clock.sleep(3600)
    last = await engine.deliver(REF, platform, PARTS, make_targets(3))
    assert last.ok and last.sent == 3 and parts_at(platform, "c1") == [0, 1, 2]


async def test_rate_limited_target_waits_its_retry_after_and_only_it(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS)
    platform.script("c1", None, RateLimited("Too Many Requests", retry_after=37))
    report = await engine_for(ledger, clock).deliver(REF, platform, PARTS, make_targets(4))
    assert report.ok
    c1 = [at for t, _, at in platform.calls if t.id == "c1"]
    assert c1[2] - c1[1] >= 37  # the retry honoured retry-after
    assert parts_at(platform, "c1") == [0, 1, 2]  # and order held
    assert max(platform.times("c0") + platform.times("c2") + platform.times("c3")) < 1.0


async def test_rejected_part_is_not_retried_and_later_parts_wait_for_a_fix(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.script("c0", None, Rejected("can't parse entities"))
    outcomes: list[PartOutcome] = []
    report = await engine_for(ledger, clock).deliver(
        REF, platform, PARTS, make_targets(2), progress=outcomes.append
    )
    assert parts_at(platform, "c0") == [0]
    assert len([c for c in platform.calls if c[0].id == "c0"]) == 2
    assert (report.targets[0].failed, report.targets[0].skipped) == (1, 1)
    assert [(o.part, o.state) for o in outcomes if o.target.id == "c0"] == [
        (0, PartState.SENT),
        (1, PartState.FAILED),
        (2, PartState.FAILED),
    ]
    # the next run (renderer fixed) sends the remaining parts in order
    again = await engine_for(ledger, clock).deliver(REF, platform, PARTS, make_targets(2))
    assert again.ok and parts_at(platform, "c0") == [0, 1, 2]


async def test_adapter_bugs_fail_the_part_without_stopping_the_delivery(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.script("c0", KeyError("chat_id"))
    platform.script("c1", DeliveryError("odd"))
    report = await engine_for(ledger, clock).deliver(REF, platform, PARTS, make_targets(3))
    assert [t.failed for t in report.targets] == [1, 1, 0]
    assert report.targets[2].complete


async def test_gone_target_is_deactivated_unsubscribed_and_skipped_later(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    for chat in ("c0", "c1"):
        await ledger.subscribe("fake", chat)
    platform.script("c1", None, TargetGone("Forbidden: bot was blocked by the user"))
    engine = engine_for(ledger, clock)
    subscribers = await ledger.subscribers("fake")
    report = await engine.deliver(REF, platform, PARTS, subscribers)
    assert report.gone == [subscribers[1]]
    assert parts_at(platform, "c1") == [0]
    assert len([c for c in platform.calls if c[0].id == "c1"]) == 2  # never retried
    assert [t.id for t in await ledger.subscribers("fake")] == ["c0"]
    # a channel in config that went away is skipped too, without a send
    later = await engine.deliver(REF, platform, PARTS, subscribers, force=True)
    assert later.inactive == [subscribers[1]]
    assert len([c for c in platform.calls if c[0].id == "c1"]) == 2


async def test_moved_target_gets_the_rest_at_its_new_id(ledger: Ledger, clock: ManualClock) -> None:
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS)
    group = Target("fake", "-4001", TargetKind.GROUP)
    platform.script("-4001", None, TargetMoved("group upgraded", new_target="-1004001"))
    engine = engine_for(ledger, clock)
    report = await engine.deliver(REF, platform, PARTS, [group])
    assert report.ok and report.targets[0].moved_to == "-1004001"
    assert parts_at(platform, "-4001") == [0]
    assert parts_at(platform, "-1004001") == [1, 2]
    # the next issue goes straight to the new id
    forced = await engine.deliver(REF, platform, PARTS, [group], force=True)
    assert forced.sent == 3 and parts_at(platform, "-1004001") == [1, 2, 0, 1, 2]


async def test_a_move_loop_is_cut_off(ledger: Ledger, clock: ManualClock) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.always("a", TargetMoved("moved", new_target="b"))
    platform.always("b", TargetMoved("moved", new_target="a"))
    report = await engine_for(ledger, clock, max_moves=3).deliver(
        REF, platform, PARTS, [Target("fake", "a")]
    )
    assert report.targets[0].failed == 1 and len(platform.calls) == 4


@pytest.mark.parametrize(
    ("kind", "window", "limit"),
    [(TargetKind.GROUP, 60.0, 20), (TargetKind.PRIVATE, 1.0, 3)],
)
@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_per_target_pacing_stays_under_telegram_limits(
    ledger: Ledger, clock: ManualClock, kind: TargetKind, window: float, limit: int
) -> None:
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS)
    messages = make_messages(45)
    targets = make_targets(3, kind=kind)
    report = await engine_for(ledger, clock).deliver(REF, platform, messages, targets)
    assert report.ok
    for t in targets:
        assert parts_at(platform, t.id) == list(range(45))
        times = [at for target, _, at in platform.calls if target.id == t.id]
        assert not windows_exceeded(times, window=window, limit=limit)
    # and not slower than the limit requires: 45 messages at the sustained rate, plus slack
    rate = TELEGRAM_LIMITS.for_kind(kind).per_second
    assert clock.monotonic() <= 45 / rate * 1.05


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_overall_pacing_stays_under_the_bot_limit_and_uses_it(
    ledger: Ledger, clock: ManualClock
) -> None:
    limits = PlatformLimits(overall=Rate(30.0, 5), per_target={})
    platform = FakePlatform(clock, limits=limits, latency=0.2)
    report = await engine_for(ledger, clock).deliver(REF, platform, PARTS, make_targets(200))
    assert report.ok
    calls = [at for _, _, at in platform.calls]
    assert not windows_exceeded(calls, window=1.0, limit=35)  # burst 5 + 30/s
    ideal = (600 - 5) / 30
    assert ideal <= calls[-1] <= ideal * 1.02


async def test_concurrency_is_bounded(ledger: Ledger, clock: ManualClock) -> None:
    in_flight, peak = 0, 0

    class Counting(FakePlatform):
        async def send(self, target: Target, message: object, **kw: object) -> str:  # type: ignore[override]
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                return await super().send(target, message, **kw)  # type: ignore[arg-type]
            finally:
                in_flight -= 1

    platform = Counting(clock, limits=FAST, latency=5.0)
    await engine_for(ledger, clock, max_in_flight=7).deliver(REF, platform, PARTS, make_targets(30))
    assert peak == 7 and len(platform.sent) == 90


async def test_empty_deliveries(ledger: Ledger, clock: ManualClock) -> None:
    platform = FakePlatform(clock, limits=FAST)
    engine = engine_for(ledger, clock)
    assert (await engine.deliver(REF, platform, PARTS, [])).targets == []
    with pytest.raises(ValueError):
        await engine.deliver(REF, platform, [], make_targets(1))


async def test_two_deliveries_at_once_send_each_part_once(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=TELEGRAM_LIMITS, latency=0.5)
    engine = engine_for(ledger, clock)
    targets = make_targets(4)
    first, second = await asyncio.gather(
        engine.deliver(REF, platform, PARTS, targets),
        engine.deliver(REF, platform, PARTS, targets),
    )
    assert all(parts_at(platform, t.id) == [0, 1, 2] for t in targets)
    assert first.sent + second.sent == 12
    # each target went to one of them whole; the other left it in progress
    for a, b in zip(first.targets, second.targets, strict=True):
        assert sorted([(a.sent, a.in_progress), (b.sent, b.in_progress)]) == [(0, 3), (3, 0)]
    assert first.ok and second.ok
    assert (await part_counts(ledger, REF))[PartState.SENT] == 12


async def test_a_send_whose_record_is_lost_fails_the_delivery(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Senders do not wait for their "sent" records (the next claims gather meanwhile): a
    record that cannot be written after the send returned still fails the delivery, which
    never reports it sent."""
    platform = FakePlatform(clock, limits=FAST)
    targets = make_targets(3)
    send = platform.send

    async def send_then_lose(
        target: Target, message: Message, *, key: PartKey | None = None
    ) -> str:
        message_id = await send(target, message, key=key)
        if target == targets[-1] and key is not None and key.part == len(PARTS) - 1:
            # after the record is queued, before the writer commits it
            lost = LedgerLost("the ledger's file was replaced")
            asyncio.get_running_loop().call_soon(ledger.lose, lost)
        return message_id

    platform.send = send_then_lose  # type: ignore[method-assign]
    with pytest.raises(LedgerLost, match="replaced"):
        await engine_for(ledger, clock).deliver(REF, platform, PARTS, targets)
    assert len(platform.sent) == 9


async def test_a_delivery_started_mid_way_leaves_targets_in_flight_to_the_first(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.script("c0", Slow(30.0))  # the first delivery is still sending c0's part 0
    engine = engine_for(ledger, clock)
    first = asyncio.create_task(engine.deliver(REF, platform, PARTS, make_targets(2)))
    await clock.sleep(10.0)
    second = await engine.deliver(REF, platform, PARTS, make_targets(2))
    assert [(t.sent, t.already_sent, t.in_progress) for t in second.targets] == [
        (0, 0, 3),
        (0, 3, 0),
    ]
    assert (await first).sent == 6
    assert parts_at(platform, "c0") == [0, 1, 2] and parts_at(platform, "c1") == [0, 1, 2]


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_another_process_delivering_on_the_platform_makes_a_delivery_busy(
    ledger_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    url = ledger_url
    async with open_ledger(clock, url, owner="a") as a, open_ledger(clock, url, owner="b") as b:
        slow = FakePlatform(clock, limits=TELEGRAM_LIMITS, latency=1.0)
        other = FakePlatform(clock, name="other", limits=FAST)
        # 90 messages to one group at 17/min take about five minutes: far past the lease ttl
        group = [Target("fake", "-1", TargetKind.GROUP)]
        running = asyncio.create_task(
            engine_for(a, clock, lease_ttl=30.0).deliver(REF, slow, make_messages(90), group)
        )
        await clock.sleep(200.0)
        assert not running.done()
        with pytest.raises(DeliveryBusy, match="held by a") as caught:
            await engine_for(b, clock).deliver(REF, slow, PARTS, make_targets(1))
        assert caught.value.holder == "a" and caught.value.platform == "fake"
        assert isinstance(caught.value, DeliveryError)
        # another platform is not held up
        elsewhere = make_targets(1, platform="other")
        assert (await engine_for(b, clock).deliver(REF, other, PARTS, elsewhere)).ok
        assert (await running).sent == 90
        assert await a.lease(delivery_lease("fake")) is None  # released at the end
        assert (await engine_for(b, clock).deliver(REF, slow, PARTS, make_targets(1))).ok
        assert parts_at(slow, "-1") == list(range(90))


async def test_a_cancelled_delivery_leaves_its_in_flight_part_to_the_next_one(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.script("c0", Slow(60.0))
    engine = engine_for(ledger, clock)
    doomed = asyncio.create_task(engine.deliver(REF, platform, PARTS, make_targets(1)))
    await clock.sleep(1.0)
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert await ledger.lease(delivery_lease("fake")) is None
    report = await engine.deliver(REF, platform, PARTS, make_targets(1))
    assert report.ok and report.sent == 3  # part 0 was in flight: it may repeat, never be lost
    assert parts_at(platform, "c0") == [0, 1, 2]


async def test_a_rerun_after_a_move_mid_delivery_sends_nothing_again(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    group = Target("fake", "-1", TargetKind.GROUP)
    platform.script("-1", None, TargetMoved("upgraded to a supergroup", new_target="-1009"))
    engine = engine_for(ledger, clock)
    await engine.deliver(REF, platform, PARTS, [group])
    again = await engine.deliver(REF, platform, PARTS, [group])
    assert again.sent == 0 and again.targets[0].already_sent == 3
    assert (parts_at(platform, "-1"), parts_at(platform, "-1009")) == ([0], [1, 2])


async def test_a_skipped_inactive_target_fails_the_delivery_until_reactivated(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    channel = Target("fake", "-100", TargetKind.CHANNEL)
    platform.script("-100", TargetGone("Forbidden: bot is not a member of the channel chat"))
    engine = engine_for(ledger, clock)
    assert not (await engine.deliver(REF, platform, PARTS, [channel])).ok
    later = await engine.deliver(REF, platform, PARTS, [channel, *make_targets(1)])
    assert later.inactive == [channel] and later.gone == [] and not later.ok
    [gone] = await ledger.inactive_targets("fake")
    assert gone.id == "-100" and gone.reason is not None and "Forbidden" in gone.reason
    assert await ledger.reactivate(channel)  # the bot got its rights back
    back = await engine.deliver(REF, platform, PARTS, [channel])
    assert back.ok and back.sent == 3 and parts_at(platform, "-100") == [0, 1, 2]


async def test_a_corrected_issue_is_not_sent_again_without_force(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    engine = engine_for(ledger, clock)
    await engine.deliver(REF, platform, PARTS, make_targets(2))
    corrected = make_issue(briefs=3).ref
    assert corrected.date == REF.date and corrected.revision != REF.revision
    fixed = make_messages(3, label="fixed")
    report = await engine.deliver(corrected, platform, fixed, make_targets(3))
    assert report.ok and report.sent == 3 and report.failed == 0
    assert [(t.sent_revision, t.already_sent, t.sent) for t in report.targets] == [
        (REF.revision, 3, 0),
        (REF.revision, 3, 0),
        (None, 0, 3),  # a new reader gets the corrected issue
    ]
    assert platform.sent_to("c2") == fixed
    forced = await engine.deliver(corrected, platform, fixed, make_targets(3), force=True)
    assert forced.sent == 9 and platform.sent_to("c0")[3:] == fixed


async def test_a_cut_send_is_outcome_unknown_counted_in_flight_and_sent_again(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A send cut after the request may have left is never put back as "not sent": the row
    is UNKNOWN (counted with the rows in flight) between attempts, retried, and the report
    says it may have arrived twice."""
    platform = FakePlatform(clock, limits=FAST)
    cut = OutcomeUnknown("read timeout", platform="fake", target="c0")
    states: list[PartState] = []

    async def state_between_attempts() -> None:
        await clock.sleep(0.001)  # after the cut, before the backoff ends
        [row] = [r for r in await ledger.records(REF, target="c0") if r.part == 0]
        states.append(row.state)

    platform.script("c0", cut)
    watcher = asyncio.create_task(state_between_attempts())
    engine = engine_for(ledger, clock, backoff=Backoff(base=1.0, cap=1.0))
    report = await engine.deliver(REF, platform, PARTS, make_targets(2))
    await watcher
    assert states == [PartState.UNKNOWN]
    assert report.ok and report.sent == 6 and report.maybe_twice == 1
    assert parts_at(platform, "c0") == [0, 1, 2]
    assert (await part_counts(ledger, REF))[PartState.SENT] == 6


async def test_retries_running_out_on_a_cut_send_leave_it_unknown_not_failed(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    cut = OutcomeUnknown("stopped during the send", platform="fake", target="c0")
    plain = TransientError("502", platform="fake", target="c0")
    platform.script("c0", cut, plain, plain)  # the last attempt's error is a plain one
    outcomes: list[PartOutcome] = []
    engine = engine_for(ledger, clock, backoff=Backoff(base=0.1, max_attempts=3))
    report = await engine.deliver(REF, platform, PARTS, make_targets(2), progress=outcomes.append)
    [c0, c1] = report.targets
    assert (c0.unknown, c0.failed, c0.skipped, c0.sent, c0.waiting) == (1, 0, 0, 0, 3)
    assert c1.complete and not report.ok and report.unknown == 1
    assert [o for o in outcomes if o.target.id == "c0"] == []  # none reached a final state
    [maybe] = await ledger.in_flight(REF)
    assert (maybe.target, maybe.part, maybe.state) == ("c0", 0, PartState.UNKNOWN)
    assert await ledger.day_state(REF.date, platform="fake") is DayState.PARTIAL
    # the next delivery sends it again (at least once) and says it may be a duplicate
    again = await engine.deliver(REF, platform, PARTS, make_targets(2))
    assert again.ok and again.sent == 3 and again.maybe_twice == 1
    assert parts_at(platform, "c0") == [0, 1, 2]
    assert await ledger.day_state(REF.date, platform="fake") is DayState.DONE


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_sends_held_up_by_a_stalled_ledger_go_out_paced_not_together(
    ledger: Ledger, clock: ManualClock
) -> None:
    """The ledger stops answering claims for 4 s mid-delivery (a write lock, a full disk):
    the sends dispatched meanwhile wait for their claims and, once it answers, reach the
    platform at the overall rate, not all at once (Telegram's 429s after a locked SQLite)."""
    limits = PlatformLimits(overall=Rate(30.0, 1), per_target={})
    platform = FakePlatform(clock, limits=limits, latency=0.05)
    claim = ledger.claim
    stall = (1.0, 5.0)

    async def stalled_claim(row_id: int, **kw: int | None) -> bool:
        start = clock.monotonic()
        if stall[0] <= start < stall[1]:
            await clock.sleep(stall[1] - start)  # the database answers only then
        return await claim(row_id, **kw)

    ledger.claim = stalled_claim  # type: ignore[method-assign]
    report = await engine_for(ledger, clock).deliver(REF, platform, PARTS[:1], make_targets(300))
    assert report.ok and len(platform.sent) == 300
    calls = [at for _, _, at in platform.calls]
    assert any(at >= stall[1] for at in calls)  # (the stall did hold sends up)
    assert not windows_exceeded(calls, window=1.0, limit=31)
