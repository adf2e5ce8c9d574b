"""Statements the database driver runs itself, with plain tuples: the ledger's batches.

SQLAlchemy converts every parameter of every row it executes (its ``construct_params`` and
the type processors: at 100k subscribers, 500k parameter sets and 700k datetimes, 15% of a
delivery's CPU). A batch of the writer or of planning is one statement run for many rows
whose only converted value is the batch's one timestamp, so :class:`DriverStatement` lets
SQLAlchemy compile the statement once per dialect, converts the timestamp once per batch
(:func:`driver_value`), and hands the rows to the driver's ``executemany`` as tuples
(``AsyncConnection.exec_driver_sql``), for aiosqlite and asyncpg alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


def driver_value(type_: Any, value: Any, dialect: Dialect) -> Any:
    """``value`` of SQLAlchemy type ``type_`` as ``dialect``'s driver takes it (a ledger
    time: naive UTC, text on SQLite), converted as SQLAlchemy would."""
    process = type_.dialect_impl(dialect).bind_processor(dialect)
    return value if process is None else process(value)


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
