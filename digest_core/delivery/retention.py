"""The daily retention job: prune the ledger's old rows (``[ledger] keep_days``), one at a time."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from digest_core.clock import Clock
from digest_core.delivery.ledger import Ledger, PruneReport
from digest_core.delivery.ledger.retention import DEFAULT_BATCH, DEFAULT_PAUSE

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)

#: the scheduler's id of the daily pruning
JOB_ID = "ledger-retention"

#: the lease the pruning process holds, so two instances on one database do not both prune
PRUNE_LEASE = "prune"
#: how long that lease lasts (pruning a day of 100k subscribers takes about a minute)
PRUNE_LEASE_TTL = 600.0


@dataclass(frozen=True)
class RetentionPolicy:
    """How long rows are kept (``[ledger]`` settings) and how gently they are pruned."""

    keep_days: int = 90
    audit_keep_days: int = 400
    batch: int = DEFAULT_BATCH
    pause: float = DEFAULT_PAUSE

    def cutoffs(self, now: dt.datetime, zone: dt.tzinfo) -> tuple[dt.date, dt.datetime]:
        """(issue dates before this are pruned, audit rows before this are deleted)."""
        today = now.astimezone(zone).date()
        return today - dt.timedelta(days=self.keep_days), now - dt.timedelta(
            days=self.audit_keep_days
        )


async def prune_once(
    ledger: Ledger, policy: RetentionPolicy, *, clock: Clock, zone: dt.tzinfo
) -> PruneReport | None:
    """Prune what ``policy`` no longer keeps, holding the :data:`PRUNE_LEASE`; None (and
    nothing done) when another process holds it. Cutoffs come from ``clock``:
    issues dated more than ``keep_days`` days before today in ``zone``, audit rows older
    than ``audit_keep_days`` days."""
    lease = await ledger.acquire_lease(PRUNE_LEASE, ttl=PRUNE_LEASE_TTL)
    if lease.owner != ledger.owner:
        log.info("pruning: %s is pruning the ledger already", lease.owner)
        return None
    try:
        before, audit_before = policy.cutoffs(clock.now(), zone)
        report = await ledger.prune(
            before=before, audit_before=audit_before, batch=policy.batch, pause=policy.pause
        )
    finally:
        await ledger.release_lease(PRUNE_LEASE)
    if report.parts or report.audit:
        log.info(
            "pruned %d part rows of %d days (before %s) into %d summaries, and %d audit rows",
            report.parts,
            len(report.days),
            before,
            report.summaries,
            report.audit,
        )
    return report


class RetentionJob:
    """The daily :func:`prune_once` at ``at`` (local time in ``zone``), off the post's path."""

    def __init__(
        self,
        ledger: Ledger,
        policy: RetentionPolicy,
        *,
        clock: Clock,
        zone: dt.tzinfo,
        at: dt.time,
    ) -> None:
        self.ledger = ledger
        self.policy = policy
        self.clock = clock
        self.zone = zone
        self.at = at
        self._running: set[asyncio.Task[object]] = set()

    def install(self, scheduler: AsyncIOScheduler) -> None:
        """Add the daily cron job (fixed id) to ``scheduler``."""
        from apscheduler.triggers.cron import CronTrigger

        if scheduler.get_job(JOB_ID) is not None:
            scheduler.remove_job(JOB_ID)
        scheduler.add_job(
            self.run,
            CronTrigger(hour=self.at.hour, minute=self.at.minute, timezone=self.zone),
            id=JOB_ID,
            name="ledger retention",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=3600,
        )

    async def run(self) -> PruneReport | None:
        """One pruning (what the scheduler runs); a failure is logged, never raised: the
        next day tries again."""
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            return await prune_once(self.ledger, self.policy, clock=self.clock, zone=self.zone)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pruning the ledger failed; it is tried again tomorrow")
            return None
        finally:
            self._running.discard(task)

    async def stop(self) -> None:
        """Cancel a pruning under way (its batch rolls back) so none outlives the ledger."""
        tasks = list(self._running)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
