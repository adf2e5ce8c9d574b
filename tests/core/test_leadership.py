"""Leadership over the ledger's lease: one leads, a standby takes over when the lease lapses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, delivery_lease
from digest_core.leadership import LEADER_LEASE, Leadership, Role, describe_leader

#: owners on other hosts: a lapsed lease is the only way to learn they are gone
HOST_A, HOST_B = "host-a.example:101:aaaa", "host-b.example:202:bbbb"


@pytest.fixture(params=["sqlite", "postgresql"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
    else:
        yield request.getfixturevalue("pg_url")


async def open_two(url: str, stack: AsyncExitStack) -> tuple[Ledger, Ledger]:
    clock = SystemClock()
    a = await stack.enter_async_context(Ledger.open(url, clock=clock, owner=HOST_A))
    b = await stack.enter_async_context(Ledger.open(url, clock=clock, owner=HOST_B))
    return a, b


async def test_one_leads_the_other_waits(url: str) -> None:
    async with AsyncExitStack() as stack:
        a, b = await open_two(url, stack)
        first = Leadership(a, clock=SystemClock())
        second = Leadership(b, clock=SystemClock())
        assert first.role is Role.STARTING
        assert await first.try_lead() and first.role is Role.LEADER and first.terms == 1
        assert not await second.try_lead()
        assert second.role is Role.STANDBY and second.holder == HOST_A
        assert await first.try_lead()  # again: still the leader, one term
        assert first.terms == 1
        # released once: the lease is free for the standby at once (a clean stop)
        await a.release_lease(LEADER_LEASE)
        assert await second.try_lead() and second.holder == HOST_B


async def test_a_lapsed_leader_is_replaced_and_its_delivery_lease_freed(url: str) -> None:
    async with AsyncExitStack() as stack:
        a, b = await open_two(url, stack)
        first = Leadership(a, clock=SystemClock(), lease_seconds=1.0)
        second = Leadership(b, clock=SystemClock(), lease_seconds=1.0)
        assert await first.try_lead()
        # the leader was delivering (a long lease) when it was cut off: it renews nothing
        held = await a.acquire_lease(delivery_lease("telegram"), ttl=600)
        assert held.owner == HOST_A
        assert not await second.try_lead()
        await asyncio.wait_for(second.wait_to_lead(), timeout=10)  # once the 1 s lease lapses
        assert second.leading and second.holder == HOST_B
        # the delivery it left can resume now, not in 10 minutes
        assert await b.lease(delivery_lease("telegram")) is None
        assert (await b.acquire_lease(delivery_lease("telegram"), ttl=60)).owner == HOST_B


async def test_the_old_leader_finds_it_lost_the_lease(url: str) -> None:
    async with AsyncExitStack() as stack:
        a, b = await open_two(url, stack)
        first = Leadership(a, clock=SystemClock(), lease_seconds=0.6)
        second = Leadership(b, clock=SystemClock(), lease_seconds=0.6)
        assert await first.try_lead()
        holding = asyncio.create_task(first.hold())
        await asyncio.sleep(0.5)
        assert not holding.done() and first.leading  # renewed: still leading past its ttl
        # a takeover (as after a partition): the other process frees it and takes it
        await b.free_leases_of(HOST_A)
        assert await second.try_lead()
        await asyncio.wait_for(holding, timeout=5)
        assert first.role is Role.LOST and not first.leading


#: a second SQLite client that takes the write lock, then gives it back when told
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


async def test_a_leader_that_cannot_renew_steps_down_before_its_lease_lapses(
    tmp_path: Path,
) -> None:
    """The database stops answering the leader (another process holds SQLite's write lock):
    after two thirds of the ttl without a renewal it stops leading, before a standby could
    take the lapsed lease."""
    import sys

    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}?timeout=0.1"
    async with Ledger.open(url, clock=SystemClock(), owner=HOST_A) as ledger:
        leadership = Leadership(ledger, clock=SystemClock(), lease_seconds=1.5)
        assert await leadership.try_lead()
        holding = asyncio.create_task(leadership.hold())
        pipe = asyncio.subprocess.PIPE
        locker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCKER, str(tmp_path / "l.db"), stdin=pipe, stdout=pipe
        )
        assert locker.stdout is not None and locker.stdin is not None
        try:
            assert (await locker.stdout.readline()).strip() == b"locked"
            await asyncio.wait_for(holding, timeout=10)
            stepped_down = SystemClock().now()
            assert leadership.role is Role.LOST
        finally:
            locker.stdin.write(b"go\n")
            await locker.stdin.drain()
            await locker.wait()
        # stepped down while its lease was still live (SQLite's clock is this host's): no one
        # else could have led meanwhile
        stored = await ledger.lease(LEADER_LEASE)
        assert stored is not None and stored.owner == HOST_A
        assert stored.expires_at > stepped_down


async def test_status_names_the_leader(url: str) -> None:
    async with AsyncExitStack() as stack:
        a, _ = await open_two(url, stack)
        assert "none" in await describe_leader(a)
        assert await Leadership(a, clock=SystemClock()).try_lead()
        line = await describe_leader(a)
        assert line.startswith("领导者 / leader: ") and HOST_A in line
