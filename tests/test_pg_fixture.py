"""The PostgreSQL test fixture itself: a fresh, empty, private database per test."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests import forkserver
from tests.pg import PgServer

pytestmark = pytest.mark.slow  # real processes, servers or a browser


async def _tables_and_name(url: str) -> tuple[list[str], str]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            names = await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            )
            db = await conn.execute(text("SELECT current_database()"))
            tables = [r[0] for r in names]
            name = str(db.scalar_one())
            await conn.execute(text("CREATE TABLE leftover (x int)"))
        return tables, name
    finally:
        await engine.dispose()


async def test_each_test_gets_an_empty_database_of_its_own(
    pg_url: str, pg_server: PgServer
) -> None:
    tables, name = await _tables_and_name(pg_url)
    assert tables == []
    assert pg_url.startswith("postgresql+asyncpg://postgres@127.0.0.1:")
    assert pg_url.endswith(f"/{name}")
    other = pg_server.create_database()
    try:
        assert (await _tables_and_name(pg_server.url(other)))[0] == []  # not the leftover
    finally:
        pg_server.drop_database(other)


def test_the_server_does_not_run_as_root(pg_server: PgServer) -> None:
    owner = pg_server.sql("SELECT current_setting('data_directory')").strip()
    assert owner.startswith(str(pg_server.root))
    ps = subprocess.run(
        ["ps", "-o", "user=", "-p", str(pg_server.proc.pid)], capture_output=True, text=True
    )
    assert ps.stdout.strip() not in ("", "root")


async def test_a_script_can_start_a_server_of_its_own(pg_server: PgServer) -> None:
    """``python -m tests.pg``, for tests of several processes (pg_server: skip without one)."""
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "tests.pg",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    url = (await proc.stdout.readline()).decode().strip()
    try:
        assert (await _tables_and_name(url))[1] == "postgres"
    finally:
        proc.stdin.close()
        assert await proc.wait() == 0
