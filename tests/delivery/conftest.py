"""The ledger's database for the delivery tests: each test that asks for ``ledger_url`` runs
twice, on an SQLite file and on a fresh PostgreSQL database (asyncpg; see tests/pg.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: the kinds of database the ledger tests run on
DATABASES = ("sqlite", "postgresql")


@pytest.fixture(params=DATABASES)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL to an empty ledger database that several ledgers (and processes) can share."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'ledger.sqlite3'}"
    return str(request.getfixturevalue("pg_url"))
