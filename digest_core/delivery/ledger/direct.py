"""The group-commit writer's own connection to an SQLite file, driven through aiosqlite.

Through SQLAlchemy's async engine a transaction of one batch costs more than its rows: a
checkout from the pool, a begin, a commit and a check-in, each crossing between the event
loop and a greenlet, and three or four trips to aiosqlite's thread per statement (open a
cursor, run, fetch, close). Paced at 30 messages a second a batch holds a part or two, so that
machinery was most of the ledger's cost per message.

:class:`DirectSqlite` keeps one connection of the engine's pool checked out for the writer
(the engine's pragmas apply: busy timeout, WAL, foreign keys), and writes a batch with
aiosqlite's own calls: the claims fetched in one trip, each kind of change one
``executemany``, then the commit, all in one transaction (SQLite begins it before the first
change). Its callers hold the ledger's lock, as for every transaction on SQLite (one writer
per process). The driver's errors are raised as SQLAlchemy raises them (``DBAPIError``), which
is what the writer's retries read (:func:`~digest_core.delivery.health.is_transient`).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import StaticPool

from digest_core.delivery.ledger.driver import aiosqlite_of, as_sqlalchemy_error

log = logging.getLogger(__name__)


class DirectSqlite:
    """One kept connection of an SQLite engine, for the writer's batches (see the module)."""

    def __init__(self, conn: AsyncConnection, driver: Any) -> None:
        self._conn = conn
        self._driver = driver
        self.dialect = conn.dialect

    @staticmethod
    def applies(engine: AsyncEngine) -> bool:
        """Whether the writer of ``engine`` keeps a connection: not on other drivers, nor on an
        in-memory database (one connection, shared by everyone)."""
        return engine.dialect.driver == "aiosqlite" and not isinstance(
            engine.sync_engine.pool, StaticPool
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
        """One transaction: ``claim`` (SQL and its parameters; the rows it returns are the
        result), then each of ``changes`` (SQL and its parameter rows), then the commit. On
        an error it is rolled back and the error raised as SQLAlchemy's."""
        driver = self._driver
        sql: str = ""
        params: Any = None
        try:
            rows: list[Any] = []
            if claim is not None:
                sql, params = claim
                rows = list(await driver.execute_fetchall(sql, params))
            for sql, params in changes:
                await driver.executemany(sql, params)
            sql, params = "COMMIT", None
            await driver.commit()
        except BaseException as exc:
            await self._roll_back()
            if isinstance(exc, self.dialect.loaded_dbapi.Error):
                raise as_sqlalchemy_error(self.dialect, sql, params, exc) from exc
            raise
        return rows

    async def _roll_back(self) -> None:
        try:
            await self._driver.rollback()
        except Exception as exc:  # a broken connection: the next batch finds it broken too
            log.debug("ledger writer: rollback failed: %s", exc)

    async def close(self) -> None:
        """Give the connection back to the pool."""
        await self._conn.close()
