"""The ledger: planning only what is missing, generations, state changes, targets, subscribers."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import update

from digest_core.delivery.ledger import SCHEMA_VERSION, Ledger, PartState, schema_version
from digest_core.errors import ConfigError
from digest_core.platform import Target, TargetKind
from digest_core.testing import ManualClock, make_issue, make_targets, open_ledger

REF = make_issue().ref


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def ledger(clock: ManualClock) -> AsyncIterator[Ledger]:
    async with open_ledger(clock) as ledger:
        yield ledger


async def send_all(ledger: Ledger, plan_targets: list[Target], n: int = 3) -> None:
    plan = await ledger.plan(REF, "fake", plan_targets, n)
    for tp in plan.targets:
        for part in tp.parts:
            await ledger.claim(part.id)
            await ledger.mark_sent(part.id, f"m{part.id}")


async def test_plan_inserts_one_pending_row_per_target_and_part(ledger: Ledger) -> None:
    plan = await ledger.plan(REF, "fake", make_targets(4), 3)
    assert plan.generation == 1
    assert [[p.part for p in tp.parts] for tp in plan.targets] == [[0, 1, 2]] * 4
    assert all(p.state is PartState.PENDING for tp in plan.targets for p in tp.parts)
    assert (await ledger.counts(REF))[PartState.PENDING] == 12


async def test_plan_is_idempotent_and_sends_only_what_is_missing(ledger: Ledger) -> None:
    targets = make_targets(3)
    first = await ledger.plan(REF, "fake", targets, 3)
    done = first.targets[0].parts
    for part in done[:2]:
        await ledger.claim(part.id)
        await ledger.mark_sent(part.id, "x")
    again = await ledger.plan(REF, "fake", targets, 3)
    assert again.delivery_id == first.delivery_id
    assert [p.part for p in again.targets[0].parts] == [2]
    assert again.targets[0].already_sent == 2
    assert [len(tp.parts) for tp in again.targets] == [1, 3, 3]
    assert sum((await ledger.counts(REF)).values()) == 9  # no new rows


async def test_plan_adds_rows_for_new_targets_only(ledger: Ledger) -> None:
    await send_all(ledger, make_targets(2))
    plan = await ledger.plan(REF, "fake", make_targets(3), 3)
    assert [len(tp.parts) for tp in plan.targets] == [0, 0, 3]


async def test_in_flight_rows_of_a_dead_run_are_planned_again(ledger: Ledger) -> None:
    plan = await ledger.plan(REF, "fake", make_targets(1), 2)
    await ledger.claim(plan.targets[0].parts[0].id)
    resumed = await ledger.plan(REF, "fake", make_targets(1), 2)
    assert [(p.part, p.state, p.attempts) for p in resumed.targets[0].parts] == [
        (0, PartState.IN_FLIGHT, 1),
        (1, PartState.PENDING, 0),
    ]
    assert [r.part for r in await ledger.in_flight(REF)] == [0]


async def test_failed_rows_are_retried_by_the_next_plan(ledger: Ledger) -> None:
    plan = await ledger.plan(REF, "fake", make_targets(1), 1)
    row = plan.targets[0].parts[0]
    await ledger.claim(row.id)
    await ledger.mark_failed(row.id, "Rejected: bad html")
    assert [f.last_error for f in await ledger.failures(REF)] == ["Rejected: bad html"]
    again = await ledger.plan(REF, "fake", make_targets(1), 1)
    assert [(p.id, p.state) for p in again.targets[0].parts] == [(row.id, PartState.PENDING)]


async def test_force_creates_a_new_generation_and_keeps_history(ledger: Ledger) -> None:
    await send_all(ledger, make_targets(2))
    forced = await ledger.plan(REF, "fake", make_targets(1), 3, force=True)
    assert forced.generation == 2
    assert [len(tp.parts) for tp in forced.targets] == [3]
    # the repost to one chat does not make the next daily run resend to the other
    daily = await ledger.plan(REF, "fake", make_targets(2), 3)
    assert daily.generation == 2
    assert [len(tp.parts) for tp in daily.targets] == [3, 0]
    history = await ledger.deliveries(REF)
    assert [(d.generation, d.forced) for d in history] == [(1, False), (2, True)]
    assert (await ledger.counts(REF))[PartState.SENT] == 6


async def test_state_changes_record_attempts_message_ids_and_aware_times(
    ledger: Ledger, clock: ManualClock
) -> None:
    plan = await ledger.plan(REF, "fake", make_targets(1), 1)
    row = plan.targets[0].parts[0]
    await ledger.claim(row.id)
    await ledger.release(row.id, "TransientError: 502")
    clock.advance(5)
    await ledger.claim(row.id)
    await ledger.mark_sent(row.id, "4711")
    record = await ledger.last_sent("fake", "c0")
    assert record is not None
    assert (record.state, record.attempts, record.message_id) == (PartState.SENT, 2, "4711")
    assert record.last_error is None
    assert record.updated_at == clock.now() and record.updated_at.tzinfo is not None
    assert record.updated_at - record.created_at == dt.timedelta(seconds=5)


async def test_concurrent_state_changes_share_transactions(ledger: Ledger) -> None:
    plan = await ledger.plan(REF, "fake", make_targets(50), 2)
    ids = [p.id for tp in plan.targets for p in tp.parts]
    before = ledger.stats.transactions
    await asyncio.gather(*(ledger.claim(i) for i in ids))
    assert ledger.stats.transactions - before < len(ids) / 10  # group commit
    assert (await ledger.counts(REF))[PartState.IN_FLIGHT] == 100


async def test_gone_target_is_skipped_until_it_subscribes_again(ledger: Ledger) -> None:
    chat = Target("fake", "42", TargetKind.PRIVATE)
    assert await ledger.subscribe("fake", "42")
    plan = await ledger.plan(REF, "fake", [chat], 2)
    await ledger.mark_gone(chat, row_ids=[p.id for p in plan.targets[0].parts], reason="blocked")
    assert await ledger.subscribers("fake") == []
    assert (await ledger.counts(REF))[PartState.GONE] == 2
    skipped = await ledger.plan(REF, "fake", [chat], 2)
    assert (skipped.targets, skipped.inactive) == ((), (chat,))
    assert await ledger.subscribe("fake", "42")  # they unblocked the bot and said /start
    back = await ledger.plan(REF, "fake", [chat], 2)
    assert [p.state for p in back.targets[0].parts] == [PartState.PENDING] * 2


async def test_moved_target_rewrites_rows_subscriber_and_future_plans(ledger: Ledger) -> None:
    old, new = Target("fake", "-100", TargetKind.GROUP), Target("fake", "-1009", TargetKind.GROUP)
    await ledger.subscribe("fake", "-100")
    plan = await ledger.plan(REF, "fake", [old], 3)
    moved = await ledger.move_target(old, new, row_ids=[p.id for p in plan.targets[0].parts])
    assert sorted(moved) == sorted(p.id for p in plan.targets[0].parts)
    assert {r.target for r in await ledger.records(REF)} == {"-1009"}
    assert [t.id for t in await ledger.subscribers("fake")] == ["-1009"]
    # config still names the old id: plans follow the move
    later = await ledger.plan(REF, "fake", [old], 3)
    assert later.targets[0].requested == old and later.targets[0].target == new
    assert len(later.targets[0].parts) == 3


async def test_plan_deduplicates_targets_and_checks_their_platform(ledger: Ledger) -> None:
    chat = Target("fake", "1")
    plan = await ledger.plan(REF, "fake", [chat, chat], 2)
    assert len(plan.targets) == 1
    with pytest.raises(ValueError):
        await ledger.plan(REF, "fake", [Target("other", "1")], 2)
    with pytest.raises(ValueError):
        await ledger.plan(REF, "fake", [chat], 0)


async def test_subscribe_and_unsubscribe_report_changes(ledger: Ledger) -> None:
    assert await ledger.subscribe("fake", "1")
    assert not await ledger.subscribe("fake", "1")
    assert await ledger.subscribe("fake", "2")
    assert [t.id for t in await ledger.subscribers("fake")] == ["1", "2"]
    assert await ledger.unsubscribe("fake", "1")
    assert not await ledger.unsubscribe("fake", "1")
    assert await ledger.subscribers("fake") == [Target("fake", "2", TargetKind.PRIVATE)]


async def test_audit_log_keeps_actions_newest_first(ledger: Ledger) -> None:
    await ledger.record_audit(
        "telegram", "7", "repost", args={"date": "2026-10-27"}, allowed=True, outcome="sent 3"
    )
    await ledger.record_audit("discord", "9", "repost", allowed=False, outcome="denied")
    entries = await ledger.audit_log()
    assert [(e.user_id, e.allowed, e.args) for e in entries] == [
        ("9", False, {}),
        ("7", True, {"date": "2026-10-27"}),
    ]
    assert [e.platform for e in await ledger.audit_log(platform="telegram")] == ["telegram"]


async def test_file_ledger_survives_reopen_and_refuses_a_newer_schema(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'var' / 'ledger.sqlite3'}"
    clock = ManualClock()
    async with Ledger.open(url, clock=clock) as ledger:
        await send_all(ledger, make_targets(2))
    async with Ledger.open(url, clock=clock) as ledger:
        assert (await ledger.counts(REF))[PartState.SENT] == 6
        async with ledger._tx() as conn:  # simulate a database written by a newer release
            await conn.execute(update(schema_version).values(version=SCHEMA_VERSION + 1))
    with pytest.raises(ConfigError, match="newer"):
        async with Ledger.open(url, clock=clock):
            pass


async def test_state_changes_after_close_are_refused(clock: ManualClock) -> None:
    async with open_ledger(clock) as ledger:
        plan = await ledger.plan(REF, "fake", make_targets(1), 1)
    with pytest.raises(RuntimeError):
        await ledger.claim(plan.targets[0].parts[0].id)


async def test_day_counts_cover_every_revision_of_a_day(ledger: Ledger) -> None:
    corrected = make_issue(briefs=3).ref
    await send_all(ledger, make_targets(1))
    await ledger.plan(corrected, "fake", make_targets(1), 2)
    counts = await ledger.day_counts(REF.date, platform="fake")
    assert (counts[PartState.SENT], counts[PartState.PENDING]) == (3, 2)
    assert sum((await ledger.day_counts(REF.date, platform="other")).values()) == 0
