"""Corrections in the ledger: what each target shows of a day, and the rows that change it.

A correction of a day to a new revision is a delivery of that revision with a negative
generation (-1, -2, …), so it is never the delivery an ordinary post completes. Its rows, one
per (target, part), say what the message at that place shows once the row is sent:

- part < ``parts``, ``message_id`` set before the send: an edit of that message;
- part < ``parts``, no ``message_id``: a part the old revision lacked, sent anew after the last;
- part ≥ ``parts``: a surplus message of the old revision, deleted (sent with ``message_id``
  ``""``) or replaced by a short note where deletion is not allowed (its id kept);
- ``message_id`` ``""`` on a sent row: the message was gone (deleted by someone) and stays so.

Messages whose content did not change get a row recorded sent at once (never edited), so a
correction's rows describe the whole post. The content is compared by the digests of
:data:`~digest_core.delivery.ledger.schema.part_digests`, recorded for every delivery.

A delivery's targets may have got different variants (formats) of the issue: channels the full
one, private subscribers a compact one or the headline alone. Each row names its variant (NULL:
:data:`~digest_core.delivery.ledger.schema.FULL_VARIANT`), digests are kept per variant, and a
target is compared with, and corrected to, the new revision in its own variant: ``parts`` above
is the number of parts of that variant. A variant the new revision has no digests for, or the
old delivery recorded none for (rows of schema 7 and older are all full), is taken as full.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.diffing import (
    CorrectionAction,
    Planned,
    Row,
    action,
    behind,
    compare,
    nothing_to_do,
    unchanged,
)
from digest_core.delivery.ledger.engine import generic_plans
from digest_core.delivery.ledger.schema import (
    FULL_VARIANT,
    PartState,
    deliveries,
    part_digests,
    parts,
    targets,
)
from digest_core.delivery.ledger.state import LedgerState, retried
from digest_core.heap import refreeze
from digest_core.models import IssueRef
from digest_core.platform import Target, TargetKind

__all__ = ["CorrectionPlan", "CorrectionRow", "Corrections", "Digests"]

log = logging.getLogger(__name__)

#: targets compared per transaction (as planning's batches: bounded loop time and memory)
_BATCH = 500
#: rows inserted per statement: binding a row's parameters takes ~13 us of the loop's time, and
#: a batch's 1,500 rows bound at once were the longest stretch without a pause
_INSERT_CHUNK = 300
#: the row states a correction still has to act on (failed ones are retried by the next run)
_UNFINISHED = (
    PartState.PENDING.value,
    PartState.IN_FLIGHT.value,
    PartState.UNKNOWN.value,
    PartState.FAILED.value,
)


#: a row's state by its value (a lookup, not an enum call per row read)
_STATES = {s.value: s for s in PartState}


@dataclass(frozen=True, slots=True)
class CorrectionRow:
    """One row a correction still has to act on."""

    id: int
    part: int
    state: PartState
    attempts: int
    action: CorrectionAction
    #: the message edited or deleted (None for a part sent anew)
    message_id: str | None
    #: the variant (format) of the new revision the row's message is to show
    variant: str = FULL_VARIANT


@dataclass(frozen=True)
class CorrectionPlan:
    """The result of :meth:`Corrections.plan_correction`."""

    delivery_id: int
    generation: int
    ref: IssueRef
    platform: str
    #: the parts of the new revision in the full variant (rows at or past the number of parts
    #: of their own variant delete surplus messages)
    n_parts: int
    #: when the correction was recorded: the time its mark shows
    created_at: dt.datetime
    #: one plain tuple per target with rows to act on (:data:`_CEntry`), read as
    #: :attr:`targets`: plain tuples of strings and numbers drop out of the garbage
    #: collector's passes, which otherwise stall the loop at 100k targets (as :class:`Plan`)
    entries: tuple[_CEntry, ...]
    #: True when this plan resumes a correction a run left unfinished
    resumed: bool
    #: messages that already showed their new content (recorded, not edited)
    unchanged: int = 0

    @property
    def targets(self) -> tuple[tuple[Target, tuple[CorrectionRow, ...]], ...]:
        """Each target with its rows to act on, in part order."""
        return tuple(self.target_rows())

    def target_rows(self) -> Iterator[tuple[Target, tuple[CorrectionRow, ...]]]:
        """:attr:`targets` one at a time."""
        for target_id, kind, rows in self.entries:
            yield (
                Target(self.platform, target_id, TargetKind(kind)),
                tuple(
                    CorrectionRow(
                        i, p, PartState(st), a, CorrectionAction(act), m, v or FULL_VARIANT
                    )
                    for i, p, st, a, act, m, v in rows
                ),
            )


#: a planned target as :class:`CorrectionPlan` keeps it: (target id, kind, rows), each row
#: (id, part, state, attempts, action, message id, variant: None for full), the fields of
#: :class:`CorrectionRow`
_CEntry = tuple[str, str, tuple[tuple[int, int, str, int, str, str | None, str | None], ...]]
#: the digests of a revision's parts per variant (one list: the full variant's)
Digests = Mapping[str, Sequence[str]] | Sequence[str]


@dataclass
class _Planning:
    """What the batches of one new correction share."""

    ref: IssueRef
    platform: str
    #: the new revision's digests per variant (the full one always there)
    digests: dict[str, tuple[str, ...]]
    #: the day's deliveries on the platform (rows of ``deliveries``) by id
    days: dict[int, Any]
    #: (delivery id, variant, part) -> digest of what it showed
    shown: dict[tuple[int, str, int], str]
    #: (delivery id, variant) -> its number of parts, for the variants it recorded
    recorded: dict[tuple[int, str], int]
    now: dt.datetime
    #: the correction delivery, once a batch needed one: (id, generation)
    created: tuple[int, int] | None = None
    unchanged: int = 0
    #: the rows recorded to act on, per target (as :attr:`CorrectionPlan.entries`)
    todo: list[_CEntry] = field(default_factory=list)


class Corrections:
    """Digests of what deliveries showed, and corrections (see the module docstring)."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    @retried
    async def record_digests(
        self, delivery_id: int, digests: Sequence[str], *, variant: str = FULL_VARIANT
    ) -> None:
        """Record what each part of a delivery's ``variant`` shows (once per variant: a
        resumed delivery keeps the digests first recorded)."""
        async with self.state.tx() as conn:
            found = (
                await conn.execute(
                    select(func.count()).where(
                        part_digests.c.delivery_id == delivery_id,
                        part_digests.c.variant == variant,
                    )
                )
            ).scalar_one()
            if found:
                return
            await conn.execute(
                insert(part_digests),
                [
                    {"delivery_id": delivery_id, "variant": variant, "part": i, "digest": d}
                    for i, d in enumerate(digests)
                ],
            )
            self.state.stats.rows_inserted += len(digests)

    async def plan_correction(
        self, ref: IssueRef, platform: str, digests: Digests
    ) -> CorrectionPlan | None:
        """What it takes to make every target of ``ref.date`` on ``platform`` show ``ref``
        (whose parts have ``digests``, per variant: a target is compared with and corrected
        to its own variant, see the module docstring; one list is the full variant's), or
        None when nothing is left to do.

        A correction of ``ref`` a run left unfinished (rows pending, in flight, of unknown
        outcome or failed) is resumed first: its plan comes back with ``resumed`` and those
        rows. Otherwise each target's latest post of the day is compared with ``ref`` part by
        part; for the targets with something to change a correction delivery is recorded (its
        rows pending, unchanged messages recorded sent). Unfinished rows of corrections to
        another revision are given up (failed, "superseded"): the new plan covers them.
        Deactivated and moved targets are left out. Targets are compared in batches of
        :data:`_BATCH`, each in its own transaction; a target already showing ``ref`` costs
        one aggregate row.
        """
        by_variant = _by_variant(digests)
        now = self.state.clock.now()
        started = await self.state.retrying(
            functools.partial(self._correction_start, ref, platform, by_variant, now)
        )
        if isinstance(started, CorrectionPlan) or started is None:
            return started
        state, seen = started  # (deactivated and moved targets count as seen)
        for delivery_id in sorted(state.days):
            await self._compare_targets(state, delivery_id, seen)
        if state.created is None:
            return None
        delivery_id, generation = state.created
        log.info(
            "%s %s: correction to revision %s (generation %d): %d targets, %d messages unchanged",
            platform,
            ref.date,
            ref.revision,
            generation,
            len(state.todo),
            state.unchanged,
        )
        return CorrectionPlan(
            delivery_id,
            generation,
            ref,
            platform,
            len(by_variant[FULL_VARIANT]),
            now,
            tuple(state.todo),
            resumed=False,
            unchanged=state.unchanged,
        )

    async def _compare_targets(self, state: _Planning, delivery_id: int, seen: set[str]) -> None:
        """Compare the targets of one delivery of the day not ``seen`` yet, a batch at a time."""
        after = ""
        while True:
            # each delivery's targets a page at a time, in the order of its unique index
            # (a whole day's list would stall the loop; a DISTINCT over the day sorts it)
            page = await self.state.retrying(
                functools.partial(self._target_page, delivery_id, after)
            )
            if not page:
                break
            after = page[-1]
            batch = [t for t in page if t not in seen]
            seen.update(batch)
            if batch:
                await self.state.retrying(
                    functools.partial(self._correction_batch_tx, state, batch)
                )
            # the plan so far out of the collector's full passes (inside the frozen heap of
            # publishing/corrections.py, see heap.py): at 100k targets each pass stalled the
            # loop 0.1-0.2 s
            refreeze()
            await asyncio.sleep(0)  # let the loop breathe between batches

    async def _correction_start(
        self,
        ref: IssueRef,
        platform: str,
        digests: dict[str, tuple[str, ...]],
        now: dt.datetime,
    ) -> CorrectionPlan | tuple[_Planning, set[str]] | None:
        """The first transaction: give up other revisions' unfinished rows, resume this
        revision's, else read what the batches need and the day's targets."""
        async with self.state.tx() as conn:
            days = {
                r.id: r
                for r in await conn.execute(
                    select(deliveries).where(
                        deliveries.c.issue_date == ref.date, deliveries.c.platform == platform
                    )
                )
            }
            corrections = [d for d in days.values() if d.generation < 0]
            stale = [d.id for d in corrections if d.revision != ref.revision]
            if stale:
                await conn.execute(
                    update(parts)
                    .where(parts.c.delivery_id.in_(stale), parts.c.state.in_(_UNFINISHED[:3]))
                    .values(
                        state=PartState.FAILED.value,
                        last_error=f"superseded by revision {ref.revision}",
                        updated_at=now,
                    )
                )
            mine = sorted(
                (d for d in corrections if d.revision == ref.revision), key=lambda d: d.id
            )
            if mine:
                plan = await self._correction_rows(conn, mine[-1], ref, platform, resumed=True)
                if plan.entries:
                    return plan
            if not days:
                return None
            shown, recorded = await _digests_of(conn, list(days))
            away = await _away(conn, platform)
        return _Planning(ref, platform, digests, days, shown, recorded, now), away

    async def _target_page(self, delivery_id: int, after: str) -> list[str]:
        """The next :data:`_BATCH` target ids with rows in a delivery, in id order after
        ``after``."""
        async with self.state.tx() as conn:
            return list(
                (
                    await conn.execute(
                        select(parts.c.target)
                        .where(parts.c.delivery_id == delivery_id, parts.c.target > after)
                        .group_by(parts.c.target)
                        .order_by(parts.c.target)
                        .limit(_BATCH)
                    )
                ).scalars()
            )

    async def _correction_batch_tx(self, state: _Planning, batch: list[str]) -> None:
        created = state.created
        try:
            async with self.state.tx() as conn:
                unchanged, todo = await self._correction_batch(conn, state, batch)
        except BaseException:
            state.created = created  # a delivery recorded here was rolled back with it
            raise
        # only once committed: a retried batch must not list the rows of a rolled-back try
        state.unchanged += unchanged
        state.todo += todo

    async def _correction_batch(
        self, conn: AsyncConnection, state: _Planning, batch: list[str]
    ) -> tuple[int, list[_CEntry]]:
        """Compare one batch of targets with the new revision; record the rows of those with
        something to change. Returns the messages found unchanged and the recorded rows to
        act on, per target in ``batch`` order (:data:`_CEntry`)."""
        ref, days = state.ref, state.days
        latest = await _latest_messages(conn, list(days), batch)
        behind_ = [t for t, d in latest.items() if days[d].revision != ref.revision]
        if not behind_:
            return 0, []
        by_delivery, kinds = await _rows_of(conn, list(days), behind_)
        await asyncio.sleep(0)  # a batch's rows read: let the loop breathe before comparing
        revisions = {d_id: d.revision for d_id, d in days.items()}
        inserts: list[dict[str, Any]] = []
        #: rows of targets in another variant than full (the full ones leave it NULL, and
        #: without the key: a correction of full posts binds what it did before variants)
        varied: list[dict[str, Any]] = []
        kept = 0
        for target_id, posts in by_delivery.items():
            d_id = behind(posts, revisions, ref.revision)
            if d_id is None:
                continue
            variant, planned = compare(
                posts[d_id],
                d_id,
                digests=state.digests,
                recorded=state.recorded,
                shown=state.shown,
                default_parts=days[d_id].parts,
            )
            kept += unchanged(planned)
            if nothing_to_do(planned):
                continue  # the same content everywhere: nothing to record or do
            rows = _new_rows(target_id, kinds[target_id], planned, state.now)
            if variant == FULL_VARIANT:
                inserts += rows
            else:
                varied += [{**r, "variant": variant} for r in rows]
        if not (inserts or varied):
            return kept, []
        ids = await self._insert(conn, state, inserts, varied)
        sizes = {v: len(d) for v, d in state.digests.items()}
        return kept, _recorded(batch, inserts, varied, ids, kinds, sizes)

    async def _insert(
        self,
        conn: AsyncConnection,
        state: _Planning,
        inserts: list[dict[str, Any]],
        varied: list[dict[str, Any]],
    ) -> dict[tuple[str, int], int]:
        """Record a batch's rows in the correction's delivery (recorded on first use); the
        inserted ids by (target, part)."""
        delivery_id = await self._correction_delivery(conn, state)
        # the inserted ids are the plan: no query of the new delivery's rows (on PostgreSQL
        # statistics taken before it say it has none, so that query read it whole per batch)
        ids: dict[tuple[str, int], int] = {}
        statement = insert(parts).returning(parts.c.id, parts.c.target, parts.c.part)
        async with generic_plans(conn):  # the inserts' foreign-key checks, as planning's
            for some in (inserts, varied):
                for start in range(0, len(some), _INSERT_CHUNK):
                    chunk = [
                        {**r, "delivery_id": delivery_id}
                        for r in some[start : start + _INSERT_CHUNK]
                    ]
                    for row_id, target_id, part in await conn.execute(statement, chunk):
                        ids[(target_id, part)] = row_id
                    self.state.stats.rows_inserted += len(chunk)
        return ids

    async def _correction_delivery(self, conn: AsyncConnection, state: _Planning) -> int:
        """The id of this correction's delivery, recorded (with its digests, of every
        variant) on first use."""
        if state.created is not None:
            return state.created[0]
        ref = state.ref
        generation = (
            min([0, *(d.generation for d in state.days.values() if d.revision == ref.revision)]) - 1
        )
        result = await conn.execute(
            insert(deliveries).values(
                issue_date=ref.date,
                revision=ref.revision,
                platform=state.platform,
                generation=generation,
                forced=False,
                parts=len(state.digests[FULL_VARIANT]),
                created_at=state.now,
            )
        )
        key = result.inserted_primary_key
        assert key is not None
        delivery_id = int(key[0])
        recorded = [
            {"delivery_id": delivery_id, "variant": variant, "part": i, "digest": d}
            for variant, digests in state.digests.items()
            for i, d in enumerate(digests)
        ]
        await conn.execute(insert(part_digests), recorded)
        self.state.stats.rows_inserted += 1 + len(recorded)
        state.created = (delivery_id, generation)
        return delivery_id

    @retried
    async def first_messages(
        self, day: dt.date, platform: str, target_ids: Sequence[str]
    ) -> dict[str, str]:
        """target id -> the id of the first message of its latest post of ``day`` on
        ``platform`` (what a pin points at), for ``target_ids`` that have one."""
        query = (
            select(parts.c.target, parts.c.message_id, parts.c.state)
            .join(deliveries, parts.c.delivery_id == deliveries.c.id)
            .where(
                deliveries.c.issue_date == day,
                deliveries.c.platform == platform,
                parts.c.target.in_(list(target_ids)),
                parts.c.part == 0,
            )
            .order_by(parts.c.delivery_id)
        )
        found: dict[str, str] = {}
        async with self.state.tx() as conn:
            for target_id, message_id, state in await conn.execute(query):
                if message_id and state == PartState.SENT.value:
                    found[target_id] = message_id  # a later delivery's wins
        return found

    async def _correction_rows(
        self, conn: AsyncConnection, delivery: Any, ref: IssueRef, platform: str, *, resumed: bool
    ) -> CorrectionPlan:
        """The unfinished rows of the correction ``delivery``, per target in part order."""
        sizes = {
            variant: int(n)
            for variant, n in await conn.execute(
                select(part_digests.c.variant, func.count())
                .where(part_digests.c.delivery_id == delivery.id)
                .group_by(part_digests.c.variant)
            )
        }
        sizes.setdefault(FULL_VARIANT, int(delivery.parts))
        return CorrectionPlan(
            int(delivery.id),
            int(delivery.generation),
            ref,
            platform,
            int(delivery.parts),
            delivery.created_at,
            tuple(await _unfinished(conn, int(delivery.id), sizes)),
            resumed=resumed,
        )


async def _unfinished(
    conn: AsyncConnection, delivery_id: int, sizes: Mapping[str, int]
) -> list[_CEntry]:
    """The rows of a correction still to act on, per target in part order, with each row's
    action (``sizes``: the new revision's number of parts per variant; rows past their
    variant's delete)."""
    # few rows of a delivery are unfinished: here ix_parts_state is the one to use
    query = select(
        parts.c.id,
        parts.c.target,
        parts.c.kind,
        parts.c.part,
        parts.c.state,
        parts.c.attempts,
        parts.c.message_id,
        parts.c.variant,
    ).where(parts.c.delivery_id == delivery_id, parts.c.state.in_(_UNFINISHED))
    grouped: dict[
        tuple[str, str], list[tuple[int, int, str, int, str, str | None, str | None]]
    ] = {}
    for row_id, target, kind, part, state, attempts, message_id, variant in await conn.execute(
        query.order_by(parts.c.target, parts.c.part)
    ):
        if state not in _UNFINISHED:
            continue
        grouped.setdefault((target, kind), []).append(
            (
                row_id,
                part,
                state,
                attempts,
                action(part, message_id, variant, sizes),
                message_id,
                variant,
            )
        )
    return [(t, kind, tuple(rows)) for (t, kind), rows in grouped.items()]


def _recorded(
    order: list[str],
    inserts: list[dict[str, Any]],
    varied: list[dict[str, Any]],
    ids: Mapping[tuple[str, int], int],
    kinds: Mapping[str, str],
    sizes: Mapping[str, int],
) -> list[_CEntry]:
    """The rows just recorded (``inserts`` of the full variant, ``varied`` of others; ``ids``:
    their ids by (target, part)) still to act on, as :func:`_unfinished` reads them back: per
    target in ``order``, in part order."""
    grouped: dict[str, list[tuple[int, int, str, int, str, str | None, str | None]]] = {}
    for some in (inserts, varied):
        for r in some:
            if r["state"] not in _UNFINISHED:
                continue
            target_id, part, message_id = r["target"], r["part"], r["message_id"]
            variant: str | None = r.get("variant")
            done = action(part, message_id, variant, sizes)
            grouped.setdefault(target_id, []).append(
                (ids[(target_id, part)], part, r["state"], 0, done, message_id, variant)
            )
    return [
        (t, kinds[t], tuple(sorted(grouped[t], key=lambda row: row[1])))
        for t in order
        if t in grouped
    ]


def _by_variant(digests: Digests) -> dict[str, tuple[str, ...]]:
    """``digests`` per variant (a plain list is the full variant's).

    Raises:
        ValueError: no full variant, or a variant without parts.
    """
    found = (
        {variant: tuple(d) for variant, d in digests.items()}
        if isinstance(digests, Mapping)
        else {FULL_VARIANT: tuple(digests)}
    )
    if FULL_VARIANT not in found:
        raise ValueError(f"a correction needs the {FULL_VARIANT!r} variant's digests")
    if not all(found.values()):
        raise ValueError("a correction needs at least one part in every variant")
    return found


async def _latest_messages(
    conn: AsyncConnection, days: list[int], batch: list[str]
) -> dict[str, int]:
    """Each target's latest delivery of the day naming a message (a sent row, or an edit a
    run left unfinished: resumed before this), in ``batch`` order."""
    # one aggregate row a target; no state in the WHERE (SQLite would pick ix_parts_state,
    # which matches nearly every row)
    return {
        t: int(d)
        for t, d in await conn.execute(
            select(parts.c.target, func.max(parts.c.delivery_id))
            .where(
                parts.c.delivery_id.in_(days),
                parts.c.target.in_(batch),
                parts.c.message_id.is_not(None),
                parts.c.message_id != "",
            )
            .group_by(parts.c.target)
        )
    }


async def _rows_of(
    conn: AsyncConnection, days: list[int], batch: list[str]
) -> tuple[dict[str, dict[int, list[Row]]], dict[str, str]]:
    """Every row of the targets in ``days``: target -> delivery -> rows; and each target's kind."""
    by_delivery: dict[str, dict[int, list[Row]]] = {}
    kinds: dict[str, str] = {}
    for row_id, d_id, target_id, kind, part, st, message_id, variant in await conn.execute(
        select(
            parts.c.id,
            parts.c.delivery_id,
            parts.c.target,
            parts.c.kind,
            parts.c.part,
            parts.c.state,
            parts.c.message_id,
            parts.c.variant,
        ).where(parts.c.delivery_id.in_(days), parts.c.target.in_(batch))
    ):
        kinds[target_id] = kind
        by_delivery.setdefault(target_id, {}).setdefault(d_id, []).append(
            Row(row_id, d_id, part, _STATES[st], message_id, variant)
        )
    return by_delivery, kinds


def _new_rows(
    target_id: str, kind: str, planned: list[Planned], now: dt.datetime
) -> list[dict[str, Any]]:
    """A target's correction rows to insert, as :func:`.diffing.compare` planned them."""
    return [
        {
            "target": target_id,
            "kind": kind,
            "part": part,
            "state": st,
            "message_id": message_id,
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
        }
        for part, st, message_id in planned
    ]


async def _digests_of(
    conn: AsyncConnection, days: list[int]
) -> tuple[dict[tuple[int, str, int], str], dict[tuple[int, str], int]]:
    """What the deliveries ``days`` showed: (delivery id, variant, part) -> digest, and
    (delivery id, variant) -> its number of parts, for the variants each recorded."""
    shown: dict[tuple[int, str, int], str] = {}
    recorded: dict[tuple[int, str], int] = {}
    for d_id, variant, part, digest in await conn.execute(
        select(
            part_digests.c.delivery_id,
            part_digests.c.variant,
            part_digests.c.part,
            part_digests.c.digest,
        ).where(part_digests.c.delivery_id.in_(days))
    ):
        shown[(d_id, variant, part)] = digest
        recorded[(d_id, variant)] = recorded.get((d_id, variant), 0) + 1
    return shown, recorded


async def _away(conn: AsyncConnection, platform: str) -> set[str]:
    """The platform's deactivated and moved targets (a correction leaves them out)."""
    return {
        t
        for (t,) in await conn.execute(
            select(targets.c.target_id).where(
                targets.c.platform == platform,
                targets.c.active.is_(False) | targets.c.moved_to.is_not(None),
            )
        )
    }
