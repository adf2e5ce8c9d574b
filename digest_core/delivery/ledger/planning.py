"""Planning a delivery: the SQL I/O around the pure classification of :mod:`.classify`."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import (
    Iterable,
    Sequence,
)
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    and_,
    bindparam,
    case,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.classify import (
    Classification,
    FoundRow,
    Pairs,
    Situation,
    all_sent,
    check_request,
    classify,
    counts,
    entries,
    fresh_entries,
    new_rows,
    split_unsent,
)
from digest_core.delivery.ledger.driver import DriverStatement, driver_value
from digest_core.delivery.ledger.engine import generic_plans
from digest_core.delivery.ledger.leases import (
    foreign_holder,
)
from digest_core.delivery.ledger.records import (
    Plan,
    PlanEntry,
    delivery_lease,
)
from digest_core.delivery.ledger.retention import served_before_pruning
from digest_core.delivery.ledger.schema import (
    FULL_VARIANT,
    PartState,
    deliveries,
    in_chunks,
    issue_filter,
    parts,
    targets,
)
from digest_core.delivery.ledger.state import LedgerState, retried
from digest_core.heap import refreeze
from digest_core.models import IssueRef
from digest_core.platform import Target

__all__ = ["PLAN_BATCH", "Planning"]

log = logging.getLogger(__name__)

#: targets planned per transaction: bounds the time the event loop spends on one batch
#: (benchmarks/fanout.py --subscribers) and the rows held in memory
PLAN_BATCH = 500
#: a batch of fresh targets' rows on PostgreSQL (see ``Planning._plan_fresh``)
_PG_FRESH = text(
    "INSERT INTO parts (delivery_id, target, kind, part, state, attempts, created_at, "
    "updated_at, variant) "
    "SELECT :delivery_id, t.target, t.kind, t.part, :state, 0, :now, :now, "
    "CAST(:variant AS VARCHAR) "
    "FROM unnest(CAST(:targets AS VARCHAR[]), CAST(:kinds AS VARCHAR[]), "
    "CAST(:parts AS INTEGER[])) AS t(target, kind, part) "
    "ON CONFLICT DO NOTHING RETURNING id, target, part"
).bindparams(bindparam("now", type_=parts.c.created_at.type))

#: the most target ids a plan keeps of the rows the day already has (see ``_Batch.known``)
_KNOWN_LIMIT = 20_000

#: the columns of a part row as planning inserts it, in the order of its parameter tuples
_ROW_COLUMNS = (
    "delivery_id", "target", "kind", "part", "state", "attempts", "created_at", "updated_at",
    "variant",
)  # fmt: skip
#: the insert of new rows (a day that has rows already), run by the driver (see .driver)
_INSERT_ROWS = insert(parts).values({name: bindparam(f"p_{name}") for name in _ROW_COLUMNS})


@functools.cache
def _sqlite_fresh(rows: int) -> str:
    """The insert of ``rows`` fresh part rows on SQLite in one statement, returning the ids
    of those inserted (``executemany`` returns no rows), as SQLAlchemy's own batched insert
    does, with the parameters as one flat tuple."""
    one = "(" + ", ".join(["?"] * len(_ROW_COLUMNS)) + ")"
    return (
        f"INSERT INTO {parts.name} ({', '.join(_ROW_COLUMNS)}) VALUES {', '.join([one] * rows)} "
        "ON CONFLICT DO NOTHING RETURNING id, target, part"
    )


@dataclass(frozen=True, slots=True)
class _Batch:
    """What every batch of one :meth:`Ledger.plan` shares."""

    ref: IssueRef
    n_parts: int
    delivery_id: int
    #: the day's deliveries on the platform -> their revision (empty with ``force``)
    revisions: dict[int, str]
    #: another owner holds the platform's live delivery lease
    foreign: bool
    now: dt.datetime
    #: the day's rows were pruned (retention): targets its summaries show served get nothing
    pruned: bool = False
    #: the day's corrections on the platform (deliveries with a negative generation)
    corrections: frozenset[int] = frozenset()
    #: the variant (format) the rows inserted show; None for the full one (stored NULL)
    variant: str | None = None
    #: every target id with rows in the day's deliveries on the platform when planning
    #: started (None: too many to keep): a batch none of whose targets is here has no rows
    #: to read (see ``_plan_unpruned``)
    known: frozenset[str] | None = None


class _Moves:
    """A platform's recorded target moves and deactivations, to resolve requested targets."""

    def __init__(self, platform: str, rows: Iterable[Row[Any]]) -> None:
        self.platform = platform
        #: target id -> (active, moved_to) of the targets deactivated or moved
        self.known: dict[str, tuple[bool, str | None]] = {
            row.target_id: (row.active, row.moved_to) for row in rows
        }
        #: resolved target ids seen so far (a duplicate is planned once)
        self.seen: set[str] = set()
        #: resolved target id -> the earlier ids that lead to it
        self.earlier: dict[str, list[str]] = {}
        for moved_id, (_, moved_to) in self.known.items():
            if moved_to:
                self.earlier.setdefault(self.follow(moved_id), []).append(moved_id)

    def follow(self, target_id: str) -> str:
        hops = 0
        while (info := self.known.get(target_id)) is not None and info[1] and hops < 10:
            target_id = str(info[1])
            hops += 1
        return target_id

    def resolve(
        self, requested: Sequence[Target], inactive: list[Target]
    ) -> list[tuple[Target, Target]]:
        """(requested, resolved) pairs of targets not seen before; inactive requested targets
        are appended to ``inactive``."""
        pairs: list[tuple[Target, Target]] = []
        for req in requested:
            final = self.follow(req.id) if self.known else req.id
            current = req if final == req.id else Target(self.platform, final, req.kind)
            info = self.known.get(final)
            if info is not None and not info[0] and not info[1]:
                inactive.append(req)
            elif final not in self.seen:
                self.seen.add(final)
                pairs.append((req, current))
        return pairs

    def ids_of(self, final: str) -> list[str]:
        """Every id rows of the resolved target ``final`` may be recorded under."""
        return [final, *self.earlier.get(final, ())]


class Planning:
    """Record a delivery and say what to send."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state
        #: the inserts as the engine's driver runs them (None: through SQLAlchemy)
        self._statements: dict[str, DriverStatement | None] = {}

    @retried  # its first transaction; each batch retries on its own
    async def plan(
        self,
        ref: IssueRef,
        platform: str,
        requested: Sequence[Target],
        n_parts: int,
        *,
        force: bool = False,
        variant: str = FULL_VARIANT,
    ) -> Plan:
        """Record a delivery of ``n_parts`` parts of ``ref`` to ``requested`` and say what to send.

        Without ``force``, the latest generation is completed: its rows that are pending, were
        in flight when a run died, failed or went gone are planned again; a (target, part) it
        lacks is inserted as pending unless an older generation sent it. A target that already
        got any part of this day's issue under another revision (a corrected file) gets nothing
        of this one (:attr:`TargetPlan.sent_revision`). With ``force``, a new generation is
        created and every part is planned again; older rows stay as history.

        Targets are resolved through recorded moves, and rows recorded under any id of a
        target's move chain count as its own; deactivated targets are left out and listed in
        :attr:`Plan.inactive`. Duplicates (after resolving) are planned once. The rows
        inserted record ``variant``, the format of the messages they stand for (what a
        correction compares them with).

        A row in flight is planned again only if no live delivery owns it: not one of this
        instance's, and no other owner holds the platform's live delivery lease. A target with
        a row in flight in a live delivery is left out (:attr:`TargetPlan.in_progress`), so its
        parts keep their order.

        Targets are planned in batches of :data:`PLAN_BATCH`, each in its own transaction, so
        a large fan-out neither blocks the event loop nor holds the day's rows in memory; a
        batch whose parts were all sent costs one aggregate query.

        Raises:
            ValueError: ``n_parts`` is less than 1, or a target is on another platform.
        """
        check_request(platform, requested, n_parts)
        async with self.state.tx() as conn:
            moves, batch, generation = await self._start(
                conn, ref, platform, n_parts, force=force, variant=variant
            )
        found, inactive = await self._plan_batches(batch, requested, moves)
        _log_outcome(platform, ref, found, inactive)
        return Plan(
            batch.delivery_id, generation, ref, platform, n_parts, tuple(found), tuple(inactive)
        )

    async def _start(
        self,
        conn: AsyncConnection,
        ref: IssueRef,
        platform: str,
        n_parts: int,
        *,
        force: bool,
        variant: str,
    ) -> tuple[_Moves, _Batch, int]:
        """The plan's first transaction: the platform's moves, the delivery (a new
        generation with ``force``), and what every batch shares; also its generation."""
        now = self.state.clock.now()
        moves = _Moves(platform, await conn.execute(_moves_of(platform)))
        delivery_id, generation = await self._delivery_for(
            conn, ref, platform, n_parts, force=force, now=now
        )
        foreign = await foreign_holder(
            conn, delivery_lease(platform), owner=self.state.owner, locks=self.state.locks
        )
        # the day's deliveries on the platform -> their revision (none read with force)
        revisions: dict[int, str] = {}
        corrections: frozenset[int] = frozenset()
        if not force:
            day = list(await conn.execute(_day_of(ref, platform)))
            revisions = {d_id: revision for d_id, revision, _ in day}
            corrections = frozenset(d_id for d_id, _, gen in day if gen < 0)
        pruned = not force and (await conn.execute(_pruned(ref, platform))).first() is not None
        batch = _Batch(
            ref,
            n_parts,
            delivery_id,
            revisions,
            foreign is not None,
            now,
            pruned,
            corrections,
            None if variant == FULL_VARIANT else variant,
            await _targets_with_rows(conn, [delivery_id, *revisions]),
        )
        return moves, batch, generation

    async def _plan_batches(
        self, batch: _Batch, requested: Sequence[Target], moves: _Moves
    ) -> tuple[list[PlanEntry], list[Target]]:
        """Plan ``requested`` :data:`PLAN_BATCH` targets at a time, each batch in its own
        transaction; returns the entries and the deactivated targets left out."""
        found: list[PlanEntry] = []
        inactive: list[Target] = []
        for start in range(0, len(requested), PLAN_BATCH):
            pairs = moves.resolve(requested[start : start + PLAN_BATCH], inactive)
            if pairs:
                # each batch waits out database trouble itself: retrying the whole plan
                # would start a second generation after a forced one was recorded
                found += await self.state.retrying(
                    functools.partial(self._plan_batch_tx, batch, pairs, moves)
                )
            refreeze()  # the plan so far: out of the collector's full passes (see heap.py)
            await asyncio.sleep(0)  # let the loop breathe between batches
        return found, inactive

    async def _plan_batch_tx(
        self, batch: _Batch, pairs: list[tuple[Target, Target]], moves: _Moves
    ) -> list[PlanEntry]:
        async with self.state.tx() as conn:
            return await self._plan_batch(conn, batch, pairs, moves)

    async def _plan_batch(
        self,
        conn: AsyncConnection,
        batch: _Batch,
        pairs: list[tuple[Target, Target]],
        moves: _Moves,
    ) -> list[PlanEntry]:
        """Plan one batch of (requested, resolved) targets (see :meth:`plan`)."""
        if not batch.pruned:
            return await self._plan_unpruned(conn, batch, pairs, moves)
        # the day's rows were pruned: the targets its summaries show served get nothing
        done = await served_before_pruning(
            conn, batch.ref.date, pairs[0][1].platform, [t.id for _, t in pairs]
        )
        rest = [(req, t) for req, t in pairs if t.id not in done]
        found = await self._plan_unpruned(conn, batch, rest, moves) if rest else []
        by_final = {entry[2]: entry for entry in found}
        n_parts = batch.n_parts
        return [
            by_final.get(t.id, (req.id, req.kind.value, t.id, (), n_parts, 0, None))
            for req, t in pairs
        ]

    async def _plan_unpruned(
        self,
        conn: AsyncConnection,
        batch: _Batch,
        pairs: list[tuple[Target, Target]],
        moves: _Moves,
    ) -> list[PlanEntry]:
        finals = [t.id for _, t in pairs]
        if batch.known is not None and not any(
            a in batch.known for f in finals for a in moves.ids_of(f)
        ):
            fresh = await self._plan_fresh(conn, batch, pairs)
            if fresh is not None:
                return fresh
        if batch.revisions and await _all_sent(conn, batch, finals):
            return all_sent(pairs, batch.n_parts)
        alias: dict[str, str] = {}
        rows: list[FoundRow] = []
        if batch.revisions:
            alias = {a: f for f in finals for a in moves.ids_of(f)}
            rows = await _found_rows(conn, batch, alias)
        situation = Situation(
            batch.delivery_id,
            batch.ref.revision,
            batch.revisions,
            batch.n_parts,
            live_rows=self.state.live,
            foreign=batch.foreign,
            corrections=batch.corrections,
        )
        found = classify(finals, rows, alias, situation)
        await self._apply(conn, batch, pairs, found)
        unsent = await conn.execute(_unsent(batch.delivery_id, finals))
        todo, in_progress = split_unsent(unsent.all(), found.live)
        return entries(pairs, todo, found.already, in_progress, found.superseded)

    async def _apply(
        self, conn: AsyncConnection, batch: _Batch, pairs: Pairs, found: Classification
    ) -> None:
        """Write what the classification of a batch decided: inserts, moves, resets."""
        kinds = {t.id: t.kind.value for _, t in pairs}
        inserts = new_rows(
            found.inserts,
            kinds,
            delivery_id=batch.delivery_id,
            now=batch.now,
            variant=batch.variant,
        )
        stats = self.state.stats
        if inserts:
            # the row-by-row insert planned once (the batch's IN (...) queries keep custom plans)
            async with generic_plans(conn):
                await self._insert_rows(conn, inserts, batch.now)
            stats.rows_inserted += len(inserts)
        for new_id, ids in found.retarget.items():
            for chunk in in_chunks(ids):
                await conn.execute(update(parts).where(parts.c.id.in_(chunk)).values(target=new_id))
                stats.rows_updated += len(chunk)
        for chunk in in_chunks(found.resets):
            await conn.execute(
                update(parts)
                .where(parts.c.id.in_(chunk))
                .values(state=PartState.PENDING.value, updated_at=batch.now)
            )
            stats.rows_updated += len(chunk)

    async def _insert_rows(
        self, conn: AsyncConnection, inserts: list[dict[str, Any]], now: dt.datetime
    ) -> None:
        """Insert the rows :func:`new_rows` made (all created at ``now``): one
        ``executemany`` of the driver (see :mod:`.driver`)."""
        if "insert" not in self._statements:
            names = [f"p_{name}" for name in _ROW_COLUMNS]
            self._statements["insert"] = DriverStatement.compile(
                _INSERT_ROWS, conn.dialect, names, converted=["p_created_at", "p_updated_at"]
            )
        statement = self._statements["insert"]
        if statement is None:
            await conn.execute(insert(parts), inserts)
            return
        at = driver_value(parts.c.created_at.type, now, conn.dialect)
        values = [
            (*(row[name] for name in _ROW_COLUMNS[:6]), at, at, row.get("variant"))
            for row in inserts
        ]
        await conn.exec_driver_sql(statement.sql, statement.rows(values))

    async def _plan_fresh(
        self, conn: AsyncConnection, batch: _Batch, pairs: list[tuple[Target, Target]]
    ) -> list[PlanEntry] | None:
        """Plan a batch of targets that had no rows in the day's deliveries when planning
        started (the first post of a day, or new subscribers): every part is inserted
        pending, and the inserted ids are the plan, with no query of the parts table. (On
        PostgreSQL those queries of a delivery growing under planning were each a scan of
        its rows so far: statistics taken before the day say it has none.)

        Returns None if another planner inserted rows for some of them meanwhile (a second
        instance): the rows this one inserted are then pending like theirs, and the batch is
        planned by reading them."""
        n_parts, now = batch.n_parts, batch.now
        if conn.dialect.name == "postgresql":
            # one statement of arrays: the same text whatever the batch's size, so it is
            # prepared and planned once (a multi-row VALUES of 1,000 rows was planned anew
            # for each batch, half of planning's time)
            targets_, kinds, numbers = [], [], []
            for _, t in pairs:
                for part in range(n_parts):
                    targets_.append(t.id)
                    kinds.append(t.kind.value)
                    numbers.append(part)
            expected = len(targets_)
            async with generic_plans(conn):  # and its foreign-key check of each row
                found: Iterable[Any] = await conn.execute(
                    _PG_FRESH,
                    {
                        "delivery_id": batch.delivery_id,
                        "state": PartState.PENDING.value,
                        "now": now,
                        "variant": batch.variant,
                        "targets": targets_,
                        "kinds": kinds,
                        "parts": numbers,
                    },
                )
        else:
            found, expected = await self._insert_fresh(conn, batch, pairs)
        ids = {(target, part): row_id for row_id, target, part in found}
        self.state.stats.rows_inserted += len(ids)
        if len(ids) < expected:
            log.info("planning met rows another delivery inserted meanwhile; reading them")
            return None
        return fresh_entries(pairs, ids, n_parts)

    async def _insert_fresh(
        self, conn: AsyncConnection, batch: _Batch, pairs: list[tuple[Target, Target]]
    ) -> tuple[Iterable[Any], int]:
        """Insert every part of ``pairs`` pending on SQLite: (the (id, target, part) of each row
        inserted, the rows there were to insert)."""
        n_parts, dialect = batch.n_parts, conn.dialect
        if dialect.paramstyle != "qmark" or not dialect.insert_returning:  # through SQLAlchemy
            kind_of = {t.id: t.kind.value for _, t in pairs}
            keys = [(t.id, part) for _, t in pairs for part in range(n_parts)]
            inserts = new_rows(
                keys, kind_of, delivery_id=batch.delivery_id, now=batch.now, variant=batch.variant
            )
            found = await conn.execute(
                sqlite_insert(parts)
                .on_conflict_do_nothing()
                .returning(parts.c.id, parts.c.target, parts.c.part),
                inserts,
            )
            return found, len(inserts)
        now = driver_value(parts.c.created_at.type, batch.now, dialect)
        pending, d_id, variant = PartState.PENDING.value, batch.delivery_id, batch.variant
        params = [
            value
            for _, t in pairs
            for part in range(n_parts)
            for value in (d_id, t.id, t.kind.value, part, pending, 0, now, now, variant)
        ]
        width = len(_ROW_COLUMNS)  # rows per statement: as many as SQLAlchemy's batches take
        most = dialect.insertmanyvalues_max_parameters // width
        per = max(1, min(dialect.insertmanyvalues_page_size, most))
        rows: list[Any] = []
        for start in range(0, len(params), per * width):
            chunk = params[start : start + per * width]
            result = await conn.exec_driver_sql(_sqlite_fresh(len(chunk) // width), tuple(chunk))
            rows += result.all()
        return rows, len(params) // width

    async def _delivery_for(
        self,
        conn: AsyncConnection,
        ref: IssueRef,
        platform: str,
        n_parts: int,
        *,
        force: bool,
        now: dt.datetime,
    ) -> tuple[int, int]:
        latest = (
            await conn.execute(
                select(deliveries.c.id, deliveries.c.generation)
                # corrections (negative generations) are never completed by a post
                .where(issue_filter(ref, platform), deliveries.c.generation > 0)
                .order_by(deliveries.c.generation.desc())
                .limit(1)
            )
        ).first()
        if latest is not None and not force:
            return int(latest.id), int(latest.generation)
        generation = 1 if latest is None else int(latest.generation) + 1
        result = await conn.execute(
            insert(deliveries).values(
                issue_date=ref.date,
                revision=ref.revision,
                platform=platform,
                generation=generation,
                forced=force,
                parts=n_parts,
                created_at=now,
            )
        )
        self.state.stats.rows_inserted += 1
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0]), generation

    # -- per-part state changes (group commit) ------------------------------------------------


async def _targets_with_rows(
    conn: AsyncConnection, delivery_ids: list[int]
) -> frozenset[str] | None:
    """The target ids with rows in these deliveries, or None if more than
    :data:`_KNOWN_LIMIT`."""
    found = frozenset(
        target
        for (target,) in await conn.execute(
            select(parts.c.target)
            .where(parts.c.delivery_id.in_(delivery_ids))
            .distinct()
            .limit(_KNOWN_LIMIT + 1)
        )
    )
    return found if len(found) <= _KNOWN_LIMIT else None


def _log_outcome(
    platform: str, ref: IssueRef, found: Sequence[PlanEntry], inactive: Sequence[Target]
) -> None:
    superseded, live = counts(found)
    if inactive:
        log.info("%s: skipping %d deactivated targets", platform, len(inactive))
    if superseded:
        log.info(
            "%s %s rev %s: %d targets already got another revision of the day",
            platform,
            ref.date,
            ref.revision,
            superseded,
        )
    if live:
        log.info("%s: %d targets are being delivered by another run", platform, live)


def _moves_of(platform: str) -> Any:
    """The platform's deactivated and moved targets."""
    return select(targets.c.target_id, targets.c.active, targets.c.moved_to).where(
        targets.c.platform == platform,
        (targets.c.active.is_(False)) | (targets.c.moved_to.is_not(None)),
    )


def _day_of(ref: IssueRef, platform: str) -> Any:
    """The day's deliveries on the platform: id, revision, generation."""
    return select(deliveries.c.id, deliveries.c.revision, deliveries.c.generation).where(
        deliveries.c.issue_date == ref.date, deliveries.c.platform == platform
    )


def _pruned(ref: IssueRef, platform: str) -> Any:
    """A row if the day's rows on the platform were pruned (retention)."""
    return (
        select(deliveries.c.id)
        .where(
            deliveries.c.issue_date == ref.date,
            deliveries.c.platform == platform,
            deliveries.c.pruned_at.is_not(None),
        )
        .limit(1)
    )


async def _all_sent(conn: AsyncConnection, batch: _Batch, finals: list[str]) -> bool:
    """The common re-post: every part of every target of the batch is already sent."""
    # (no state in the WHERE: SQLite would pick ix_parts_state over the unique index)
    sent = and_(parts.c.state == PartState.SENT.value, parts.c.part < batch.n_parts)
    n_sent = (
        await conn.execute(
            select(func.coalesce(func.sum(case((sent, 1), else_=0)), 0)).where(
                parts.c.delivery_id == batch.delivery_id, parts.c.target.in_(finals)
            )
        )
    ).scalar_one()
    return bool(n_sent == len(finals) * batch.n_parts)


async def _found_rows(
    conn: AsyncConnection, batch: _Batch, alias: dict[str, str]
) -> list[FoundRow]:
    """The rows of the day's deliveries recorded under any id of ``alias``."""
    return [
        FoundRow(row_id, d_id, stored, part, PartState(state))
        for row_id, d_id, stored, part, state in await conn.execute(
            select(parts.c.id, parts.c.delivery_id, parts.c.target, parts.c.part, parts.c.state)
            .where(parts.c.delivery_id.in_(list(batch.revisions)))
            .where(parts.c.target.in_(list(alias)))
        )
    ]


def _unsent(delivery_id: int, finals: list[str]) -> Any:
    """The delivery's unsent rows of ``finals``, in target and part order."""
    return (
        select(parts.c.id, parts.c.target, parts.c.part, parts.c.state, parts.c.attempts)
        .where(
            parts.c.delivery_id == delivery_id,
            parts.c.state != PartState.SENT.value,
            parts.c.target.in_(finals),
        )
        .order_by(parts.c.target, parts.c.part)
    )
