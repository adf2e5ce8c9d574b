"""Schema migrations (Alembic): new ledgers, ledgers of the releases before Alembic, refusals."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from digest_core.delivery.ledger import SCHEMA_VERSION, Ledger, PartState, metadata
from digest_core.delivery.ledger.migrate import HEAD, lock_for_upgrade, read_state, upgrade
from digest_core.errors import ConfigError, LedgerError
from digest_core.platform import Target, TargetKind
from digest_core.testing import ManualClock, make_issue, make_targets, part_counts

DATA = Path(__file__).with_name("data")
REF = make_issue().ref


def old_ledger(path: Path, version: int) -> str:
    """An SQLite ledger as the release of schema ``version`` (1-4, before Alembic) left it.

    ``data/ledger_v4.sql`` is the dump of a ledger written by the last of them (schema 4:
    six parts sent, a subscriber, an audit row); older layouts lack what each version added.
    """
    db = sqlite3.connect(path)
    db.executescript((DATA / "ledger_v4.sql").read_text())
    if version < 4:
        db.execute("DROP TABLE ledger_identity")
    if version < 3:
        db.execute("DROP INDEX ix_parts_updated")
    if version < 2:
        db.execute("DROP TABLE leases")
    db.execute("UPDATE schema_version SET version = ?", (version,))
    db.commit()
    db.close()
    return f"sqlite+aiosqlite:///{path}"


def sqlite_tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {name for (name,) in db.execute("SELECT name FROM sqlite_master")}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_a_ledger_of_a_release_before_alembic_is_upgraded_and_keeps_its_rows(
    tmp_path: Path, version: int
) -> None:
    url = old_ledger(tmp_path / "old.db", version)
    assert "alembic_version" not in sqlite_tables(tmp_path / "old.db")
    async with Ledger.open(url, clock=ManualClock()) as ledger:
        assert (await part_counts(ledger, REF))[PartState.SENT] == 6
        assert await ledger.subscribers("fake") == [Target("fake", "42", TargetKind.PRIVATE)]
        assert [e.outcome for e in await ledger.audit_log()] == ["sent 3"]
        assert (await ledger.acquire_lease("x", ttl=60)).owner == ledger.owner
        # a new plan and the states added since (unknown) round-trip through the old file
        row = (await ledger.plan(REF, "fake", make_targets(3), 3)).targets[2].parts[0]
        assert await ledger.claim(row.id)
        await ledger.mark_unknown(row.id, "OutcomeUnknown: cut")
        assert [r.state for r in await ledger.in_flight(REF)] == [PartState.UNKNOWN]
        async with ledger._tx() as conn:
            state = await conn.run_sync(read_state)
            plan = (
                await conn.exec_driver_sql(
                    "EXPLAIN QUERY PLAN SELECT id FROM parts ORDER BY updated_at DESC, id DESC"
                    " LIMIT 1"
                )
            ).all()
    assert (state.revision, state.version, state.legacy) == (HEAD, SCHEMA_VERSION, None)
    assert any("ix_parts_updated" in str(step) for step in plan), plan
    assert {"alembic_version", "day_summaries", "ledger_identity"} <= sqlite_tables(
        tmp_path / "old.db"
    )
    if version == 4:  # its id is kept (the marker beside a real one records it)
        assert ledger.ledger_id == "aa87bb6166404108af9f872b7f403d33"


async def test_without_auto_upgrade_an_old_ledger_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    url = old_ledger(tmp_path / "old.db", 4)
    with pytest.raises(LedgerError) as caught:
        async with Ledger.open(url, clock=ManualClock(), upgrade=False):
            pass
    assert "schema version 4" in str(caught.value)
    assert "digest-bot db upgrade" in str(caught.value)
    assert "alembic_version" not in sqlite_tables(tmp_path / "old.db")
    # an empty database is not "old": it gets the schema either way
    async with Ledger.open(
        f"sqlite+aiosqlite:///{tmp_path / 'new.db'}", clock=ManualClock(), upgrade=False
    ) as ledger:
        assert await ledger.subscribe("fake", "1")


async def test_a_ledger_of_a_newer_release_is_refused(ledger_url: str) -> None:
    async with Ledger.open(ledger_url, clock=ManualClock()) as ledger, ledger._tx() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(ConfigError, match="newer than this code") as caught:
        async with Ledger.open(ledger_url, clock=ManualClock()):
            pass
    assert caught.value.key == "database_url"


async def test_instances_starting_at_once_on_a_new_database_all_open_it(ledger_url: str) -> None:
    """Two processes started together (or a bot and `digest-bot status`) both found no
    tables and both created them: one failed with "table already exists"."""

    async def one(i: int) -> str | None:
        async with Ledger.open(ledger_url, clock=ManualClock(), owner=f"o{i}") as ledger:
            return ledger.ledger_id

    ids = await asyncio.gather(*(one(i) for i in range(4)))
    assert len(set(ids)) == 1 and ids[0] is not None


async def test_the_migrated_schema_is_the_one_the_code_declares(ledger_url: str) -> None:
    """A table, column or index added to schema.py without a revision fails here."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    async with Ledger.open(ledger_url, clock=ManualClock()):
        pass
    engine = create_async_engine(ledger_url)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(
                lambda c: compare_metadata(MigrationContext.configure(c), metadata)
            )
    finally:
        await engine.dispose()
    assert diff == []


async def test_the_revisions_build_the_declared_schema_from_nothing(ledger_url: str) -> None:
    """A new ledger is made with create_all (fast, no Alembic import); the revisions, run
    from an empty database, must build the same thing."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = create_async_engine(ledger_url)
    try:
        async with engine.begin() as conn:
            await lock_for_upgrade(conn)
            assert await conn.run_sync(lambda c: upgrade(c, to="0004")) == [
                "0001",
                "0002",
                "0003",
                "0004",
            ]
            assert await conn.run_sync(upgrade) == [
                f"{v:04d}" for v in range(5, SCHEMA_VERSION + 1)
            ]
            state = await conn.run_sync(read_state)
            diff = await conn.run_sync(
                lambda c: compare_metadata(MigrationContext.configure(c), metadata)
            )
    finally:
        await engine.dispose()
    assert state.current
    assert diff == []


async def test_a_postgresql_ledger_of_a_release_before_alembic_is_upgraded(pg_url: str) -> None:
    """The layout schema 4 had on PostgreSQL: revisions 1-4, without Alembic's table."""
    engine = create_async_engine(pg_url)
    try:
        async with engine.begin() as conn:
            await lock_for_upgrade(conn)
            await conn.run_sync(lambda c: upgrade(c, to="0004"))
            await conn.execute(text("DROP TABLE alembic_version"))
            assert (await conn.run_sync(read_state)).legacy == 4
    finally:
        await engine.dispose()
    async with Ledger.open(pg_url, clock=ManualClock()) as ledger:
        assert await ledger.subscribe("fake", "1")
        async with ledger._tx() as conn:
            state = await conn.run_sync(read_state)
            columns = await conn.run_sync(lambda c: inspect(c).get_columns("deliveries"))
            version = (await conn.execute(text("SELECT version FROM schema_version"))).scalar()
    assert state.current and version == SCHEMA_VERSION
    assert "pruned_at" in {c["name"] for c in columns}


def test_every_revision_is_a_schema_version() -> None:
    from digest_core.delivery.ledger.migrate import scripts

    revisions = sorted(r.revision for r in scripts().walk_revisions())
    assert revisions == [f"{v:04d}" for v in range(1, SCHEMA_VERSION + 1)]
    assert scripts().get_current_head() == HEAD
