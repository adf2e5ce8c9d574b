"""Leases: named, reentrant locks held by one ledger owner (one delivery per platform).

On a database server they are rows whose expiry the server's clock sets and judges; on an
SQLite file they are OS locks beside it (:mod:`.oslocks`), held for the life of the process
that took them: nothing lapses there, and no clock is asked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from pathlib import Path

from sqlalchemy import (
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.oslocks import FileLocks
from digest_core.delivery.ledger.records import (
    Lease,
)
from digest_core.delivery.ledger.schema import (
    DEFAULT_LEASE_TTL,
    db_time,
    leases,
)
from digest_core.delivery.ledger.state import LedgerState, retried

__all__ = ["Leases", "foreign_holder"]

log = logging.getLogger(__name__)

#: how often a lock another process holds is tried again before it is reported held: a
#: process reading who holds it (``status``, /readyz) holds it for a moment
_LOCK_TRIES = 3
_LOCK_RETRY_SECONDS = 0.01


def _owner_dead(owner: str) -> bool:
    """True if ``owner`` (``host:pid:token``) is a process on this host that no longer exists.

    Only a certain death counts: another host, an unreadable owner, or a live pid (even a
    reused one) keep the lease until it expires.
    """
    try:
        host, pid_text, _ = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if sys.platform == "win32" or host != socket.gethostname() or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: alive, someone else's
        return False
    return False


async def foreign_holder(
    conn: AsyncConnection, name: str, *, owner: str, locks: FileLocks | None = None
) -> Lease | None:
    """The lease ``name`` if an owner other than ``owner`` holds it and it is live (unexpired by the
    database's clock, holder not known dead; with ``locks``, the ledger's OS locks: another
    instance holds the lock)."""
    if locks is not None:
        if locks.holds(name):
            return None
        holder = locks.holder(name)
        return None if holder is None else Lease(name, holder, None)
    row = (
        await conn.execute(
            select(
                leases.c.owner,
                leases.c.expires_at,
                (leases.c.expires_at > db_time()).label("live"),
            ).where(leases.c.name == name)
        )
    ).first()
    if row is None or row.owner == owner or not row.live:
        return None
    if _owner_dead(row.owner):
        return None
    return Lease(name, row.owner, row.expires_at)


class Leases:
    """Take, renew and release leases."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    @retried
    async def acquire_lease(self, name: str, *, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        """Take the lease ``name`` for ``ttl`` seconds, unless another owner holds it.

        Returns the lease as it stands: this instance holds it iff ``lease.owner ==
        self.state.owner``. It is free when no one holds it, it expired, or its holder is a process
        of this host that no longer exists (a crashed run: taken over at once). Leases are
        reentrant: each acquisition by the holder extends it and MUST be matched by one
        :meth:`release_lease`. The holder SHOULD :meth:`renew_lease` well within ``ttl``.

        On an SQLite file the lease is an OS lock (``ttl`` is not used): held until released
        or until the holding process ends, however it ends; ``expires_at`` is None.

        Raises:
            OSError: (SQLite) the lock file cannot be opened or locked.
        """
        if ttl <= 0:
            raise ValueError("a lease needs a positive ttl")
        if self.state.locks is not None:
            return await self._acquire_lock(self.state.locks, name)
        for attempt in range(3):
            try:
                lease = await self._try_acquire(name, ttl)
            except IntegrityError:  # another process inserted it first: look again
                if attempt == 2:
                    raise
                continue
            if lease.owner == self.state.owner:
                self.state.holds[name] = self.state.holds.get(name, 0) + 1
            return lease
        raise AssertionError("unreachable")

    async def _acquire_lock(self, locks: FileLocks, name: str) -> Lease:
        holder: str | None = None
        for attempt in range(_LOCK_TRIES):
            if attempt:
                await asyncio.sleep(_LOCK_RETRY_SECONDS)  # (not a clock: a syscall's moment)
            holder = locks.try_lock(name, self.state.owner)
            if holder is None:
                if not self.state.holds.get(name) and (left := locks.left_by.get(name)):
                    log.warning("lease %s: took over from %s, which ended holding it", name, left)
                self.state.holds[name] = self.state.holds.get(name, 0) + 1
                return Lease(name, self.state.owner, None)
        assert holder is not None
        return Lease(name, holder, None)

    async def _try_acquire(self, name: str, ttl: float) -> Lease:
        # Expiry is set and judged by the database's clock (db_time), so hosts whose clocks
        # disagree, or a clock that jumps, cannot both think they hold the lease.
        expires = db_time(ttl)
        async with self.state.tx() as conn:
            # write first: on SQLite the transaction takes the write lock before it reads
            result = await conn.execute(
                update(leases)
                .where(
                    leases.c.name == name,
                    (leases.c.owner == self.state.owner) | (leases.c.expires_at <= db_time()),
                )
                .values(owner=self.state.owner, expires_at=expires)
            )
            if not result.rowcount:
                row = (
                    await conn.execute(
                        select(leases.c.owner, leases.c.expires_at).where(leases.c.name == name)
                    )
                ).first()
                if row is None:
                    await conn.execute(
                        insert(leases).values(name=name, owner=self.state.owner, expires_at=expires)
                    )
                elif not _owner_dead(row.owner):
                    return Lease(name, row.owner, row.expires_at)
                elif (
                    await conn.execute(
                        update(leases)
                        .where(leases.c.name == name, leases.c.owner == row.owner)
                        .values(owner=self.state.owner, expires_at=expires)
                    )
                ).rowcount:
                    log.warning("lease %s: took over from %s, which is gone", name, row.owner)
            row = (
                await conn.execute(
                    select(leases.c.owner, leases.c.expires_at).where(leases.c.name == name)
                )
            ).one()
            return Lease(name, row.owner, row.expires_at)

    async def renew_lease(self, name: str, *, ttl: float = DEFAULT_LEASE_TTL) -> bool:
        """Extend a lease this instance holds to ``ttl`` seconds from now (the database's
        clock); False if it lost it (it expired and another owner took it).

        An OS lock (SQLite) needs no renewal and asks nothing of the database: True while this
        instance holds it and its lock file is still in place."""
        if self.state.locks is not None:
            return self.state.locks.intact(name)
        async with self.state.tx() as conn:
            result = await conn.execute(
                update(leases)
                .where(leases.c.name == name, leases.c.owner == self.state.owner)
                .values(expires_at=db_time(ttl))
            )
        return bool(result.rowcount)

    @retried
    async def release_lease(self, name: str) -> None:
        """Undo one :meth:`acquire_lease`; the last one frees the lease for others."""
        holds = self.state.holds.get(name, 0) - 1
        if holds > 0:
            self.state.holds[name] = holds
            return
        self.state.holds.pop(name, None)
        if self.state.locks is not None:
            self.state.locks.unlock(name)
            return
        async with self.state.tx() as conn:
            await conn.execute(
                delete(leases).where(leases.c.name == name, leases.c.owner == self.state.owner)
            )

    @property
    def leases_are_locks(self) -> bool:
        """True when leases are OS locks (an SQLite file): they never lapse, and are freed
        only by their holder (releasing them, or ending)."""
        return self.state.locks is not None

    def lock_left_by(self, name: str) -> str | None:
        """Of an OS lock this instance holds: the owner that held it before and ended without
        releasing it (killed, crashed), else None."""
        return None if self.state.locks is None else self.state.locks.left_by.get(name)

    def lock_file(self, name: str) -> Path | None:
        """The lock file of the lease ``name`` when leases are OS locks, else None."""
        return None if self.state.locks is None else self.state.locks.path(name)

    async def lease(self, name: str) -> Lease | None:
        """The lease ``name`` as stored (possibly expired), or None. As an OS lock (SQLite):
        its holder (``expires_at`` None), or None when no process holds it."""
        if self.state.locks is not None:
            holder = self.state.locks.holder(name)
            return None if holder is None else Lease(name, holder, None)
        async with self.state.tx() as conn:
            row = (
                await conn.execute(
                    select(leases.c.owner, leases.c.expires_at).where(leases.c.name == name)
                )
            ).first()
        return None if row is None else Lease(name, row.owner, row.expires_at)

    async def free_leases_of(self, owner: str) -> list[str]:
        """Free every lease ``owner`` holds; returns their names.

        For a leader taking over from one whose leadership lapsed (dead, or cut off from the
        database): its delivery leases would otherwise hold the deliveries it left for up to
        their ttl. Claims stay conditional, so a part is still claimed by one process only.

        OS locks (SQLite) cannot be freed by another: a dead owner's are free already, a live
        one's stay its own; nothing is freed (an empty list).
        """
        if self.state.locks is not None:
            return []
        async with self.state.tx() as conn:
            names = (
                (await conn.execute(select(leases.c.name).where(leases.c.owner == owner)))
                .scalars()
                .all()
            )
            await conn.execute(delete(leases).where(leases.c.owner == owner))
        return list(names)
