"""PostgreSQL specifics: a server that cannot be reached, or a database that does not exist,
is one line naming the URL (without its password) and the fix."""

from __future__ import annotations

import pytest

from digest_core.delivery import Ledger
from digest_core.errors import LedgerError
from digest_core.testing import ManualClock
from tests.pg import PgServer, _free_port


async def test_an_unreachable_server_is_one_line_without_the_password(
    pg_server: PgServer,
) -> None:
    url = f"postgresql+asyncpg://bot:hunter2@127.0.0.1:{_free_port()}/ledger"
    with pytest.raises(LedgerError) as caught:
        async with Ledger.open(url, clock=ManualClock()):
            pass
    text = str(caught.value)
    assert "hunter2" not in text and "\n" not in text
    assert text.startswith("ledger postgresql+asyncpg://bot:***@127.0.0.1:")
    assert "check that the database server is running" in text


async def test_a_missing_database_is_one_line(pg_server: PgServer) -> None:
    with pytest.raises(LedgerError) as caught:
        async with Ledger.open(pg_server.url("no_such_db"), clock=ManualClock()):
            pass
    assert 'database "no_such_db" does not exist' in str(caught.value)
