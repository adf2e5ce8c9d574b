"""Retention: old part rows become per-day summaries per target; audit rows go later."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from digest_core.delivery.ledger import Ledger, PartState
from digest_core.delivery.retention import PRUNE_LEASE, RetentionPolicy, prune_once
from digest_core.platform import Target, TargetKind
from digest_core.testing import (
    ManualClock,
    make_issue,
    make_targets,
    open_ledger,
    part_counts,
)

OLD = make_issue(dt.date(2026, 7, 1)).ref
NEW = make_issue(dt.date(2026, 10, 26)).ref
START = dt.datetime(2026, 7, 1, 8, 0, tzinfo=dt.UTC)
TODAY = dt.date(2026, 10, 27)
BEFORE = TODAY - dt.timedelta(days=90)  # 2026-07-29


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


async def deliver(ledger: Ledger, ref: object, targets: list[Target], n: int = 3) -> None:
    """Send every part, except: c1's last part failed, and c2's after part 0."""
    plan = await ledger.plan(ref, "fake", targets, n)  # type: ignore[arg-type]
    for tp in plan.targets:
        for part in tp.parts:
            await ledger.claim(part.id)
            if tp.target.id == "c1" and part.part == n - 1:
                await ledger.mark_failed(part.id, "Rejected: bad")
            elif tp.target.id == "c2" and part.part > 0:
                await ledger.mark_failed(part.id, "gone")
            else:
                await ledger.mark_sent_soon(part.id, f"m{part.id}").wait()


async def old_and_new_days(ledger: Ledger, clock: ManualClock) -> None:
    """The 2026-07-01 issue sent on that day to c0-c3; the 2026-10-26 issue sent now."""
    await deliver(ledger, OLD, make_targets(4))
    await ledger.record_audit("fake", "7", "repost", allowed=True, outcome="old")
    clock.advance((dt.datetime(2026, 10, 27, 8, tzinfo=dt.UTC) - START).total_seconds())
    await deliver(ledger, NEW, make_targets(4))
    await ledger.record_audit("fake", "7", "repost", allowed=True, outcome="new")


async def test_old_rows_become_summaries_and_recent_rows_stay(
    ledger: Ledger, clock: ManualClock
) -> None:
    await old_and_new_days(ledger, clock)
    report = await ledger.prune(
        before=BEFORE, audit_before=clock.now() - dt.timedelta(days=30), batch=4
    )
    assert report.days == [(OLD.date, "fake")]
    assert (report.parts, report.summaries, report.audit) == (12, 4, 1)
    assert sum((await part_counts(ledger, OLD)).values()) == 0
    assert (await part_counts(ledger, NEW))[PartState.SENT] == 9  # untouched
    found = {s.target: s for s in await ledger.summaries(day=OLD.date)}
    assert {t: (s.sent, s.failed, s.unsent) for t, s in found.items()} == {
        "c0": (3, 0, 0),
        "c1": (2, 1, 0),
        "c2": (1, 2, 0),
        "c3": (3, 0, 0),
    }
    assert found["c0"].last_sent_at == START and found["c0"].kind == "private"
    assert [e.outcome for e in await ledger.audit_log()] == ["new"]
    [old_delivery] = await ledger.deliveries(OLD)  # the delivery itself stays
    assert old_delivery.parts == 3
    # pruning again finds nothing more, and counts nothing twice
    again = await ledger.prune(before=BEFORE, audit_before=clock.now() - dt.timedelta(days=30))
    assert (again.days, again.parts, again.audit) == ([], 0, 0)
    assert (await ledger.summaries(day=OLD.date, target="c0"))[0].sent == 3
    last = await ledger.last_summarised("fake", "c3")
    assert last is not None and last.issue_date == OLD.date


async def test_a_pruned_day_is_not_sent_again_unless_forced(
    ledger: Ledger, clock: ManualClock
) -> None:
    await old_and_new_days(ledger, clock)
    await ledger.prune(before=BEFORE, audit_before=clock.now() - dt.timedelta(days=400))
    newcomer = Target("fake", "new", TargetKind.PRIVATE)
    plan = await ledger.plan(OLD, "fake", [*make_targets(4), newcomer], 3)
    todo = {tp.target.id: len(tp.parts) for tp in plan.targets}
    assert todo == {"c0": 0, "c1": 0, "c2": 0, "c3": 0, "new": 3}
    assert [tp.already_sent for tp in plan.targets[:4]] == [3] * 4
    forced = await ledger.plan(OLD, "fake", make_targets(2), 3, force=True)
    assert [len(tp.parts) for tp in forced.targets] == [3, 3]
    # the newcomer's rows of the old issue are recent: the next pruning leaves them
    report = await ledger.prune(before=BEFORE, audit_before=clock.now())
    assert report.parts == 0
    assert (await part_counts(ledger, OLD))[PartState.PENDING] == 9


async def test_the_rows_of_a_repost_are_summarised_with_the_old_ones_once_old(
    ledger: Ledger, clock: ManualClock
) -> None:
    await old_and_new_days(ledger, clock)
    await ledger.prune(before=BEFORE, audit_before=clock.now())
    await deliver(ledger, OLD, make_targets(1), 3)  # nothing for c0: served
    forced = await ledger.plan(OLD, "fake", make_targets(1), 3, force=True)
    resent_at = clock.now()
    for part in forced.targets[0].parts:
        await ledger.claim(part.id)
        await ledger.mark_sent_soon(part.id, "again").wait()
    clock.advance(91 * 86400)
    await ledger.prune(before=BEFORE + dt.timedelta(days=91), audit_before=clock.now())
    assert sum((await part_counts(ledger, OLD)).values()) == 0
    [c0] = await ledger.summaries(day=OLD.date, target="c0")
    assert c0.sent == 6  # 3 of the first delivery, 3 of the forced repost
    assert c0.last_sent_at is not None and c0.last_sent_at >= resent_at


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_pruning_goes_in_small_batches_and_lets_other_work_commit_between(
    ledger: Ledger, clock: ManualClock
) -> None:
    await deliver(ledger, OLD, make_targets(40), 3)  # 120 rows
    clock.advance(120 * 86400)
    row = (await ledger.plan(NEW, "fake", make_targets(1), 1)).targets[0].parts[0]
    assert await ledger.claim(row.id)
    done: list[str] = []

    async def pruning() -> None:
        report = await ledger.prune(before=BEFORE, audit_before=clock.now(), batch=9, pause=1)
        assert report.parts == 120 and report.batches >= 120 // 9
        done.append("pruned")

    task = asyncio.create_task(pruning())
    await asyncio.sleep(0)
    await ledger.mark_sent_soon(row.id, "m").wait()
    done.append("sent")
    await task
    assert done == ["sent", "pruned"]


async def test_one_process_prunes_at_a_time(ledger_url: str, clock: ManualClock) -> None:
    policy = RetentionPolicy(keep_days=90, audit_keep_days=365)
    async with (
        open_ledger(clock, ledger_url, owner="a") as a,
        open_ledger(clock, ledger_url, owner="b") as b,
    ):
        await deliver(a, OLD, make_targets(2))
        clock.advance(120 * 86400)
        assert (await b.acquire_lease(PRUNE_LEASE, ttl=60)).owner == "b"
        assert await prune_once(a, policy, clock=clock, zone=dt.UTC) is None
        assert (await part_counts(a, OLD))[PartState.SENT] == 5
        await b.release_lease(PRUNE_LEASE)
        report = await prune_once(a, policy, clock=clock, zone=dt.UTC)
        assert report is not None and report.parts == 6
        assert await a.lease(PRUNE_LEASE) is None
