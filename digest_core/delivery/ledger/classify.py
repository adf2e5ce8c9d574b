"""Planning's pure part: what each target of a batch needs, decided from the rows found."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from digest_core.delivery.ledger.schema import PartState


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
    delivery_id, n_parts, revision = situation.delivery_id, situation.n_parts, situation.revision
    # (resolved target id, part) -> the row of the latest generation to complete
    current: dict[tuple[str, int], FoundRow] = {}
    # parts an older generation of this revision sent
    sent_before: set[tuple[str, int]] = set()
    # resolved target id -> other revision of the day -> parts sent under it
    other_revisions: dict[str, dict[str, set[int]]] = {}
    # resolved target id -> parts a correction of the day sent it
    corrected: dict[str, int] = {}
    for row in rows:
        final = alias[row.target]
        if row.delivery_id in situation.corrections:
            sent = row.state is PartState.SENT and row.part < n_parts
            corrected[final] = corrected.get(final, 0) + int(sent)
        elif row.delivery_id == delivery_id:
            key = (final, row.part)
            if key not in current or row.rank(final) > current[key].rank(final):
                current[key] = row
        elif row.state == PartState.SENT:
            other = situation.revisions[row.delivery_id]
            if other == revision:
                sent_before.add((final, row.part))
            else:
                other_revisions.setdefault(final, {}).setdefault(other, set()).add(row.part)
    result = Classification()
    for target in finals:
        keys = [(target, part) for part in range(n_parts)]
        if target in corrected and not any(k in current for k in keys):
            result.already[target] = corrected[target]
            continue
        if target in other_revisions and not any(k in current or k in sent_before for k in keys):
            # the day's issue reached it under another revision: a correction is not sent
            # again without force
            got_revision, got = max(
                other_revisions[target].items(), key=lambda kv: (len(kv[1]), kv[0])
            )
            result.superseded[target] = got_revision
            result.already[target] = len(got)
            continue
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
    return result
