"""Corrections on a virtual clock (SQLite and PostgreSQL): which messages change, revisions
replacing a cut correction."""

from __future__ import annotations

import datetime as dt
import gc
import random
from dataclasses import dataclass, field

from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.errors import MessageGone
from digest_core.models import IssueRef
from digest_core.platform import PlatformLimits, Rate, Target
from digest_core.publishing.corrections import correct
from digest_core.rendering import Message
from digest_core.testing import FakePlatform, ManualClock, make_messages, make_targets

DAY = dt.date(2026, 10, 27)
R1, R2, R3 = (IssueRef(date=DAY, revision=r) for r in ("rev1", "rev2", "rev3"))
FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})
ZONE = dt.UTC


@dataclass
class EditingPlatform(FakePlatform):
    """A FakePlatform that can also edit and delete what it sent (as a chat platform)."""

    #: (target id, message id) -> what the message shows now (deleted ones removed)
    shown: dict[tuple[str, str], Message] = field(default_factory=dict)
    edits: list[tuple[str, str]] = field(default_factory=list)
    deletes: list[tuple[str, str]] = field(default_factory=list)

    async def send(self, target: Target, message: Message, *, key: object = None) -> str:
        message_id = await super().send(target, message, key=key)  # type: ignore[arg-type]
        self.shown[(target.id, message_id)] = message
        return message_id

    def corrected(self, message: Message, note: str) -> Message:
        return Message({**message.payload, "mark": note})

    async def edit(self, target: Target, message_id: str, message: Message) -> None:
        if (target.id, message_id) not in self.shown:
            raise MessageGone("message to edit not found")
        assert self.shown[(target.id, message_id)] != message, "an identical edit"
        self.shown[(target.id, message_id)] = message
        self.edits.append((target.id, message_id))

    async def delete(self, target: Target, message_id: str) -> bool:
        self.shown.pop((target.id, message_id), None)
        self.deletes.append((target.id, message_id))
        return True

    def texts(self, target_id: str) -> list[str]:
        mine = sorted((int(m), v) for (t, m), v in self.shown.items() if t == target_id)
        return [str(v.payload["text"]) for _, v in mine]


def _messages(*labels: str) -> list[Message]:
    """Part i reads ``labels[i] i+1``: parts with the same label look the same."""
    return [Message({"text": f"{label} {i + 1}", "part": i}) for i, label in enumerate(labels)]


async def test_only_changed_parts_are_edited_across_two_corrections(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = EditingPlatform(clock, limits=FAST)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    targets = make_targets(3)
    await engine.deliver(R1, platform, _messages("a", "b", "c"), targets)

    second = await correct(engine, R2, platform, _messages("a", "B", "c"), zone=ZONE)
    third = await correct(engine, R3, platform, _messages("A", "B", "c"), zone=ZONE)

    assert (second.edited, second.unchanged) == (3, 6)
    assert (third.edited, third.unchanged) == (3, 6)
    for target in targets:
        ids = sorted((m for t, m in platform.shown if t == target.id), key=int)
        # part 2 once (rev2), part 1 once (rev3), part 3 never
        assert sorted(m for t, m in platform.edits if t == target.id) == ids[:2]
        assert platform.texts(target.id) == ["A 1", "B 2", "c 3"]
    idle = await correct(engine, R3, platform, _messages("A", "B", "c"), zone=ZONE)
    assert idle.changed == 0 and len(platform.edits) == 6


async def test_a_cut_correction_is_replaced_by_a_newer_revision(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = EditingPlatform(clock, limits=FAST)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    await engine.deliver(R1, platform, _messages("a", "b"), make_targets(2))
    # a correction to rev2 is planned, then the process dies before any edit
    r2 = _messages("a", "X")
    plan = await ledger.plan_correction(R2, platform.name, [m.digest for m in r2])
    assert plan is not None and len(plan.targets) == 2

    report = await correct(engine, R3, platform, _messages("a", "Y", "z"), zone=ZONE)

    assert (report.edited, report.added) == (2, 2) and report.ok
    assert platform.texts("c0") == ["a 1", "Y 2", "z 3"]
    given_up = await ledger.records(states=[PartState.FAILED], limit=10)
    assert {r.last_error for r in given_up} == {"superseded by revision rev3"}
    idle = await correct(engine, R3, platform, _messages("a", "Y", "z"), zone=ZONE)
    assert idle.changed == 0


async def test_a_send_only_platform_is_told_not_edited(ledger: Ledger, clock: ManualClock) -> None:
    platform = FakePlatform(clock, limits=FAST)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    await engine.deliver(R1, platform, make_messages(2), make_targets(2))

    report = await correct(engine, R2, platform, make_messages(2, label="new"), zone=ZONE)

    assert report.changed == 0 and report.note and "send-only" in report.note
    assert len(platform.calls) == 4  # the post's sends only


@dataclass
class FreezeWatching(EditingPlatform):
    """An EditingPlatform noting how many objects sit frozen (``gc.freeze``) at each edit."""

    frozen_during: list[int] = field(default_factory=list)

    async def edit(self, target: Target, message_id: str, message: Message) -> None:
        self.frozen_during.append(gc.get_freeze_count())
        await super().edit(target, message_id, message)


async def test_a_correction_keeps_its_objects_out_of_full_collections_while_it_runs(
    ledger: Ledger, clock: ManualClock
) -> None:
    """As a post (tests/delivery/test_fanout_heap.py): the collector's full passes over a
    100k-target correction's plan and runs stalled the loop for 0.1-0.35 s
    (benchmarks/corrections.py). While a correction plans and edits, they sit in the
    permanent generation; afterwards nothing is left frozen."""
    platform = FreezeWatching(clock, limits=FAST)
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    await engine.deliver(R1, platform, _messages("a", "b"), make_targets(3))
    gc.unfreeze()

    report = await correct(engine, R2, platform, _messages("a", "B"), zone=ZONE)

    assert report.edited == 3 and report.ok
    assert len(platform.frozen_during) == 3 and min(platform.frozen_during) > 0
    assert gc.get_freeze_count() == 0
    assert [platform.texts(f"c{i}") for i in range(3)] == [["a 1", "B 2"]] * 3
