"""Planning's pure part: what each target of a batch needs, decided from the rows found."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from digest_core.delivery.ledger.records import PlanEntry, PlannedPart
from digest_core.delivery.ledger.schema import PartState
from digest_core.platform import Target

__all__ = [
    "Classification",
    "FoundRow",
    "Pairs",
    "Situation",
    "all_sent",
    "check_request",
    "classify",
    "counts",
    "entries",
    "fresh_entries",
    "new_rows",
    "split_unsent",
]

#: (requested, resolved) targets of a batch
Pairs = Sequence[tuple[Target, Target]]


@dataclass(frozen=True, slots=True)
class FoundRow:
    """A part row of the platform's deliveries of the day, as planning reads it."""

    id: int
    delivery_id: int
    #: the target id it is recorded under (an earlier id if the target moved since)
    target: str
    part: int
    state: PartState

    def rank(self, final: str) -> tuple[int, int]:
        """Which of two rows of the delivery for one (target, part) counts, highest first: a
        sent one, else the one recorded under the current id, else the oldest (lowest id)."""
        return (2 if self.state is PartState.SENT else int(self.target == final), -self.id)


@dataclass(frozen=True, slots=True)
class Situation:
    """What the classification of a batch depends on besides the rows."""

    #: the delivery (generation) being completed
    delivery_id: int
    #: the revision being delivered
    revision: str
    #: the day's deliveries on the platform -> their revision; empty with ``force`` (a new
    #: generation: nothing read, every part planned)
    revisions: Mapping[int, str]
    n_parts: int
    #: rows this ledger instance has in flight (in a live delivery)
    live_rows: AbstractSet[int] = frozenset()
    #: another owner holds the platform's live delivery lease: every row in flight is live
    foreign: bool = False
    #: the day's corrections (edits in place): a target with rows in one got the day's issue
    #: through it, and a post sends it nothing (an unfinished correction is resumed by
    #: ``correct``, never sent as new messages)
    corrections: AbstractSet[int] = frozenset()


@dataclass(slots=True)
class Classification:
    """What to do for a batch of resolved targets. Lists are in target, then part order."""

    #: (target, part) with no row in the delivery: insert as pending
    inserts: list[tuple[str, int]] = field(default_factory=list)
    #: (target, part, row id): an unsent row of the delivery the target's plan uses
    kept: list[tuple[str, int, int]] = field(default_factory=list)
    #: ids of kept rows that failed or went gone: put back to pending
    resets: list[int] = field(default_factory=list)
    #: target -> ids of kept rows recorded under an earlier id: move them to the target
    retarget: dict[str, list[int]] = field(default_factory=dict)
    #: (target, part) found sent in the delivery or an older generation of the revision
    sent: list[tuple[str, int]] = field(default_factory=list)
    #: target -> parts it already got (sent, or under ``superseded``'s revision)
    already: dict[str, int] = field(default_factory=dict)
    #: target -> the other revision of the day it got (a part of) and nothing of this one:
    #: nothing is planned for it
    superseded: dict[str, str] = field(default_factory=dict)
    #: targets with a row in flight in a live delivery: left out, so parts keep their order
    live: set[str] = field(default_factory=set)


def classify(
    finals: Sequence[str],
    rows: Iterable[FoundRow],
    alias: Mapping[str, str],
    situation: Situation,
) -> Classification:
    """Classify every part of every resolved target in ``finals`` (distinct ids).

    ``rows`` are the rows of the day's deliveries in ``situation.revisions`` recorded under
    any id of ``alias`` (every id a row may be recorded under -> its resolved target), in any
    order: the result does not depend on it. Without force (``revisions`` given) a part found
    sent (in the delivery, or in an older generation of the same revision) is not planned
    again; a target that got only another revision of the day gets nothing; an existing unsent
    row is kept (failed or gone ones reset, ones under an earlier id moved); a missing one is
    inserted. A row in flight that this instance holds, or any while another owner holds the
    delivery lease, makes its target live. Every other part (pending, failed, gone, unknown,
    in flight of a dead run) is planned exactly once.
    """
    seen = _Seen.read(rows, alias, situation)
    result = Classification()
    for target in finals:
        _decide(target, seen, situation, result)
    return result


@dataclass(slots=True)
class _Seen:
    """The rows found, sorted by what they say about the delivery being completed."""

    #: (resolved target id, part) -> the row of the latest generation to complete
    current: dict[tuple[str, int], FoundRow] = field(default_factory=dict)
    #: parts an older generation of this revision sent
    sent_before: set[tuple[str, int]] = field(default_factory=set)
    #: resolved target id -> other revision of the day -> parts sent under it
    other_revisions: dict[str, dict[str, set[int]]] = field(default_factory=dict)
    #: resolved target id -> parts a correction of the day sent it
    corrected: dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(
        cls, rows: Iterable[FoundRow], alias: Mapping[str, str], situation: Situation
    ) -> _Seen:
        seen = cls()
        current, n_parts = seen.current, situation.n_parts
        for row in rows:
            final = alias[row.target]
            if row.delivery_id in situation.corrections:
                sent = row.state is PartState.SENT and row.part < n_parts
                seen.corrected[final] = seen.corrected.get(final, 0) + int(sent)
            elif row.delivery_id == situation.delivery_id:
                key = (final, row.part)
                if key not in current or row.rank(final) > current[key].rank(final):
                    current[key] = row
            elif row.state == PartState.SENT:
                other = situation.revisions[row.delivery_id]
                if other == situation.revision:
                    seen.sent_before.add((final, row.part))
                else:
                    by_revision = seen.other_revisions.setdefault(final, {})
                    by_revision.setdefault(other, set()).add(row.part)
        return seen


def _decide(target: str, seen: _Seen, situation: Situation, result: Classification) -> None:
    """Classify every part of one resolved target into ``result`` (see :func:`classify`)."""
    current, sent_before = seen.current, seen.sent_before
    keys = [(target, part) for part in range(situation.n_parts)]
    if target in seen.corrected and not any(k in current for k in keys):
        result.already[target] = seen.corrected[target]
        return
    if target in seen.other_revisions and not any(k in current or k in sent_before for k in keys):
        # the day's issue reached it under another revision: a correction is not sent
        # again without force
        got_revision, got = max(
            seen.other_revisions[target].items(), key=lambda kv: (len(kv[1]), kv[0])
        )
        result.superseded[target] = got_revision
        result.already[target] = len(got)
        return
    for key in keys:
        found = current.get(key)
        if (found is None and key in sent_before) or (
            found is not None and found.state is PartState.SENT
        ):
            result.sent.append(key)
            result.already[target] = result.already.get(target, 0) + 1
        elif found is None:
            result.inserts.append(key)
        else:
            result.kept.append((target, key[1], found.id))
            if found.target != target:  # recorded under an earlier id
                result.retarget.setdefault(target, []).append(found.id)
            if found.state in (PartState.FAILED, PartState.GONE):
                result.resets.append(found.id)
            elif found.state is PartState.IN_FLIGHT and (
                found.id in situation.live_rows or situation.foreign
            ):
                result.live.add(target)


def check_request(platform: str, requested: Iterable[Target], n_parts: int) -> None:
    """Refuse a plan that cannot be made.

    Raises:
        ValueError: ``n_parts`` is less than 1, or a target is on another platform.
    """
    if n_parts < 1:
        raise ValueError("a delivery needs at least one part")
    for req in requested:
        if req.platform != platform:
            raise ValueError(f"target {req} is not on platform {platform!r}")


def new_rows(
    keys: Iterable[tuple[str, int]],
    kinds: Mapping[str, str],
    *,
    delivery_id: int,
    now: dt.datetime,
    variant: str | None,
) -> list[dict[str, Any]]:
    """The pending part rows to insert for ``keys`` (target id, part), in their order;
    ``variant`` None (the full one) leaves the column out, so it is stored NULL."""
    rows = [
        {
            "delivery_id": delivery_id,
            "target": target_id,
            "kind": kinds[target_id],
            "part": part,
            "state": PartState.PENDING.value,
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
        }
        for target_id, part in keys
    ]
    if variant is not None:  # (full rows leave it NULL: the common path unchanged)
        for row in rows:
            row["variant"] = variant
    return rows


def split_unsent(
    unsent: Iterable[tuple[int, str, int, str, int]], live: AbstractSet[str]
) -> tuple[dict[str, list[PlannedPart]], dict[str, int]]:
    """The unsent rows of the delivery (id, target, part, state, attempts; in target and part
    order) as (target -> parts to send, in that order; live target -> its rows in flight
    elsewhere, which are left to the live delivery)."""
    todo: dict[str, list[PlannedPart]] = {}
    in_progress: dict[str, int] = {}
    for row_id, target_id, part, state, attempts in unsent:
        if target_id in live:
            in_progress[target_id] = in_progress.get(target_id, 0) + 1
        else:
            todo.setdefault(target_id, []).append(
                PlannedPart(row_id, part, PartState(state), attempts)
            )
    return todo, in_progress


def entries(
    pairs: Pairs,
    todo: Mapping[str, Sequence[PlannedPart]],
    already: Mapping[str, int],
    in_progress: Mapping[str, int],
    superseded: Mapping[str, str],
) -> list[PlanEntry]:
    """One plan entry per (requested, resolved) pair, in their order."""
    return [
        (
            req.id,
            req.kind.value,
            t.id,
            tuple(todo.get(t.id, ())),
            already.get(t.id, 0),
            in_progress.get(t.id, 0),
            superseded.get(t.id),
        )
        for req, t in pairs
    ]


def all_sent(pairs: Pairs, n_parts: int) -> list[PlanEntry]:
    """The entries of targets that got every part: nothing to send."""
    return [(req.id, req.kind.value, t.id, (), n_parts, 0, None) for req, t in pairs]


def fresh_entries(
    pairs: Pairs, ids: Mapping[tuple[str, int], int], n_parts: int
) -> list[PlanEntry]:
    """The entries of targets whose every part was just inserted pending (``ids``: the
    inserted row ids by (target, part))."""
    pending = PartState.PENDING
    return [
        (
            req.id,
            req.kind.value,
            t.id,
            tuple(PlannedPart(ids[t.id, part], part, pending, 0) for part in range(n_parts)),
            0,
            0,
            None,
        )
        for req, t in pairs
    ]


def counts(found: Iterable[PlanEntry]) -> tuple[int, int]:
    """(targets that got another revision of the day, targets delivered by another run)."""
    superseded = live = 0
    for entry in found:
        superseded += entry[6] is not None
        live += bool(entry[5])
    return superseded, live
