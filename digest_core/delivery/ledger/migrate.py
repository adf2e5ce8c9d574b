"""Schema upgrades with Alembic: the revisions in ``migrations/versions``, run at open."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Column,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    delete,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.schema import SCHEMA_VERSION, metadata, schema_version

if TYPE_CHECKING:  # Alembic takes 0.4 s to import: only when a schema is to be changed
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

__all__ = [
    "HEAD",
    "UPGRADE_COMMAND",
    "SchemaState",
    "lock_for_upgrade",
    "read_state",
    "scripts",
    "upgrade",
]

log = logging.getLogger(__name__)

#: the newest revision this code knows: the one a ledger is upgraded to
HEAD = f"{SCHEMA_VERSION:04d}"
#: the command that upgrades a ledger by hand (named in errors)
UPGRADE_COMMAND = "digest-bot db upgrade"
#: any 64-bit number of our own: the PostgreSQL advisory lock that serialises upgrades
_PG_LOCK = 0x6469676573740001


#: Alembic's table of the current revision, as Alembic creates it
_alembic_version = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


@cache
def scripts() -> ScriptDirectory:
    """The revisions shipped in this package."""
    # Alembic logs its plugins and each step at INFO; our own lines say what was upgraded
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(Path(__file__).with_name("migrations")))


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema stands.

    ``revision`` is the Alembic revision (``"0004"``), that of ``legacy`` for a ledger the
    hand-written migrations of older releases left at version ``legacy`` (no Alembic table
    yet), or None for an empty database.
    """

    revision: str | None
    legacy: int | None = None
    #: the schema version recorded (``schema_version`` table), if any
    version: int | None = None

    @property
    def empty(self) -> bool:
        return self.revision is None

    @property
    def current(self) -> bool:
        """True when nothing is to be done."""
        return self.revision == HEAD and self.legacy is None and not self.newer_version

    @property
    def newer_version(self) -> bool:
        return self.version is not None and self.version > SCHEMA_VERSION

    @property
    def newer(self) -> bool:
        """True when a newer release wrote this schema (this code cannot use it)."""
        if self.newer_version:
            return True
        if self.revision is None:
            return False
        script = scripts()  # first: it quiets Alembic's import-time logging
        from alembic.util.exc import CommandError

        try:
            return script.get_revision(self.revision) is None
        except CommandError:
            return True

    def describe(self) -> str:
        if self.revision is None:
            return "empty (no ledger tables)"
        shown = f"schema version {self.version or int(self.revision)} (revision {self.revision})"
        return f"{shown}, from before Alembic" if self.legacy is not None else shown


def read_state(conn: Connection) -> SchemaState:
    """The schema state of the database behind ``conn`` (reads only)."""
    tables = set(inspect(conn).get_table_names())
    version = None
    if schema_version.name in tables:
        found = conn.execute(select(schema_version.c.version)).scalars().all()
        version = max(found) if found else None
    if "alembic_version" in tables:
        revision = conn.execute(select(_alembic_version.c.version_num)).scalar()
        if revision is not None:
            return SchemaState(str(revision), version=version)
    if version is not None:
        return SchemaState(f"{version:04d}", legacy=version, version=version)
    return SchemaState(None)


async def lock_for_upgrade(conn: AsyncConnection) -> None:
    """Make the transaction of ``conn`` the only one upgrading (and on SQLite, writing):
    two processes starting at once on a new database would both create its tables."""
    if conn.dialect.name == "postgresql":
        await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK})")
    elif conn.dialect.name == "sqlite":
        # DDL would otherwise run outside any transaction (pysqlite): take the write lock
        # now, waiting out another upgrader (busy_timeout), and keep the upgrade atomic
        await conn.exec_driver_sql("BEGIN IMMEDIATE")


def upgrade(conn: Connection, *, to: str = HEAD) -> list[str]:
    """Bring the database behind ``conn`` to revision ``to`` (default :data:`HEAD`), in the
    caller's transaction; returns the revisions applied (none when it was current).

    An empty database gets the declared schema (``create_all``) stamped :data:`HEAD`,
    without loading Alembic (the revisions build the same schema: a test compares them). A
    ledger from before Alembic is stamped with the revision of its version first. The
    caller MUST have checked :attr:`SchemaState.newer` and SHOULD hold
    :func:`lock_for_upgrade`.
    """
    state = read_state(conn)
    if state.current or (state.revision == to and state.legacy is None):
        return []
    if state.empty and to == HEAD:
        # the tables there are, listed once: create_all's own check asks for each table in
        # turn (a third of opening a new ledger)
        existing = set(inspect(conn).get_table_names())
        missing = [t for t in metadata.sorted_tables if t.name not in existing]
        metadata.create_all(conn, tables=missing, checkfirst=False)
        _alembic_version.create(conn)
        conn.execute(insert(_alembic_version).values(version_num=HEAD))
        conn.execute(delete(schema_version))
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
        return [f"{v:04d}" for v in range(1, SCHEMA_VERSION + 1)]
    script = scripts()
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    applied: list[str] = []

    def steps(rev: Any, context: MigrationContext) -> Any:
        found = script._upgrade_revs(to, rev)
        applied.extend(step.revision.revision for step in found)
        return found

    ctx = MigrationContext.configure(
        conn, opts={"fn": steps, "target_metadata": metadata, "script": script}
    )
    if state.legacy is not None:
        log.info("ledger schema version %d is from before Alembic: stamping it", state.legacy)
        ctx.stamp(script, state.revision or "base")
    with Operations.context(ctx):
        ctx.run_migrations()
    if applied:
        log.info("ledger schema upgraded: %s -> %s", state.revision or "empty", to)
    return applied
