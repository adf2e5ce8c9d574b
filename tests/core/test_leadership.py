"""Leadership over the ledger's lease: one leads, a standby takes over when the lease lapses
(PostgreSQL) or when the leader's process ends (SQLite: an OS lock, whatever the clocks say)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, delivery_lease
from digest_core.service.leadership import LEADER_LEASE, Leadership, Role, describe_leader
from digest_core.testing import make_issue, make_targets
from tests.clockskew import skewed_env

REF = make_issue().ref

#: owners on other hosts: a lapsed lease is the only way to learn they are gone
HOST_A, HOST_B = "host-a.example:101:aaaa", "host-b.example:202:bbbb"
#: a lease that lapses: PostgreSQL's (SQLite's is an OS lock held while its process runs)
LAPSING = pytest.mark.parametrize("url", ["postgresql"], indirect=True)


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


@LAPSING
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


@LAPSING
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

#: a second PostgreSQL client that locks the leases table, then gives it back when told
PG_LOCKER = """
import asyncio, sys
import asyncpg

async def main() -> None:
    conn = await asyncpg.connect(sys.argv[1])
    async with conn.transaction():
        await conn.execute("LOCK TABLE leases IN ACCESS EXCLUSIVE MODE")
        print("locked", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await conn.close()

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def locked(url: str) -> AsyncIterator[None]:
    """Within the block, another process holds the database's lock (SQLite: its write lock;
    PostgreSQL: the leases table)."""
    if url.startswith("sqlite"):
        args = [LOCKER, url.split("///", 1)[1].split("?", 1)[0]]
    else:
        args = [PG_LOCKER, url.replace("postgresql+asyncpg://", "postgresql://")]
    pipe = asyncio.subprocess.PIPE
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", *args, stdin=pipe, stdout=pipe
    )
    assert locker.stdout is not None and locker.stdin is not None
    try:
        assert (await locker.stdout.readline()).strip() == b"locked"
        yield
    finally:
        locker.stdin.write(b"go\n")
        await locker.stdin.drain()
        await locker.wait()


@LAPSING
async def test_a_leader_that_cannot_renew_steps_down_before_its_lease_lapses(url: str) -> None:
    """The database stops answering the leader (another process holds a lock it needs): after
    two thirds of the ttl without a renewal it stops leading, before a standby could take the
    lapsed lease."""
    async with Ledger.open(url, clock=SystemClock(), owner=HOST_A) as ledger:
        leadership = Leadership(ledger, clock=SystemClock(), lease_seconds=1.5)
        assert await leadership.try_lead()
        holding = asyncio.create_task(leadership.hold())
        async with locked(url):
            await asyncio.wait_for(holding, timeout=10)
            stepped_down = SystemClock().now()
            assert leadership.role is Role.LOST
        # stepped down while its lease was still live (by the database's clock): no one else
        # could have led meanwhile
        stored = await ledger.lease(LEADER_LEASE)
        assert stored is not None and stored.owner == HOST_A
        assert stored.expires_at is not None and stored.expires_at > stepped_down


class CountingClock(SystemClock):
    """The real clock, counting the sleeps asked of it (the leader's looks at its lease)."""

    def __init__(self) -> None:
        self.sleeps = 0

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        await super().sleep(seconds)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_sqlite_leader_leads_on_while_another_client_write_locks_the_ledger(
    tmp_path: Path,
) -> None:
    """SQLite's leadership is an OS lock: another client holding the write lock for many
    times the ttl only makes the ledger's writes wait; the leader never steps down."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}?timeout=0.1"
    clock = CountingClock()
    async with Ledger.open(url, clock=SystemClock(), owner=HOST_A) as ledger:
        leadership = Leadership(ledger, clock=clock, lease_seconds=1.5)
        assert await leadership.try_lead()
        holding = asyncio.create_task(leadership.hold())
        async with locked(url):
            write = asyncio.create_task(ledger.plan(REF, "fake", make_targets(1), 1))
            # the leader looks at its lease every ttl / 3: 9 looks span 4.5 s, three times the
            # ttl, and the ledger stays locked throughout (the write is still waiting)
            while clock.sleeps < 10:
                assert not holding.done(), "stepped down"
                await asyncio.sleep(0.05)
            assert not write.done() and leadership.leading
        plan = await asyncio.wait_for(write, timeout=30)  # it went through once unlocked
        assert len(plan.targets) == 1
        assert not holding.done() and leadership.leading and leadership.terms == 1
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_sqlite_leader_s_lock_is_not_taken_away_and_lost_only_with_its_file(
    tmp_path: Path,
) -> None:
    """The takeover of a partitioned leader (PostgreSQL: its lease freed by another) cannot
    happen to an OS lock: the other frees nothing. The leader steps down only if its lock
    file is deleted (another process could lock a new one)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    async with AsyncExitStack() as stack:
        a, b = await open_two(url, stack)
        first = Leadership(a, clock=SystemClock(), lease_seconds=0.6)
        second = Leadership(b, clock=SystemClock(), lease_seconds=0.6)
        assert await first.try_lead()
        holding = asyncio.create_task(first.hold())
        assert await b.free_leases_of(HOST_A) == []
        assert not await second.try_lead() and second.holder == HOST_A
        assert not holding.done() and first.leading
        lock = a.lock_file(LEADER_LEASE)
        assert lock is not None
        lock.unlink()
        await asyncio.wait_for(holding, timeout=5)
        assert first.role is Role.LOST and not first.leading


#: leads an SQLite ledger in a process of its own (a 2 s lease) until it is killed
LEADER = """
import asyncio, sys
from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, delivery_lease
from digest_core.service.leadership import Leadership

async def main() -> None:
    async with Ledger.open(sys.argv[1], clock=SystemClock()) as ledger:
        leadership = Leadership(ledger, clock=SystemClock(), lease_seconds=2)
        assert await leadership.try_lead()
        await ledger.acquire_lease(delivery_lease("telegram"), ttl=2)
        print(ledger.owner, flush=True)
        await leadership.hold()
        print("lost", flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("skew", ["", "-120s", "+120s"])
async def test_a_sqlite_leader_leads_until_its_process_ends_whatever_its_clock(
    tmp_path: Path, skew: str
) -> None:
    """A real leader process, its clock 120 s behind or ahead (faketime: SQLite's clock is
    the process's own), holds the leadership and its delivery lease while it lives: a 2 s
    lease is nothing to the standby here. SIGKILLed, it leaves both free at once."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    leader = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LEADER,
        url,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **skewed_env(skew)},
    )
    assert leader.stdout is not None
    try:
        owner = (await asyncio.wait_for(leader.stdout.readline(), 30)).decode().strip()
        assert owner.split(":")[1] == str(leader.pid)
        async with Ledger.open(url, clock=SystemClock(), owner=HOST_B) as ledger:
            standby = Leadership(ledger, clock=SystemClock(), lease_seconds=2)
            assert not await standby.try_lead() and standby.holder == owner
            busy = await ledger.acquire_lease(delivery_lease("telegram"), ttl=60)
            assert busy.owner == owner and busy.expires_at is None
            assert "lock" in await describe_leader(ledger) and owner in await describe_leader(
                ledger
            )
            assert leader.returncode is None  # it leads on: not "lost"
            leader.kill()
            await leader.wait()
            await asyncio.wait_for(standby.wait_to_lead(), timeout=5)
            assert standby.leading and standby.holder == HOST_B
            assert (await ledger.acquire_lease(delivery_lease("telegram"), ttl=60)).owner == HOST_B
    finally:
        if leader.returncode is None:
            leader.kill()
            await leader.wait()


async def test_status_names_the_leader(url: str) -> None:
    async with AsyncExitStack() as stack:
        a, _ = await open_two(url, stack)
        assert "none" in await describe_leader(a)
        assert await Leadership(a, clock=SystemClock()).try_lead()
        line = await describe_leader(a)
        assert line.startswith("领导者 / leader: ") and HOST_A in line
