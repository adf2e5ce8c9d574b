"""Issue 24, item 4: the writer's batches cost the database, not SQLAlchemy, per row.

One timestamp per batch (the clock is read once per transaction, not per change), each kind of
change one driver-level ``executemany`` of plain tuples that stores exactly what SQLAlchemy
would, and the sends recorded with ``mark_sent_soon`` settled with one future per batch while
each keeps its own outcome. On SQLite and PostgreSQL (``ledger_url``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import asyncpg
from sqlalchemy.dialects.sqlite import aiosqlite
from sqlalchemy.exc import DBAPIError

from digest_core.delivery.ledger import Ledger, PartState, direct
from digest_core.delivery.ledger.direct import DirectSqlite
from digest_core.delivery.ledger.driver import DriverStatement
from digest_core.delivery.ledger.writer import _STATE_STATEMENTS, _VALUE_PARAM, Writer
from digest_core.testing import (
    ManualClock,
    make_issue,
    make_targets,
    mark_sent,
    open_ledger,
    part_counts,
)

REF = make_issue().ref


class CountingClock(ManualClock):
    """A ManualClock that counts how often the time is asked."""

    reads = 0

    def now(self) -> dt.datetime:
        self.reads += 1
        return super().now()


@pytest.fixture
def clock() -> CountingClock:
    """The clock of this module's tests, and of the ledger the shared ``ledger`` fixture opens
    (tests/delivery/conftest.py)."""
    return CountingClock()


async def _planned(ledger: Ledger, targets: int, parts: int) -> list[int]:
    plan = await ledger.plan(REF, "fake", make_targets(targets), parts)
    return [p.id for tp in plan.targets for p in tp.parts]


async def test_a_batch_reads_the_clock_once(ledger: Ledger, clock: CountingClock) -> None:
    ids = await _planned(ledger, 100, 2)
    clock.reads, before = 0, ledger.stats.transactions
    assert all(await asyncio.gather(*(ledger.claim(i) for i in ids)))
    await asyncio.gather(*(mark_sent(ledger, i, f"m{i}") for i in ids[:100]))
    await asyncio.gather(*(ledger.release(i, "TransientError: 502") for i in ids[100:]))
    transactions = ledger.stats.transactions - before
    assert transactions < len(ids) / 10  # group commit
    assert clock.reads <= transactions  # not one read per change (400 of them)
    counts = await part_counts(ledger, REF)
    assert (counts[PartState.SENT], counts[PartState.PENDING]) == (100, 100)
    record = await ledger.last_sent("fake", "c0")
    assert record is not None and record.updated_at == clock.now()


async def test_the_driver_stores_times_as_sqlalchemy_does(ledger: Ledger) -> None:
    # the delivery row is written by SQLAlchemy, its part rows by the driver, at one time
    ids = await _planned(ledger, 3, 1)
    await ledger.claim(ids[0])
    await mark_sent(ledger, ids[0], "m")
    async with ledger._tx() as conn:
        rows = list(
            await conn.execute(
                text(
                    "SELECT p.created_at, p.updated_at, d.created_at FROM parts p "
                    "JOIN deliveries d ON d.id = p.delivery_id"
                )
            )
        )
    assert len(rows) == 3
    for part_created, part_updated, delivery_created in rows:
        assert part_created == delivery_created  # the same text on SQLite, value on PostgreSQL
        assert part_updated == delivery_created  # (the clock did not move)


async def test_sends_recorded_soon_share_their_batchs_future(ledger: Ledger) -> None:
    ids = await _planned(ledger, 50, 1)
    assert all(await asyncio.gather(*(ledger.claim(i) for i in ids)))
    recorded = [ledger.mark_sent_soon(i, f"m{i}") for i in ids]
    assert len({id(r.done) for r in recorded}) == 1  # queued together: one batch, one future
    await asyncio.gather(*(r.wait() for r in recorded))
    assert all(r.done.done() and r.error is None for r in recorded)
    assert (await part_counts(ledger, REF))[PartState.SENT] == 50
    # a send queued after that batch was written gets a future of its own batch
    [extra] = await _planned(ledger, 51, 1)  # the 51st target: the others are sent
    assert await ledger.claim(extra)
    later = ledger.mark_sent_soon(extra, "m")
    assert later.done is not recorded[0].done
    await later.wait()
    assert (await part_counts(ledger, REF))[PartState.SENT] == 51


async def test_a_refused_record_fails_alone_in_its_shared_batch(pg_url: str) -> None:
    """PostgreSQL refuses a message id longer than its column (SQLite stores it)."""
    clock = ManualClock()
    async with open_ledger(clock, pg_url) as ledger:
        ids = await _planned(ledger, 5, 1)
        assert all(await asyncio.gather(*(ledger.claim(i) for i in ids)))
        ids_of = {i: "9" * 200 if n == 2 else f"m{i}" for n, i in enumerate(ids)}
        recorded = [ledger.mark_sent_soon(i, mid) for i, mid in ids_of.items()]
        outcomes = await asyncio.gather(*(r.wait() for r in recorded), return_exceptions=True)
        assert [isinstance(o, DBAPIError) for o in outcomes] == [False, False, True, False, False]
        assert isinstance(recorded[2].error, DBAPIError) and "too long" in str(recorded[2].error)
        assert (await part_counts(ledger, REF))[PartState.SENT] == 4


async def test_state_changes_through_sqlalchemy_where_the_driver_cannot_take_tuples(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a driver with named parameters gets no DriverStatement: SQLAlchemy runs the change
    monkeypatch.setattr(DriverStatement, "compile", classmethod(lambda *_, **__: None))
    ids = await _planned(ledger, 4, 1)
    assert all(await asyncio.gather(*(ledger.claim(i) for i in ids)))
    await asyncio.gather(mark_sent(ledger, ids[0], "m0"), ledger.mark_failed(ids[1], "Rejected"))
    await asyncio.gather(ledger.mark_unknown(ids[2], "cut"), ledger.release(ids[3], "502"))
    counts = await part_counts(ledger, REF)
    assert [counts[s] for s in (PartState.SENT, PartState.FAILED, PartState.UNKNOWN)] == [1, 1, 1]
    assert counts[PartState.PENDING] == 1


@pytest.mark.parametrize("dialect", [aiosqlite.dialect(), asyncpg.dialect()], ids=["sqlite", "pg"])
@pytest.mark.parametrize("kind", sorted(_STATE_STATEMENTS))
def test_every_change_compiles_for_the_drivers_the_ledger_uses(kind: str, dialect: Any) -> None:
    value = _VALUE_PARAM[kind]
    statement = DriverStatement.compile(
        _STATE_STATEMENTS[kind], dialect, ("b_id", value, "b_now"), converted=["b_now"]
    )
    assert statement is not None
    [row] = statement.rows([(7, "x", "T")])
    assert len(row) == statement.sql.count("?") + statement.sql.count("$")
    assert {7, "x", "T"} <= set(row)


class _Trips(logging.Handler):
    """Counts the calls aiosqlite runs on its connection's thread (it logs each one)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("executing "):
            self.count += 1


@pytest.fixture
def trips() -> Iterator[_Trips]:
    logger = logging.getLogger("aiosqlite")
    handler, level = _Trips(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


async def test_on_an_sqlite_file_a_batch_is_one_trip_to_the_driver(
    tmp_path: Path, trips: _Trips
) -> None:
    # the writer's own connection (digest_core/delivery/ledger/direct.py): the claims, each
    # kind of change and the commit in one function on the driver's thread (a trip per
    # statement and one for the commit took two or three; through SQLAlchemy's cursor, one
    # part's claim and its record took about nine)
    async with open_ledger(ManualClock(), f"sqlite+aiosqlite:///{tmp_path / 'l.db'}") as ledger:
        ids = await _planned(ledger, 2, 2)
        assert await ledger.claim(ids[0])  # (opens the writer's connection)
        trips.count, before = 0, ledger.stats.transactions
        assert await ledger.claim(ids[1])
        assert ledger.stats.transactions - before == 1
        assert trips.count == 1
        trips.count = 0
        await asyncio.gather(mark_sent(ledger, ids[0], "m0"), ledger.claim(ids[2]))
        assert trips.count == 1  # one transaction: the claim, the send, the commit
        await ledger.mark_failed(ids[1], "Rejected")
        counts = await part_counts(ledger, REF)
        assert [counts[s] for s in (PartState.SENT, PartState.FAILED)] == [1, 1]
        assert counts[PartState.IN_FLIGHT] == 1 and counts[PartState.PENDING] == 1


async def test_an_aiosqlite_that_runs_no_function_of_ours_writes_through_sqlalchemy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DirectSqlite runs a batch through aiosqlite's Connection._execute, not a public
    # interface: without it the writer goes through SQLAlchemy, with the same outcome
    monkeypatch.setattr(direct, "runs_functions", lambda: False)
    async with open_ledger(ManualClock(), f"sqlite+aiosqlite:///{tmp_path / 'l.db'}") as ledger:
        assert await DirectSqlite.open(ledger._state.engine) is None
        ids = await _planned(ledger, 2, 2)
        assert all(await asyncio.gather(*(ledger.claim(i) for i in ids[:2])))
        await asyncio.gather(mark_sent(ledger, ids[0], "m0"), ledger.claim(ids[2]))
        await ledger.mark_failed(ids[1], "Rejected")
        counts = await part_counts(ledger, REF)
        assert [counts[s] for s in (PartState.SENT, PartState.FAILED)] == [1, 1]
        assert counts[PartState.IN_FLIGHT] == 1 and counts[PartState.PENDING] == 1


async def test_the_writers_own_connection_writes_a_batch_whole_or_not_at_all(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    async with open_ledger(ManualClock(), url) as ledger:
        ids = await _planned(ledger, 3, 1)
        assert await ledger.claim(ids[0])
        direct = await DirectSqlite.open(ledger._state.engine)
        assert direct is not None
        claim = Writer(ledger._state)._claim_params(
            direct.dialect, [ids[1]], "2026-12-03 00:00:00.000000"
        )
        assert claim is not None
        bad = [("UPDATE parts SET state = ? WHERE no_such_column = 1", [("x",)])]
        with pytest.raises(DBAPIError) as caught:  # as SQLAlchemy raises it: retries read it
            await direct.write(claim, bad)
        assert "no_such_column" in str(caught.value.orig)
        assert (await part_counts(ledger, REF))[PartState.PENDING] == 2  # the claim rolled back
        assert await direct.write(claim, []) == [(ids[1],)]
        await direct.close()
        assert (await part_counts(ledger, REF))[PartState.IN_FLIGHT] == 2


async def test_in_memory_and_server_ledgers_write_through_sqlalchemy(pg_url: str) -> None:
    for url in ("sqlite+aiosqlite://", pg_url):
        async with open_ledger(ManualClock(), url) as ledger:
            assert await DirectSqlite.open(ledger._state.engine) is None
            ids = await _planned(ledger, 2, 1)
            assert all(await asyncio.gather(*(ledger.claim(i) for i in ids)))
            await mark_sent(ledger, ids[0], "m")
            assert (await part_counts(ledger, REF))[PartState.SENT] == 1
