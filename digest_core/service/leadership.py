"""Leadership: of the ``run`` processes sharing one ledger, one leads (schedules, posts, receives).

The leader holds the ledger lease :data:`LEADER_LEASE`. On a database server (PostgreSQL) its
expiry is set and judged by the server's clock (see :mod:`digest_core.delivery.ledger.leases`)
and the leader renews it every third of its ttl. A standby tries to take it every third of the
ttl: it gets it once the leader released it (a clean stop), once it lapsed (a leader killed, or
cut off from the database), or at once when the holder is a dead process of this host. Taking
over from a lapsed leader frees that leader's delivery leases, so the delivery it left resumes
at once instead of after their ttl; claims of parts stay conditional, so no part is claimed
twice. A leader that cannot renew within two thirds of the ttl, or finds another owner holding
the lease, has lost the leadership (in the first case, before its lease could lapse):
:meth:`Leadership.hold` returns and the caller stops leading (``digest-bot run`` exits; see
:class:`LeadershipLost`).

On an SQLite file (one host) the lease is an OS lock beside the ledger
(:mod:`digest_core.delivery.ledger.oslocks`), held for the life of the leading process and
released by the kernel when it ends, even by SIGKILL. It never lapses: a database that stays
locked or slow only makes the ledger's writes wait, and the leader leads on. A standby tries
the lock every :data:`LOCK_POLL_SECONDS` (a system call, not a query) and leads within that
of the leader's end; its delivery locks went with it. The leadership is lost only if the lock
file is deleted or replaced under the leader (another process could lock the new file).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from enum import StrEnum
from typing import Protocol, runtime_checkable

from digest_core.clock import Clock
from digest_core.delivery.ledger import Lease, Ledger

log = logging.getLogger(__name__)

#: the name of the leader's lease in the ledger
LEADER_LEASE = "leader"
DEFAULT_LEASE_SECONDS = 15.0
#: how often a standby tries the leader's OS lock (SQLite): it leads within this of the end of
#: the leader's process
LOCK_POLL_SECONDS = 0.5


@runtime_checkable
class StandbyReceiver(Protocol):
    """An adapter that may answer commands while another process leads (one that needs no
    connection of its own, such as a webhook); others start only once this process leads."""

    @property
    def standby_receives(self) -> bool:
        """True when, as configured, it can receive as a standby."""
        ...


def receives_as_standby(adapter: object) -> bool:
    """Whether ``adapter`` is started while this process is a standby."""
    return isinstance(adapter, StandbyReceiver) and adapter.standby_receives


class Role(StrEnum):
    #: not yet tried to lead
    STARTING = "starting"
    STANDBY = "standby"
    LEADER = "leader"
    #: led, then lost the lease: stopping
    LOST = "lost"


class Leadership:
    """This process's part in the election (one per ledger owner)."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        clock: Clock,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        name: str = LEADER_LEASE,
    ) -> None:
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self.ledger = ledger
        self.clock = clock
        self.ttl = lease_seconds
        self.name = name
        self.role = Role.STARTING
        #: the owner seen leading (this process's own id once it leads); None: no one
        self.holder: str | None = None
        #: when this process's role last changed (aware UTC)
        self.since: dt.datetime = clock.now()
        #: times this process became leader
        self.terms = 0

    @property
    def leading(self) -> bool:
        return self.role is Role.LEADER

    async def try_lead(self) -> bool:
        """Take the leadership if it is free; True when this process leads (now or already).

        Raises:
            sqlalchemy.exc.SQLAlchemyError: the ledger failed with a non-transient error
                (transient ones are waited out by the ledger).
        """
        locks = self.ledger.leases_are_locks
        # (an OS lock has no lapsed holder to free: it was free, or its holder ended)
        previous = None if locks else await self.ledger.lease(self.name)
        lease = await self.ledger.acquire_lease(self.name, ttl=self.ttl)
        if lease.owner != self.ledger.owner:
            self.holder = lease.owner
            if self.role is Role.STARTING:
                self.role, self.since = Role.STANDBY, self.clock.now()
            return False
        if self.leading:  # (reentrant: one acquisition is enough)
            await self.ledger.release_lease(self.name)
            return True
        self.role, self.holder, self.since = Role.LEADER, lease.owner, self.clock.now()
        self.terms += 1
        if locks and (left := self.ledger.lock_left_by(self.name)):
            log.warning(
                "leading now: took over from %s, which ended without stepping down (the "
                "kernel released its lock %s)",
                left,
                self.ledger.lock_file(self.name),
            )
        elif previous is not None and previous.owner != self.ledger.owner:
            freed = await self.ledger.free_leases_of(previous.owner)
            log.warning(
                "leading now: took over from %s, whose lease lapsed (freed its leases: %s)",
                previous.owner,
                ", ".join(sorted(freed)) or "none",
            )
        else:
            log.info("leading now (%s)", self.ledger.owner)
        return True

    async def wait_to_lead(self) -> None:
        """Return once this process leads, trying every third of the ttl (an OS lock: every
        :data:`LOCK_POLL_SECONDS`). Cancellable."""
        told: str | None = None
        while not await self.try_lead():
            if self.holder != told:
                told = self.holder
                if self.ledger.leases_are_locks:
                    log.info(
                        "standby: %s leads (it holds the lock %s for as long as it runs); "
                        "taking over within %.1f s of its end",
                        self.holder,
                        self.ledger.lock_file(self.name),
                        LOCK_POLL_SECONDS,
                    )
                else:
                    log.info(
                        "standby: %s leads; taking over within %.0f s of its lease lapsing",
                        self.holder,
                        self.ttl / 3,
                    )
            await self.clock.sleep(self.poll_seconds)

    @property
    def poll_seconds(self) -> float:
        """How often a standby tries to lead."""
        return (
            min(LOCK_POLL_SECONDS, self.ttl / 3) if self.ledger.leases_are_locks else self.ttl / 3
        )

    async def hold(self) -> None:
        """While leading, renew the lease every third of the ttl (sooner again after a failed
        renewal); return when it is lost: another owner holds it, or no renewal succeeded
        within two thirds of the ttl of the last one, a third of the ttl before the lease
        could lapse. The role is then :attr:`Role.LOST`. Cancellable.

        An OS lock (SQLite) is only looked at (its file still the one locked), which asks
        nothing of the database: however long the database is locked, it is not lost."""
        last_ok = self.clock.monotonic()
        delay = self.ttl / 3
        while True:
            await self.clock.sleep(delay)
            started = self.clock.monotonic()
            left = last_ok + self.ttl * 2 / 3 - started
            try:
                if left <= 0:
                    raise TimeoutError("no time left to renew")
                async with asyncio.timeout(left):
                    held = await self.ledger.renew_lease(self.name, ttl=self.ttl)
            except Exception as exc:  # (TimeoutError included) the next one may work
                if self.clock.monotonic() - last_ok < self.ttl * 2 / 3:
                    log.warning("could not renew the leader's lease: %s; trying again", exc)
                    delay = self.ttl / 12
                    continue
                log.error(
                    "could not renew the leader's lease for %.1f s (%s): stepping down before "
                    "it lapses",
                    self.clock.monotonic() - last_ok,
                    exc or type(exc).__name__,
                )
                break
            if not held and self.ledger.leases_are_locks:
                log.error(
                    "the leader's lock file %s was deleted or replaced: stepping down (another "
                    "process could lock the new one); do not remove the ledger's .locks folder",
                    self.ledger.lock_file(self.name),
                )
                break
            if not held:
                lease = await self._lease_or_none()
                log.error(
                    "lost the leader's lease: %s holds it now",
                    lease.owner if lease is not None else "no one",
                )
                break
            last_ok, delay = started, self.ttl / 3
        self.role, self.since = Role.LOST, self.clock.now()

    async def _lease_or_none(self) -> Lease | None:
        try:
            return await self.ledger.lease(self.name)
        except Exception:
            return None


async def describe_leader(ledger: Ledger) -> str:
    """One line for ``digest-bot status``: which process leads, as the ledger records it."""
    lease = await ledger.lease(LEADER_LEASE)
    if lease is None:
        return "领导者 / leader: 无 / none (no `digest-bot run` is running on this ledger)"
    if lease.expires_at is None:
        return (
            f"领导者 / leader: {lease.owner} (host:pid:id), holding the lock "
            f"{ledger.lock_file(LEADER_LEASE)} for as long as it runs"
        )
    return (
        f"领导者 / leader: {lease.owner} (host:pid:id), lease until "
        f"{lease.expires_at:%Y-%m-%d %H:%M:%S} UTC by the database's clock, unless renewed"
    )
