"""Several processes opening one new PostgreSQL ledger at once (replicas starting together)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from digest_core.clock import SystemClock
from digest_core.delivery import Ledger


async def test_ledgers_opened_at_once_on_an_empty_database_all_open(pg_url: str) -> None:
    async def opened(stack: AsyncExitStack, n: int) -> Ledger:
        return await stack.enter_async_context(
            Ledger.open(pg_url, clock=SystemClock(), owner=f"host-{n}:1:x")
        )

    async with AsyncExitStack() as stack:
        ledgers = await asyncio.gather(*(opened(stack, n) for n in range(4)))
        assert len({ledger.ledger_id for ledger in ledgers}) == 1
        assert await ledgers[0].subscribe("telegram", "1")
        assert [t.id for t in await ledgers[3].subscribers("telegram")] == ["1"]
