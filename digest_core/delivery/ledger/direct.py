"""The group-commit writer's own connection to an SQLite file, driven through aiosqlite.

Through SQLAlchemy's async engine a transaction of one batch costs more than its rows: a
checkout from the pool, a begin, a commit and a check-in, each crossing between the event
loop and a greenlet, and three or four trips to aiosqlite's thread per statement (open a
cursor, run, fetch, close). Paced at 30 messages a second a batch holds a part or two, so that
machinery was most of the ledger's cost per message.

:class:`DirectSqlite` keeps one connection of the engine's pool checked out for the writer
(the engine's pragmas apply: busy timeout, WAL, foreign keys), and writes a batch as one
function run on aiosqlite's thread (:func:`_transaction`): the claims, each kind of change one
``executemany``, then the commit, all in one transaction (SQLite begins it before the first
change), rolled back there if any of it fails. That is one trip to the thread per batch: at a
paced rate each trip is a wake-up of that thread and one of the event loop (about 0.1 ms of
CPU each on a small virtual machine), and a trip per statement and one for the commit made
two or three of them a batch. Its callers hold the ledger's lock, as for every transaction on
SQLite (one writer per process). The driver's errors are raised as SQLAlchemy raises them
(``DBAPIError``), which is what the writer's retries read
(:func:`~digest_core.delivery.health.is_transient`).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import StaticPool

from digest_core.delivery.ledger.driver import aiosqlite_of, as_sqlalchemy_error

__all__ = ["DirectSqlite", "runs_functions"]

log = logging.getLogger(__name__)


def runs_functions() -> bool:
    """Whether aiosqlite's connection runs a function of ours on its thread, as its own
    methods do (``Connection._execute``, with the sqlite3 connection as ``_conn``): so in
    every release this project allows (0.20 to 0.22), but not a public interface."""
    import aiosqlite  # (only where the engine uses it)

    return callable(getattr(aiosqlite.Connection, "_execute", None)) and isinstance(
        getattr(aiosqlite.Connection, "_conn", None), property
    )


class DirectSqlite:
    """One kept connection of an SQLite engine, for the writer's batches (see the module)."""

    def __init__(self, conn: AsyncConnection, driver: Any) -> None:
        self._conn = conn
        self._driver = driver
        self.dialect = conn.dialect

    @staticmethod
    def applies(engine: AsyncEngine) -> bool:
        """Whether the writer of ``engine`` keeps a connection: not on other drivers, nor on an
        in-memory database (one connection, shared by everyone), nor with an aiosqlite that
        cannot run a function on its thread (see :func:`runs_functions`)."""
        return (
            engine.dialect.driver == "aiosqlite"
            and not isinstance(engine.sync_engine.pool, StaticPool)
            and runs_functions()
        )

    @classmethod
    async def open(cls, engine: AsyncEngine) -> DirectSqlite | None:
        """A kept connection of ``engine``, or None where the writer goes through SQLAlchemy
        (see :meth:`applies`)."""
        if not cls.applies(engine):
            return None
        conn = await engine.connect()
        try:
            driver = await aiosqlite_of(conn)
        except BaseException:
            await conn.close()
            raise
        return cls(conn, driver)

    async def write(
        self, claim: tuple[str, tuple[Any, ...]] | None, changes: list[tuple[str, list[Any]]]
    ) -> list[Any]:
        """One transaction, in one trip to the driver's thread: ``claim`` (SQL and its
        parameters; the rows it returns are the result), then each of ``changes`` (SQL and its
        parameter rows), then the commit. On an error it is rolled back and the error raised
        as SQLAlchemy's."""
        running: list[Any] = ["", None]  # the statement and parameters being run
        try:
            rows: list[Any] = await self._driver._execute(
                _transaction, self._driver, claim, changes, running
            )
        except self.dialect.loaded_dbapi.Error as exc:
            raise as_sqlalchemy_error(self.dialect, running[0], running[1], exc) from exc
        return rows

    async def close(self) -> None:
        """Give the connection back to the pool."""
        await self._conn.close()


def _transaction(
    driver: Any,
    claim: tuple[str, tuple[Any, ...]] | None,
    changes: list[tuple[str, list[Any]]],
    running: list[Any],
) -> list[Any]:
    """:meth:`DirectSqlite.write`'s transaction, run on the aiosqlite connection's thread
    (``driver._conn`` is its sqlite3 connection); ``running`` is set to each statement and
    its parameters as it runs (for the error SQLAlchemy would raise)."""
    conn = driver._conn
    try:
        rows: list[Any] = []
        if claim is not None:
            running[:] = claim
            rows = conn.execute(*claim).fetchall()
        for sql, params in changes:
            running[:] = sql, params
            conn.executemany(sql, params)
        running[:] = "COMMIT", None
        conn.commit()
        return rows
    except BaseException:
        try:
            conn.rollback()
        except Exception as exc:  # a broken connection: the next batch finds it broken too
            log.debug("ledger writer: rollback failed: %s", exc)
        raise
