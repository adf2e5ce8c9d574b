"""Which database errors the ledger waits out: real errors of a real PostgreSQL and SQLite."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from digest_core.delivery.health import is_transient, sqlstate


async def error_of(url: str, *statements: str) -> DBAPIError:
    """The error the last of ``statements`` raises (each in its own transaction)."""
    engine = create_async_engine(url)
    try:
        for statement in statements[:-1]:
            async with engine.begin() as conn:
                await conn.execute(text(statement))
        with pytest.raises(DBAPIError) as caught:
            async with engine.begin() as conn:
                await conn.execute(text(statements[-1]))
        return caught.value
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("statements", "code", "transient"),
    [
        # the server ended the session (as a fast shutdown does to every one): wait
        (["SELECT pg_terminate_backend(pg_backend_pid())"], "57P01", True),
        # errors of the SQL itself: never retried
        (["CREATE TABLE t (k int PRIMARY KEY)", "INSERT INTO t VALUES (1), (1)"], "23505", False),
        (["SELECT 1 / 0"], "22012", False),
        (["SELECT * FROM nowhere"], "42P01", False),
    ],
)
async def test_postgresql_errors_are_judged_by_sqlstate(
    pg_url: str, statements: list[str], code: str, transient: bool
) -> None:
    error = await error_of(pg_url, *statements)
    if code != "57P01":  # a terminated session may also surface as a closed connection
        assert sqlstate(error) == code
    assert is_transient(error) is transient, error


async def test_a_refused_connection_is_transient() -> None:
    # a port nothing listens on: what a restarting server's clients see between its two lives
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = create_async_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/x")
    try:
        with pytest.raises(Exception) as caught:  # whatever the driver raises
            async with engine.connect():
                pass
    finally:
        await engine.dispose()
    assert is_transient(caught.value)


async def test_sqlite_busy_and_full_are_transient_a_damaged_file_is_not(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    url = f"sqlite+aiosqlite:///{db}?timeout=0.05"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (k int)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        locked = await error_of(url, "INSERT INTO t VALUES (1)")
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert "locked" in str(locked) and is_transient(locked)

    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"this is not an SQLite file, only some bytes" * 100)
    broken = await error_of(f"sqlite+aiosqlite:///{damaged}", "SELECT * FROM sqlite_master")
    assert "not a database" in str(broken) and not is_transient(broken)
