"""Statements the database driver runs itself, with plain tuples: the ledger's batches.

SQLAlchemy converts every parameter of every row it executes (its ``construct_params`` and
the type processors: at 100k subscribers, 500k parameter sets and 700k datetimes, 15% of a
delivery's CPU). A batch of the writer or of planning is one statement run for many rows
whose only converted value is the batch's one timestamp, so :class:`DriverStatement` lets
SQLAlchemy compile the statement once per dialect, converts the timestamp once per batch
(:func:`driver_value`), and hands the rows to the driver's ``executemany`` as tuples
(``AsyncConnection.exec_driver_sql``), for aiosqlite and asyncpg alike.

On aiosqlite, :func:`run_many` and :func:`fetch_all` also skip SQLAlchemy's cursor: it takes
three or four trips to the connection's thread per statement (open a cursor, run, fetch, close),
each a handoff between two threads and a wake of the event loop; aiosqlite's own
``executemany`` and ``execute_fetchall`` take one. At a paced platform's rate a batch holds a
part or two, so those trips were most of the ledger's cost per message. They run on the
connection SQLAlchemy checked out, in its transaction, and the driver's errors are raised as
SQLAlchemy's (``DBAPIError``), as ``exec_driver_sql`` raises them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "DriverStatement",
    "aiosqlite_of",
    "as_sqlalchemy_error",
    "driver_value",
    "fetch_all",
    "run_many",
]


def driver_value(type_: Any, value: Any, dialect: Dialect) -> Any:
    """``value`` of SQLAlchemy type ``type_`` as ``dialect``'s driver takes it (a ledger
    time: naive UTC, text on SQLite), converted as SQLAlchemy would."""
    return _converter(type_, dialect)(value)


@functools.lru_cache(maxsize=32)
def _converter(type_: Any, dialect: Dialect) -> Callable[[Any], Any]:
    """What :func:`driver_value` does to a value of ``type_``, built once per type and dialect
    (SQLAlchemy builds it anew each time it is asked: that was a fifth of the writer's samples
    in a profile of a delivery paced at 30 a second). Types and dialects hash by identity."""
    process = type_.dialect_impl(dialect).bind_processor(dialect)
    return _unchanged if process is None else process


def _unchanged(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A compiled statement with positional parameters: its SQL text, a row of parameters
    with the statement's constants in place, and where each given value goes."""

    sql: str
    template: tuple[Any, ...]
    #: the position in a row of each value :meth:`rows` is given, in the order given
    slots: tuple[int, ...]

    @classmethod
    def compile(
        cls,
        statement: ClauseElement,
        dialect: Dialect,
        params: Sequence[str],
        *,
        converted: Sequence[str] = (),
    ) -> DriverStatement | None:
        """``statement`` for ``dialect``, taking the values of ``params`` per row. None when
        the driver takes named parameters, or a parameter not in ``converted`` (whose values
        the caller converts with :func:`driver_value`) would need converting: SQLAlchemy
        must run it then."""
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler) or not dialect.positional:
            return None
        order = compiled.positiontup
        if not order or len(set(order)) != len(order):  # (a parameter used twice)
            return None
        for name in order:
            bind = compiled.binds[name]
            if name not in converted and bind.type.dialect_impl(dialect).bind_processor(dialect):
                return None
        constants = compiled.params
        return cls(
            sql=compiled.string,
            template=tuple(constants[name] for name in order),
            slots=tuple(order.index(name) for name in params),
        )

    def rows(self, values: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The driver's parameter rows: one per item of ``values``, each the values of the
        compiled ``params``, in their order."""
        row = list(self.template)
        slots = self.slots
        out = []
        for given in values:
            for slot, value in zip(slots, given, strict=True):
                row[slot] = value
            out.append(tuple(row))
        return out


async def aiosqlite_of(conn: AsyncConnection) -> Any:
    """The aiosqlite connection under ``conn`` (None on any other driver)."""
    if conn.dialect.driver != "aiosqlite":
        return None
    return (await conn.get_raw_connection()).driver_connection


def as_sqlalchemy_error(dialect: Dialect, sql: str, params: Any, exc: Exception) -> DBAPIError:
    """The driver's ``exc`` as SQLAlchemy raises it (``OperationalError`` for a locked or
    full database, and so on): what :func:`~digest_core.delivery.health.is_transient` reads."""
    error = DBAPIError.instance(sql, params, exc, dialect.loaded_dbapi.Error, dialect=dialect)
    assert isinstance(error, DBAPIError)
    return error


async def run_many(conn: AsyncConnection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """``sql`` once per row of ``rows`` (the driver's ``executemany``), in ``conn``'s
    transaction: one trip to aiosqlite's thread."""
    driver = await aiosqlite_of(conn)
    if driver is None:
        await conn.exec_driver_sql(sql, rows)
        return
    try:
        await driver.executemany(sql, rows)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise as_sqlalchemy_error(conn.dialect, sql, rows, exc) from exc


async def fetch_all(conn: AsyncConnection, sql: str, row: tuple[Any, ...]) -> list[Any]:
    """The rows ``sql`` returns with the parameters ``row``, in ``conn``'s transaction: one
    trip to aiosqlite's thread."""
    driver = await aiosqlite_of(conn)
    if driver is None:
        return list(await conn.exec_driver_sql(sql, row))
    try:
        return list(await driver.execute_fetchall(sql, row))
    except conn.dialect.loaded_dbapi.Error as exc:
        raise as_sqlalchemy_error(conn.dialect, sql, row, exc) from exc
