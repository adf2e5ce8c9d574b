"""Corrections of a delivery whose targets got different variants (formats) of the issue, on
SQLite and PostgreSQL: each target compared with and corrected to its own variant, a cut run
resumed in it, and the rows of a schema-7 ledger (all full) still correctable after the upgrade."""

from __future__ import annotations

import datetime as dt
import random

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.delivery.ledger import FULL_VARIANT, CorrectionAction, corrections, part_digests
from digest_core.delivery.ledger.migrate import lock_for_upgrade, upgrade
from digest_core.models import IssueRef
from digest_core.platform import PlatformLimits, Rate, Target, TargetKind
from digest_core.publishing.corrections import correct
from digest_core.rendering import Message
from digest_core.testing import ManualClock, open_ledger, part_counts
from tests.delivery.test_corrections import EditingPlatform

DAY = dt.date(2026, 10, 27)
R1, R2 = (IssueRef(date=DAY, revision=r) for r in ("rev1", "rev2"))
FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})
ZONE = dt.UTC
CHANNELS = [Target("fake", f"ch{i}", TargetKind.CHANNEL) for i in range(2)]
COMPACT = [Target("fake", f"dm{i}", TargetKind.PRIVATE) for i in range(3)]
HEADLINE = [Target("fake", "hl0", TargetKind.PRIVATE)]


def _messages(variant: str, *labels: str) -> list[Message]:
    """Part i of ``variant`` reads ``<variant> <labels[i]> i+1``."""
    return [Message({"text": f"{variant} {label} {i + 1}"}) for i, label in enumerate(labels)]


def _revision(full: tuple[str, ...], compact: str, headline: str) -> dict[str, list[Message]]:
    return {
        "full": _messages("full", *full),
        "compact": _messages("compact", compact),
        "headline": _messages("headline", headline),
    }


async def _posted(ledger: Ledger, clock: ManualClock) -> tuple[EditingPlatform, DeliveryEngine]:
    """R1 posted: the channels in full (three parts), subscribers compact or headline (one)."""
    platform = EditingPlatform(clock, limits=FAST)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    posted = _revision(("a", "b", "c"), "x", "h")
    # the compact run first: the delivery's first run no longer decides what it showed
    for variant, targets in (("compact", COMPACT), ("full", CHANNELS), ("headline", HEADLINE)):
        report = await engine.deliver(R1, platform, posted[variant], targets, variant=variant)
        assert report.ok
    return platform, engine


async def test_each_target_is_planned_and_corrected_in_its_own_variant(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform, engine = await _posted(ledger, clock)
    sends = len(platform.sent)
    new = _revision(("a", "B", "c"), "X", "h")  # the full part 2 and the compact one changed
    digests = {v: [m.digest for m in messages] for v, messages in new.items()}

    plan = await ledger.plan_correction(R2, "fake", digests)

    assert plan is not None and plan.unchanged == 2 * 2 + 1  # full parts 1, 3; the headline
    planned = {t.id: rows for t, rows in plan.target_rows()}
    assert set(planned) == {t.id for t in CHANNELS + COMPACT}  # the headline did not change
    for target in CHANNELS:
        [row] = planned[target.id]
        assert (row.part, row.action, row.variant) == (1, CorrectionAction.EDIT, "full")
    for target in COMPACT:
        [row] = planned[target.id]
        assert (row.part, row.action, row.variant) == (0, CorrectionAction.EDIT, "compact")

    report = await correct(engine, R2, platform, new, zone=ZONE)

    assert (report.edited, report.added, report.removed) == (5, 0, 0) and report.ok
    assert len(platform.sent) == sends  # nothing sent anew
    for target in CHANNELS:
        assert platform.texts(target.id) == ["full a 1", "full B 2", "full c 3"]
    for target in COMPACT:
        assert platform.texts(target.id) == ["compact X 1"]
    assert platform.texts("hl0") == ["headline h 1"]
    edits = len(platform.edits)
    idle = await correct(engine, R2, platform, new, zone=ZONE)
    assert idle.changed == 0 and idle.ok and len(platform.edits) == edits


async def test_the_full_issue_losing_a_part_deletes_it_and_leaves_the_compact_one(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform, engine = await _posted(ledger, clock)
    new = _revision(("a", "b"), "x", "h")

    report = await correct(engine, R2, platform, new, zone=ZONE)

    assert (report.edited, report.removed, report.added) == (0, 2, 0) and report.ok
    for target in CHANNELS:
        assert platform.texts(target.id) == ["full a 1", "full b 2"]
    assert {t for t, _ in platform.deletes} == {t.id for t in CHANNELS}
    for target in COMPACT:
        assert platform.texts(target.id) == ["compact x 1"]
    assert (await correct(engine, R2, platform, new, zone=ZONE)).changed == 0


async def test_a_cut_correction_resumes_each_target_in_its_variant(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform, engine = await _posted(ledger, clock)
    new = _revision(("a", "B", "c"), "X", "H")
    # planned, then the process dies before any edit
    digests = {v: [m.digest for m in messages] for v, messages in new.items()}
    assert await ledger.plan_correction(R2, "fake", digests) is not None

    report = await correct(engine, R2, platform, new, zone=ZONE)

    assert report.resumed == len(CHANNELS + COMPACT + HEADLINE) and report.ok
    assert report.edited == len(CHANNELS + COMPACT + HEADLINE)
    assert platform.texts("ch0") == ["full a 1", "full B 2", "full c 3"]
    assert platform.texts("dm0") == ["compact X 1"]
    assert platform.texts("hl0") == ["headline H 1"]


async def test_a_variant_the_correction_lacks_is_corrected_to_the_full_issue(
    ledger: Ledger, clock: ManualClock
) -> None:
    """A caller with the full rendering only (the old interface): the subscribers' messages
    become the full issue's, with the missing parts added, as before variants."""
    platform, engine = await _posted(ledger, clock)
    full = _messages("full", "a", "B", "c")

    report = await correct(engine, R2, platform, full, zone=ZONE)

    assert report.ok and report.added == 2 * len(COMPACT + HEADLINE)
    assert platform.texts("dm0") == ["full a 1", "full B 2", "full c 3"]
    assert (await correct(engine, R2, platform, full, zone=ZONE)).changed == 0


async def test_a_schema_7_ledger_keeps_its_deliveries_correctable(
    ledger_url: str, clock: ManualClock
) -> None:
    """Rows and digests written before variants (schema 7) are the full variant's."""
    engine = create_async_engine(ledger_url)
    now = clock.now().astimezone(dt.UTC).replace(tzinfo=None)
    old = _messages("full", "a", "b")
    try:
        async with engine.begin() as conn:
            await lock_for_upgrade(conn)
            await conn.run_sync(lambda c: upgrade(c, to="0007"))
            delivery_id = (
                await conn.execute(
                    sa.text(
                        "INSERT INTO deliveries (issue_date, revision, platform, generation, "
                        "forced, parts, created_at) VALUES (:d, 'rev1', 'fake', 1, false, 2, :t) "
                        "RETURNING id"
                    ),
                    {"d": DAY, "t": now},
                )
            ).scalar_one()
            for n, target in enumerate(["ch0", "dm0"]):
                for part in range(2):
                    await conn.execute(
                        sa.text(
                            "INSERT INTO parts (delivery_id, target, kind, part, state, "
                            "message_id, attempts, created_at, updated_at) VALUES "
                            "(:d, :t, 'private', :p, 'sent', :m, 1, :now, :now)"
                        ),
                        {
                            "d": delivery_id,
                            "t": target,
                            "p": part,
                            "m": str(10 * n + part),
                            "now": now,
                        },
                    )
            for part, message in enumerate(old):
                await conn.execute(
                    sa.text(
                        "INSERT INTO part_digests (delivery_id, part, digest) VALUES (:d, :p, :g)"
                    ),
                    {"d": delivery_id, "p": part, "g": message.digest},
                )
    finally:
        await engine.dispose()

    async with open_ledger(clock, ledger_url) as ledger:  # upgraded to the current schema
        async with ledger._tx() as conn:
            variants = (await conn.execute(sa.select(part_digests.c.variant))).scalars().all()
        assert variants == [FULL_VARIANT, FULL_VARIANT]
        platform = EditingPlatform(clock, limits=FAST)
        for n, target in enumerate(["ch0", "dm0"]):
            for part, message in enumerate(old):
                platform.shown[(target, str(10 * n + part))] = message
        new = {**_revision(("a", "B"), "x", "h")}
        report = await correct(
            DeliveryEngine(ledger, clock=clock, rng=random.Random(1)), R2, platform, new, zone=ZONE
        )
        assert (report.edited, report.unchanged, report.added) == (2, 2, 0) and report.ok
        assert platform.texts("dm0") == ["full a 1", "full B 2"]
        assert (await part_counts(ledger, R2))[PartState.SENT] == 4


async def test_a_plan_of_several_batches_lists_exactly_the_rows_it_recorded(
    ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Targets are compared a batch at a time, and a batch's plan is made from the rows it
    inserts (not read back), a few rows per statement: over batches of two targets inserted
    two rows at a time (a channel's three rows span two statements), with edits, deletes and
    parts sent anew in two variants and an unchanged target last, the plan lists exactly what
    a resumed run reads back from the ledger (ids, states, actions, variants), in target
    order; then the correction does it."""
    monkeypatch.setattr(corrections, "_BATCH", 2)  # six targets: three batches
    monkeypatch.setattr(corrections, "_INSERT_CHUNK", 2)
    platform, engine = await _posted(ledger, clock)
    new = {
        "full": _messages("full", "a", "B"),  # part 2 edited, part 3 deleted
        "compact": _messages("compact", "X", "y"),  # part 1 edited, part 2 sent anew
        "headline": _messages("headline", "h"),  # unchanged
    }
    digests = {v: [m.digest for m in messages] for v, messages in new.items()}

    plan = await ledger.plan_correction(R2, "fake", digests)
    again = await ledger.plan_correction(R2, "fake", digests)  # as a run cut before any edit

    assert plan is not None and not plan.resumed and plan.unchanged == 2 + 1  # part 1; hl0
    assert again is not None and again.resumed
    assert plan.entries == again.entries
    planned = {t.id: [(r.part, r.action, r.variant) for r in rows] for t, rows in plan.targets}
    assert list(planned) == ["ch0", "ch1", "dm0", "dm1", "dm2"]
    for target in CHANNELS:
        assert planned[target.id] == [
            (1, CorrectionAction.EDIT, "full"),
            (2, CorrectionAction.DELETE, "full"),
        ]
    for target in COMPACT:
        assert planned[target.id] == [
            (0, CorrectionAction.EDIT, "compact"),
            (1, CorrectionAction.SEND, "compact"),
        ]

    report = await correct(engine, R2, platform, new, zone=ZONE)

    assert (report.edited, report.added, report.removed) == (5, 3, 2) and report.ok
    for target in CHANNELS:
        assert platform.texts(target.id) == ["full a 1", "full B 2"]
    for target in COMPACT:
        assert platform.texts(target.id) == ["compact X 1", "compact y 2"]
    assert platform.texts("hl0") == ["headline h 1"]
