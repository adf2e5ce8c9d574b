"""Adapters' own periodic work, run by the leader's scheduler (email: its bounce mailbox).

An adapter with work of its own to do every so often says so (:class:`Periodic`); ``run``
adds each :class:`PeriodicJob` to its scheduler once this process leads, the first run at once
(what came in while the bot was down), then every ``seconds``. Adapters never sleep (the
Platform contract): their timers are the scheduler's. A job MUST NOT raise for what its
server answers (it logs it and tries again next time); it runs only once at a time.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeriodicJob:
    """``run`` every ``seconds``; ``name`` is the job's (logged by the scheduler)."""

    name: str
    seconds: float
    run: Callable[[], Awaitable[object]]


@runtime_checkable
class Periodic(Protocol):
    """An adapter with periodic work of its own."""

    def periodic_jobs(self) -> Sequence[PeriodicJob]:
        """The jobs to run while this process leads (none: nothing to do)."""
        ...


def install(scheduler: AsyncIOScheduler, adapters: Iterable[object], *, now: dt.datetime) -> int:
    """Add the periodic jobs of ``adapters`` to ``scheduler``, each first run at ``now``;
    how many were added."""
    from apscheduler.triggers.interval import IntervalTrigger

    added = 0
    for adapter in adapters:
        if not isinstance(adapter, Periodic):
            continue
        for job in adapter.periodic_jobs():
            scheduler.add_job(
                job.run,
                IntervalTrigger(seconds=job.seconds),
                id=f"periodic:{job.name}",
                name=job.name,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=max(1, round(job.seconds)),
                next_run_time=now,
                replace_existing=True,
            )
            added += 1
    return added
