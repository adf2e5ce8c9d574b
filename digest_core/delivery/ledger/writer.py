"""The group-commit writer: per-part state changes batched in few transactions.

A batch costs the database, not SQLAlchemy, per row: it takes one timestamp (the clock is
read once per batch, not per change), and each kind of change is one driver-level
``executemany`` of plain tuples (:mod:`.driver`), so no row goes through SQLAlchemy's
parameter and type processing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Collection
from typing import Any

from sqlalchemy import (
    ARRAY,
    Integer,
    any_,
    bindparam,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.health import is_transient, short_error
from digest_core.delivery.ledger.direct import DirectSqlite
from digest_core.delivery.ledger.driver import DriverStatement, driver_value, fetch_all, run_many
from digest_core.delivery.ledger.engine import generic_plans
from digest_core.delivery.ledger.schema import (
    PartState,
    in_chunks,
    parts,
)
from digest_core.delivery.ledger.state import LedgerState, Op, settle_sends
from digest_core.errors import LedgerLost

__all__ = ["Writer"]

log = logging.getLogger(__name__)


def _state_update(*where: Any, **values: Any) -> Any:
    return (
        update(parts)
        .where(parts.c.id == bindparam("b_id"), *where)
        .values(updated_at=bindparam("b_now"), **values)
    )


#: the states a row may be claimed from (a row left in flight by a dead run: see ``claim``)
_CLAIMABLE = (PartState.PENDING.value, PartState.FAILED.value, PartState.UNKNOWN.value)

# The per-part state changes the delivery engine makes, batched by the group-commit writer
# (claims are conditional and run apart: see ``Writer._claim_batch``).
_STATE_STATEMENTS: dict[str, Any] = {
    # a sent row stays sent whatever else happens: the message is out
    "sent": _state_update(
        state=PartState.SENT.value, message_id=bindparam("b_message_id"), last_error=None
    ),
    "release": _state_update(
        parts.c.state == PartState.IN_FLIGHT.value,
        state=PartState.PENDING.value,
        last_error=bindparam("b_error"),
    ),
    # the send was cut after the request may have left: not "not sent"
    "unknown": _state_update(
        parts.c.state == PartState.IN_FLIGHT.value,
        state=PartState.UNKNOWN.value,
        last_error=bindparam("b_error"),
    ),
    "failed": _state_update(
        parts.c.state != PartState.SENT.value,
        state=PartState.FAILED.value,
        last_error=bindparam("b_error"),
    ),
    # a later part not attempted: only if no one holds or sent it
    "skip": _state_update(
        # no IN (...) here: an expanding parameter cannot go into executemany()
        (parts.c.state == PartState.PENDING.value) | (parts.c.state == PartState.FAILED.value),
        state=PartState.FAILED.value,
        last_error=bindparam("b_error"),
    ),
}


#: the sends of a batch in one statement on PostgreSQL (like ``_STATE_STATEMENTS["sent"]``)
_PG_SENT = text(
    "UPDATE parts SET state = :sent, message_id = v.mid, last_error = NULL, updated_at = :now "
    "FROM unnest(CAST(:ids AS INTEGER[]), CAST(:mids AS VARCHAR[])) AS v(id, mid) "
    "WHERE parts.id = v.id"
).bindparams(
    bindparam("sent", PartState.SENT.value), bindparam("now", type_=parts.c.updated_at.type)
)

# Claims are built once: they run many times a second, and building a statement costs more
# than running it.
_CLAIM_VALUES: dict[str, Any] = {
    "state": PartState.IN_FLIGHT.value,
    "attempts": parts.c.attempts + 1,
}
#: the state test of a claim, written so no planner can use ``ix_parts_state`` for it: while
#: a delivery runs most of its rows are pending, and PostgreSQL (its statistics taken when
#: few were) scanned them all for every batch of ids instead of using the primary key
_UNINDEXED_STATE = (parts.c.state + literal("")).in_(_CLAIMABLE)
#: the claims of a batch in one statement: the ids it returns are the rows claimed
_CLAIM_RETURNING = (
    update(parts)
    .where(parts.c.id.in_(bindparam("b_ids", expanding=True)), _UNINDEXED_STATE)
    .values(updated_at=bindparam("b_now"), **_CLAIM_VALUES)
    .returning(parts.c.id)
)
#: the claims of a batch on PostgreSQL: one array parameter, so the same statement (one plan)
#: whatever the batch's size
_PG_CLAIM = (
    update(parts)
    .where(parts.c.id == any_(bindparam("b_ids", type_=ARRAY(Integer))), _UNINDEXED_STATE)
    .values(updated_at=bindparam("b_now"), **_CLAIM_VALUES)
    .returning(parts.c.id)
)
#: the claims of a batch on SQLite (through aiosqlite): the ids as one JSON array, so one
#: statement, compiled once and run by the driver, whatever the batch's size (the state test
#: as equalities: a list of values would be expanded per execution)
_SQLITE_CLAIM = (
    update(parts)
    .where(
        parts.c.id.in_(select(func.json_each(bindparam("b_ids")).table_valued("value").c.value)),
        or_(*((parts.c.state + literal("")) == state for state in _CLAIMABLE)),
    )
    .values(updated_at=bindparam("b_now"), **_CLAIM_VALUES)
    .returning(parts.c.id)
)
#: one claim, for databases without UPDATE … RETURNING
_CLAIM_ONE = _state_update(parts.c.state.in_(_CLAIMABLE), **_CLAIM_VALUES)
#: resuming a row a dead run left in flight, if no one resumed it since
_CLAIM_RESUMED = _state_update(
    parts.c.state == PartState.IN_FLIGHT.value,
    parts.c.attempts == bindparam("b_attempts"),
    **_CLAIM_VALUES,
)


#: the parameter of each kind of change that carries the op's value
_VALUE_PARAM = {
    "sent": "b_message_id",
    "release": "b_error",
    "unknown": "b_error",
    "failed": "b_error",
    "skip": "b_error",
}


class Writer:
    """Per-part state changes, batched by one writer task (see :class:`Ledger`)."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state
        #: each kind of change as the engine's driver runs it (None: through SQLAlchemy)
        self._statements: dict[str, DriverStatement | None] = {}
        #: on an SQLite file, the writer's own kept connection (see :mod:`.direct`): made at
        #: the first batch, dropped after an error (the next batch makes a new one)
        self._direct: DirectSqlite | None = None
        self._keeps_connection = DirectSqlite.applies(state.engine)
        #: claims waiting for the batch that writes the record of their part before, by the
        #: future that batch settles (see :meth:`_claim_after`)
        self._after: dict[
            asyncio.Future[Any], list[tuple[int, int | None, asyncio.Future[bool], Op]]
        ] = {}

    async def claim(
        self, row_id: int, *, resumed_attempts: int | None = None, after: Op | None = None
    ) -> bool:
        """Mark a row in flight (and count the attempt) if no one else has it; returns once
        committed, True if this call claimed it.

        ``after``: a send recorded soon (``mark_sent_soon``) that must be committed first
        (the part before, of the same target); its error is raised. Still queued, it is
        written in the claim's transaction (both or neither: never the claim alone);
        otherwise it is waited for first.

        A pending or failed row is claimed. A row a dead run left in flight (planned with state
        ``IN_FLIGHT``) is claimed only with ``resumed_attempts`` equal to the attempts it was
        planned with, so of two deliveries resuming it, one does. False means another delivery
        has the row (or sent it): the caller MUST NOT send it. The caller MUST await this before
        sending, so a crash can only repeat in-flight rows.
        """
        if after is not None and after.done is not self.state.queued_sends:
            # being written already (or written): the claim comes after it
            if not after.done.done():
                return await self._claim_after(row_id, resumed_attempts, after)
            if after.error is not None:
                raise after.error
            after = None
        claimed = await self._enqueue("claim", row_id, resumed_attempts, after=after)
        if after is not None and after.error is not None:
            raise after.error
        return claimed

    def _claim_after(
        self, row_id: int, resumed_attempts: int | None, after: Op
    ) -> asyncio.Future[bool]:
        """A claim queued once the batch writing ``after`` (the record of the part before
        it) is settled: its future, failed with that record's error if it failed.

        The claims waiting for one batch are queued together by one callback of its future,
        in the order they came (awaiting the record in each caller took a shield, two
        callbacks and a wake of the caller per part)."""
        self._check_open()
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        sends = after.done
        waiting = self._after.get(sends)
        if waiting is None:
            waiting = self._after[sends] = []
            sends.add_done_callback(self._queue_after)
        waiting.append((row_id, resumed_attempts, done, after))
        return done

    def _queue_after(self, sends: asyncio.Future[Any]) -> None:
        """The batch settled by ``sends`` is: queue the claims that waited for it (see
        :meth:`_claim_after`), except those whose caller is gone or whose part before was
        not recorded."""
        # (each record's error is set before its batch's future is settled: see _apply)
        queued = False
        for row_id, resumed_attempts, done, after in self._after.pop(sends, ()):
            if done.done():  # its caller was cancelled meanwhile: it is not claimed
                continue
            if after.error is not None:
                done.set_exception(after.error)
                continue
            try:
                self._check_open()
            except (LedgerLost, RuntimeError) as exc:
                done.set_exception(exc)
                continue
            self.state.queue.append(Op("claim", row_id, resumed_attempts, done))
            queued = True
        if queued:
            self.state.pressing = True
            self.state.kick.set()

    def mark_sent_soon(self, row_id: int, message_id: str, *, linger: bool = False) -> Op:
        """Queue the record of a successful send and return at once: ``await op.wait()``
        returns once it is committed (or raises the ledger's error); ``op.done`` is done
        then, and is the same future for every send recorded in the same batch, so a caller
        with many sends may wait for each batch once (the op's own outcome is ``op.error``).
        The sender need not wait, since the row is in flight until then (a crash meanwhile
        makes it a possible duplicate, like a crash during the send); the caller MUST wait
        for every such record before it reports its delivery done. ``linger``: the writer
        may hold it back a moment for a claim to share its transaction (only for a platform
        whose resends are idempotent: ``PlatformLimits.idempotent_creates``).

        Raises:
            LedgerLost: the database was deleted or replaced.
            RuntimeError: the ledger is not open.
        """
        state = self.state
        self._check_open()
        if state.queued_sends is None:
            state.queued_sends = asyncio.get_running_loop().create_future()
        sends = state.queued_sends
        op = Op("sent", row_id, message_id, sends, shared=True, urge=lambda: state.urge(sends))
        state.queue.append(op)
        if not linger:
            state.pressing = True  # written at once: a crash must find it recorded
        state.kick.set()
        return op

    async def release(self, row_id: int, error: str) -> None:
        """Put an in-flight row back to pending after an attempt failed and will be retried.

        Only for a send known not to have reached the platform; MUST NOT be used when it may
        have (use :meth:`mark_unknown`)."""
        await self._enqueue("release", row_id, error)

    async def mark_unknown(self, row_id: int, error: str) -> None:
        """Record that an in-flight row's send was cut after the request may have left: the
        row is ``UNKNOWN`` (a possible duplicate, counted with the rows in flight) and is
        claimed again like a pending one, so it is sent at least once."""
        await self._enqueue("unknown", row_id, error)

    async def mark_failed(self, row_id: int, error: str) -> None:
        """Give up on a claimed row (retries exhausted, rejected payload); a sent row stays."""
        await self._enqueue("failed", row_id, error)

    async def skip(self, row_id: int, error: str) -> None:
        """Mark an unclaimed row failed (not attempted after an earlier part failed), unless
        it is in flight or sent meanwhile."""
        await self._enqueue("skip", row_id, error)

    def abandon(self, row_id: int) -> None:
        """Forget that this instance has a row in flight (its delivery was cancelled): the
        next plan takes it for a crashed run's and sends it again."""
        self.state.live.discard(row_id)

    def _check_open(self) -> None:
        if self.state.health.lost is not None:
            raise self.state.health.lost
        if self.state.writer is None or self.state.closing:
            raise RuntimeError("the ledger is not open")

    def _enqueue(
        self, kind: str, row_id: int, value: Any, *, after: Op | None = None
    ) -> asyncio.Future[bool]:
        self._check_open()
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.state.queue.append(Op(kind, row_id, value, done, after=after))
        self.state.pressing = True
        self.state.kick.set()
        return done

    async def run(self) -> None:
        """The writer's task (the ledger starts it on open): write the queued changes in
        batches until the ledger closes and the queue is empty."""
        try:
            await self._run()
        finally:
            await self._drop_direct()

    async def _drop_direct(self) -> None:
        direct, self._direct = self._direct, None
        if direct is not None:
            try:
                await direct.close()
            except Exception as exc:  # (an engine disposed of meanwhile)
                log.debug("ledger writer: closing its connection: %s", exc)

    async def _run(self) -> None:
        # one transaction at a time (SQLite): each batch is written by this task, the next
        # gathering meanwhile; several (a server database): each in a task of its own
        slots = asyncio.Semaphore(self.state.writers) if self.state.writers > 1 else None
        writing: set[asyncio.Task[None]] = set()
        while True:
            await self.state.kick.wait()
            self.state.kick.clear()
            if not self.state.queue:
                if self.state.closing:
                    if writing:
                        await asyncio.wait(writing)
                    return
                continue
            await self._linger()
            # a free writer slot first: meanwhile the next batch gathers (with two writers,
            # while this one is written)
            if slots is not None:
                await slots.acquire()
            batch, self.state.queue = self.state.queue, []
            self.state.pressing = False
            sends = self.state.take_sends()
            if slots is None:
                if batch:  # (not lost meanwhile: see ``lose``)
                    await self._apply(batch, sends)
                continue
            if not batch:  # lost meanwhile (see ``lose``)
                slots.release()
                continue
            task = asyncio.create_task(self._apply(batch, sends), name="ledger-write")
            writing.add(task)
            task.add_done_callback(writing.discard)
            task.add_done_callback(functools.partial(_release, slots))

    async def _linger(self) -> None:
        """While the queue holds only shared sends nobody waits for, wait (at most
        ``state.linger`` real seconds) for an op that is waited for to join them."""
        state = self.state
        if state.pressing or state.closing or state.linger <= 0:
            return
        state.lingering = True
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(state.linger):
                    while not (state.pressing or state.closing or not state.queue):
                        state.kick.clear()
                        await state.kick.wait()
        finally:
            state.lingering = False

    async def _apply(self, batch: list[Op], sends: asyncio.Future[None] | None) -> None:
        """Write one batch and settle its callers' futures, ``sends`` (that of its shared ops)
        last (never raises)."""
        self.state.active += 1  # a batch taken off the queue keeps the ledger busy until settled
        try:
            await self._apply_batch(batch)
        finally:
            settle_sends(sends)
            self.state.active -= 1

    async def _apply_batch(self, batch: list[Op]) -> None:
        claims: list[Op] = []
        grouped: dict[str, list[Op]] = {}
        for op in batch:
            if op.kind == "claim":
                claims.append(op)
            else:
                grouped.setdefault(op.kind, []).append(op)
        # one time for the whole batch, the same in every attempt, so a retry can tell its
        # own claims (see _claimed_before)
        now = self.state.clock.now()
        tries = 0

        async def write() -> set[Op]:
            nonlocal tries
            tries += 1
            return await self._write_batch(claims, grouped, now=now, again=tries > 1)

        try:
            # a database that does not answer (locked, full, gone away) is waited out:
            # the senders wait for their claims, and nothing recorded is lost
            won = await self.state.retrying(write)
        except Exception as exc:
            if len(batch) > 1 and not isinstance(exc, LedgerLost) and not is_transient(exc):
                # one change the database refuses must not take the others with it: a part
                # sent and not recorded would be sent again by the next delivery
                log.warning(
                    "ledger write of %d changes failed (%s); writing them one at a time",
                    len(batch),
                    short_error(exc),
                )
                for op in batch:
                    if op.after is not None and op.after.error is not None:
                        op.fail(op.after.error)  # never a claim whose part before failed
                        continue
                    await self._apply_batch([op])
                return
            if not isinstance(exc, LedgerLost):
                log.exception("ledger write of %d changes failed", len(batch))
            for op in batch:
                op.fail(exc)
            return
        self._settle(batch, claims, won)

    def _settle(self, batch: list[Op], claims: list[Op], won: set[Op]) -> None:
        """Tell each caller of a written batch its outcome; keep the rows in flight here."""
        self.state.stats.rows_updated += len(batch) - len(claims) + len(won)
        live = self.state.live
        for op in batch:
            ok = op.kind != "claim" or op in won
            if op.kind == "claim":
                # a claim whose caller was cancelled is in flight with no one to send it:
                # left for the next plan, like a crashed run's
                if ok and not op.done.cancelled():
                    live.add(op.row_id)
            else:
                live.discard(op.row_id)
            if not op.shared and not op.done.done():
                op.done.set_result(ok)

    async def _write_batch(
        self, claims: list[Op], grouped: dict[str, list[Op]], *, now: Any, again: bool = False
    ) -> set[Op]:
        """One transaction of the writer, every row written at ``now``; returns the claims
        that won their row. ``again``: an earlier attempt at the same batch failed, perhaps
        after its commit (see :meth:`_claimed_before`)."""
        if not again:
            direct = await self._direct_write(claims, grouped, now)
            if direct is not None:
                return direct
        async with self.state.tx(exclusive=False) as conn, generic_plans(conn, restore=False):
            # (all by primary key: planning each of 200k updates anew cost more than running it)
            done = await self._claimed_before(conn, claims, now) if again else []
            rest = [op for op in claims if op not in done]
            won = set(done) | set(await self._claim_batch(conn, rest, now=now))
            for kind, ops in grouped.items():
                await self._write_changes(conn, kind, ops, now)
        return won

    async def _direct_write(
        self, claims: list[Op], grouped: dict[str, list[Op]], now: Any
    ) -> set[Op] | None:
        """The batch through the writer's own connection to an SQLite file (see
        :mod:`.direct`); None where it goes through SQLAlchemy (other databases, a resumed
        claim, a statement the driver cannot run with tuples)."""
        if not self._keeps_connection:
            return None
        resumed, plain = _split_claims(claims)
        if resumed:
            return None
        if self._direct is None:
            self._direct = await DirectSqlite.open(self.state.engine)
        direct = self._direct
        assert direct is not None  # (it applies: see _keeps_connection)
        dialect = direct.dialect
        at = driver_value(parts.c.updated_at.type, now, dialect)
        claim = None
        if plain:
            claim = self._claim_params(dialect, plain, at)
            if claim is None:
                return None
        changes = []
        for kind, ops in grouped.items():
            change = self._change_statement(kind, dialect)
            if change is None:
                return None
            changes.append((change.sql, change.rows([(op.row_id, op.value, at) for op in ops])))
        state = self.state
        state.active += 1
        try:
            async with state.lock:
                try:
                    claimed = await direct.write(claim, changes)
                except BaseException:
                    await self._drop_direct()  # a new connection for the next batch
                    raise
            state.stats.transactions += 1
        finally:
            state.active -= 1
        return {plain[row_id] for (row_id,) in claimed}

    def _change_statement(self, kind: str, dialect: Any) -> DriverStatement | None:
        """The driver's statement of one ``kind`` of change (None: SQLAlchemy runs it)."""
        if kind not in self._statements:
            self._statements[kind] = DriverStatement.compile(
                _STATE_STATEMENTS[kind], dialect, ("b_id", _VALUE_PARAM[kind], "b_now"),
                converted=["b_now"],
            )  # fmt: skip
        return self._statements[kind]

    def _claim_params(
        self, dialect: Any, ids: Collection[int], at: Any
    ) -> tuple[str, tuple[Any, ...]] | None:
        """The plain claims of a batch (their rows' ``ids``) as one statement of the driver
        and its parameters, written at the driver's ``at`` (SQLite; None elsewhere)."""
        if dialect.driver != "aiosqlite":
            return None
        if "claim" not in self._statements:
            self._statements["claim"] = DriverStatement.compile(
                _SQLITE_CLAIM, dialect, ("b_ids", "b_now"), converted=["b_now"]
            )
        statement = self._statements["claim"]
        if statement is None:
            return None
        (row,) = statement.rows([(json.dumps(list(ids)), at)])
        return statement.sql, row

    async def _write_changes(
        self, conn: AsyncConnection, kind: str, ops: list[Op], now: Any
    ) -> None:
        """The batch's changes of one ``kind``: one statement, run once per row by the
        driver (on PostgreSQL, the sends as one statement of arrays)."""
        if kind == "sent" and conn.dialect.name == "postgresql" and len(ops) > 1:
            # one statement for the batch's sends, not one execution per row
            ids, mids = [op.row_id for op in ops], [op.value for op in ops]
            await conn.execute(_PG_SENT, {"ids": ids, "mids": mids, "now": now})
            return
        value = _VALUE_PARAM[kind]
        statement = self._change_statement(kind, conn.dialect)
        if statement is None:  # a driver taking named parameters: through SQLAlchemy
            params = [{"b_id": op.row_id, value: op.value, "b_now": now} for op in ops]
            await conn.execute(_STATE_STATEMENTS[kind], params)
            return
        at = driver_value(parts.c.updated_at.type, now, conn.dialect)
        rows = statement.rows([(op.row_id, op.value, at) for op in ops])
        await run_many(conn, statement.sql, rows)

    async def _claimed_before(self, conn: AsyncConnection, claims: list[Op], now: Any) -> list[Op]:
        """The claims an earlier attempt at this batch committed although its caller saw an
        error (the connection was cut after the server's COMMIT, a server restarting): their
        rows are in flight with the very time that attempt wrote (the batch's ``now``, the
        same in every attempt), so they are this batch's, not another delivery's."""
        if not claims:
            return []
        found: set[int] = set()
        for chunk in in_chunks(list({op.row_id for op in claims})):
            result = await conn.execute(
                select(parts.c.id).where(
                    parts.c.id.in_(chunk),
                    parts.c.state == PartState.IN_FLIGHT.value,
                    parts.c.updated_at == now,
                )
            )
            found.update(row_id for (row_id,) in result)
        if found:
            log.warning("ledger: %d claims were committed before the error", len(found))
        won: list[Op] = []
        for op in claims:
            if op.row_id in found:
                found.discard(op.row_id)  # a second claim of the row loses
                won.append(op)
        return won

    async def _claim_batch(self, conn: AsyncConnection, claims: list[Op], *, now: Any) -> list[Op]:
        """Run the claims of one batch, written with ``now``; returns those that won their
        row (one per row)."""
        if not claims:
            return []
        won: list[Op] = []
        resumed, plain = _split_claims(claims)
        for op in resumed:  # resuming a dead run's row: rare, one by one
            params = {"b_id": op.row_id, "b_attempts": op.value, "b_now": now}
            if (await conn.execute(_CLAIM_RESUMED, params)).rowcount:
                won.append(op)
        if not plain:
            return won
        at = driver_value(parts.c.updated_at.type, now, conn.dialect)
        claim = self._claim_params(conn.dialect, plain, at)
        if claim is not None:  # one statement, one trip to aiosqlite's thread
            won += [plain[row_id] for (row_id,) in await fetch_all(conn, *claim)]
            return won
        if conn.dialect.name == "postgresql":
            # one array parameter: the same statement (one plan) whatever the batch's size
            result = await conn.execute(_PG_CLAIM, {"b_ids": list(plain), "b_now": now})
            won += [plain[row_id] for (row_id,) in result]
        elif conn.dialect.update_returning:
            for chunk in in_chunks(list(plain)):
                result = await conn.execute(_CLAIM_RETURNING, {"b_ids": chunk, "b_now": now})
                won += [plain[row_id] for (row_id,) in result]
        else:
            for row_id, op in plain.items():
                result = await conn.execute(_CLAIM_ONE, {"b_id": row_id, "b_now": now})
                if result.rowcount:
                    won.append(op)
        return won


def _release(slots: asyncio.Semaphore, _: object) -> None:
    slots.release()


def _split_claims(claims: list[Op]) -> tuple[list[Op], dict[int, Op]]:
    """A batch's claims: those resuming a dead run's row, and the plain ones by row id; of
    two claims of one row, the first decides (the second is in neither)."""
    resumed: list[Op] = []
    plain: dict[int, Op] = {}
    seen: set[int] = set()
    for op in claims:
        if op.row_id in seen:
            continue
        seen.add(op.row_id)
        if op.value is not None:
            resumed.append(op)
        else:
            plain[op.row_id] = op
    return resumed, plain
