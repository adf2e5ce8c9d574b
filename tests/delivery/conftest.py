"""The ledger's database for the delivery tests: each test that asks for ``ledger_url`` (or
``ledger``, a ledger open on it) runs twice, on an SQLite file and on a fresh PostgreSQL
database (asyncpg; see tests/pg.py). ``clock`` is the ledger's manual clock; a module that
starts at another time defines its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from digest_core.delivery import Ledger
from digest_core.testing import ManualClock, open_ledger

#: the kinds of database the ledger tests run on
DATABASES = ("sqlite", "postgresql")


@pytest.fixture(params=DATABASES)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL to an empty ledger database that several ledgers (and processes) can share."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'ledger.sqlite3'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def ledger(clock: ManualClock, ledger_url: str) -> AsyncIterator[Ledger]:
    async with open_ledger(clock, ledger_url) as ledger:
        yield ledger
