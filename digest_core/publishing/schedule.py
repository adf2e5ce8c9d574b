"""The daily post: APScheduler 3.11 cron in the digest's zone, retries for a late file, catch-up.

The scheduler only triggers; what a post does (ledger, fan-out) is the ``post`` callback's.
Posting is keyed by the issue's *date*: a day already posted is never posted again, whatever
fires (a DST fall-back day fires a 02:30 cron twice; a restart runs the catch-up).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

from digest_core.clock import Clock, zoned_text
from digest_core.errors import DeliveryBusy

log = logging.getLogger(__name__)

JOB_ID = "daily-post"
#: a file still changing after this many settle intervals is posted as it is then
SETTLE_MAX_FACTOR = 12


class PostState(StrEnum):
    """How far the post of one day has got, according to the ledger."""

    NONE = "none"  # nothing planned
    PARTIAL = "partial"  # planned, some parts not sent yet (a crash, or failures)
    DONE = "done"  # every part reached a final state


class Outcome(StrEnum):
    """What one trigger of the daily post did."""

    POSTED = "posted"
    ALREADY = "already"  # the ledger says this day was posted
    WAITING = "waiting"  # today's file is missing; looking again later
    GAVE_UP = "gave_up"  # the file never came before the deadline; admins alerted
    MISSED = "missed"  # found on start, beyond the catch-up window; reported, not sent


def post_time_of(day: dt.date, *, zone: dt.tzinfo, post_time: dt.time) -> dt.datetime:
    """The aware moment the issue of ``day`` is due: ``post_time`` in ``zone`` (a nonexistent
    local time on a DST spring-forward day is moved forward, as the cron trigger does)."""
    local = dt.datetime.combine(day, post_time).replace(tzinfo=zone)
    return local.astimezone(dt.UTC).astimezone(zone)


@dataclass(frozen=True)
class ScheduleConfig:
    zone: dt.tzinfo
    post_time: dt.time
    catch_up: dt.timedelta = dt.timedelta(hours=6)
    retry_every: dt.timedelta = dt.timedelta(minutes=5)
    deadline: dt.timedelta = dt.timedelta(hours=4)
    #: the daily post runs (``[schedule] enabled``); False: the poster is never installed
    enabled: bool = True
    #: a day's file changed less than this long ago is still being saved: the post waits
    #: until it has been unchanged this long (at most :data:`SETTLE_MAX_FACTOR` times it)
    settle: dt.timedelta = dt.timedelta(seconds=10)


class DailyPoster:
    """Decides when the issue of a day is posted; see the module docstring."""

    def __init__(
        self,
        config: ScheduleConfig,
        *,
        clock: Clock,
        has_issue: Callable[[dt.date], bool],
        state: Callable[[dt.date], Awaitable[PostState]],
        post: Callable[[dt.date], Awaitable[Any]],
        alert: Callable[[str], Awaitable[None]],
        settle: Callable[[dt.date], Awaitable[object]] | None = None,
    ):
        """``settle(day)`` waits while the day's file is still being saved (see
        :func:`digest_core.archive.settling.wait_settled`); None: files are posted as found."""
        self.config = config
        self.clock = clock
        self._has_issue = has_issue
        self._settle = settle
        self._state = state
        self._post = post
        self._alert = alert
        self._scheduler: AsyncIOScheduler | None = None
        self._running: set[asyncio.Task[object]] = set()
        #: :meth:`stop` is cancelling the triggers still running
        self._stopping = False
        #: what the last catch-up and triggers found, for /status
        self.notes: list[str] = []

    # ------------------------------------------------------------ time arithmetic

    def post_at(self, day: dt.date) -> dt.datetime:
        """The aware moment the issue of ``day`` is due (a nonexistent local time on a DST
        spring-forward day is moved forward, as the cron trigger does)."""
        return post_time_of(day, zone=self.config.zone, post_time=self.config.post_time)

    def today(self) -> dt.date:
        return self.clock.now().astimezone(self.config.zone).date()

    def due_day(self) -> dt.date:
        """The latest day whose post time has come: today, or yesterday when a trigger runs
        late past midnight (a 23:30 post fired at 00:10 is still yesterday's post)."""
        now = self.clock.now()
        today = now.astimezone(self.config.zone).date()
        return today if self.post_at(today) <= now else today - dt.timedelta(days=1)

    def next_post(self) -> dt.datetime:
        """The next moment a post is due, for /status."""
        now = self.clock.now()
        day = now.astimezone(self.config.zone).date()
        for offset in range(3):
            at = self.post_at(day + dt.timedelta(days=offset))
            if at > now:
                return at
        raise AssertionError("unreachable: a post is due within three days")

    # ------------------------------------------------------------ decisions

    async def run_due(self, day: dt.date | None = None) -> Outcome:
        """Post the issue of ``day`` (default: today in the digest's zone) unless already posted.

        A missing file is looked for again every ``retry_every`` until ``deadline`` after the
        post time; then admins are alerted. Another day's issue is never posted instead. A
        file still being saved is waited for until it has settled (``settle``), so a half
        saved one is not posted.
        """
        day = day or self.due_day()
        state = await self._state(day)
        if state is PostState.DONE:
            log.info("issue of %s already posted; not posting again", day)
            return Outcome.ALREADY
        if self._settle is not None:
            await self._settle(day)
        if not self._has_issue(day):
            now = self.clock.now()
            give_up_at = self.post_at(day) + self.config.deadline
            if now < give_up_at:
                retry = min(now + self.config.retry_every, give_up_at)
                log.warning("no issue file for %s yet; looking again at %s", day, retry)
                self._later(retry, day)
                return Outcome.WAITING
            message = (
                f"今天（{day}）的日报文件在截止时间前没有出现，未推送。"
                f" No issue file for {day} by {zoned_text(give_up_at, day=False)}; nothing was "
                "posted."
            )
            self.notes.append(message)
            await self._alert(message)  # (which logs it: printed once)
            return Outcome.GAVE_UP
        try:
            await self._post(day)
        except DeliveryBusy as exc:
            # another process (a `digest-bot post`) holds the delivery lease: what it sends is
            # not sent again, so look again later for whatever it leaves
            retry = self.clock.now() + self.config.retry_every
            log.warning("%s; looking again at %s", exc, retry)
            self._later(retry, day)
            return Outcome.WAITING
        return Outcome.POSTED

    async def catch_up(self, *, report_missed: bool = True) -> list[tuple[dt.date, Outcome]]:
        """On start: post a missed post within the catch-up window, report older ones.

        ``report_missed`` False (a first start, with an empty ledger) skips the reports: a bot
        that never ran has missed nothing.
        """
        now = self.clock.now()
        today = now.astimezone(self.config.zone).date()
        results: list[tuple[dt.date, Outcome]] = []
        for day in (today - dt.timedelta(days=1), today):
            due = self.post_at(day)
            if due > now:
                continue
            state = await self._state(day)
            if state is PostState.DONE:
                continue
            late = now - due
            if late <= self.config.catch_up:
                log.info("catching up the post of %s (due %s, %s late)", day, due, late)
                results.append((day, await self.run_due(day)))
            elif report_missed and (state is PostState.PARTIAL or self._has_issue(day)):
                hours = late.total_seconds() / 3600
                message = (
                    f"错过了 {day} 的推送（应在 {zoned_text(due)}，已过 {hours:.1f} 小时，"
                    f"超出补发窗口），未补发；可用 /repost {day} 手动推送。"
                    f" Missed the post of {day} ({hours:.1f} h ago, beyond the catch-up window);"
                    f" not sent. Use /repost {day} to send it."
                )
                self.notes.append(message)
                await self._alert(message)  # (which logs it: printed once)
                results.append((day, Outcome.MISSED))
        return results

    # ------------------------------------------------------------ APScheduler wiring

    def install(self, scheduler: AsyncIOScheduler) -> None:
        """Add the daily cron job (fixed id, replace_existing) to ``scheduler``."""
        self._scheduler = scheduler
        t = self.config.post_time
        if scheduler.get_job(JOB_ID) is not None:
            # replace_existing only applies once the scheduler runs; before start() a second
            # add_job would queue a second job
            scheduler.remove_job(JOB_ID)
        scheduler.add_job(
            self._job,
            CronTrigger(hour=t.hour, minute=t.minute, timezone=self.config.zone),
            id=JOB_ID,
            name="daily post",
            replace_existing=True,
            coalesce=True,
            max_instances=1,
            # a late trigger (a busy loop, a suspended laptop) still posts within the window
            misfire_grace_time=int(self.config.catch_up.total_seconds()) or 1,
        )

    async def _job(self, day: dt.date | None = None) -> Outcome | None:
        """What the scheduler runs: :meth:`_triggered`, ending quietly (None) when the shutdown
        cuts it short (:meth:`shutting_down`, :meth:`stop`). APScheduler logs anything a job
        raises, a cancellation too, as an error with its traceback: every shutdown during a
        scheduled post printed one."""
        try:
            return await self._triggered(day)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            what = "the daily post" if day is None else f"the look for the issue of {day}"
            log.info("%s was stopped by the shutdown; the next start catches up", what)
            return None

    async def _triggered(self, day: dt.date | None = None) -> Outcome:
        """What the scheduler runs: :meth:`run_due`, tracked so :meth:`stop` can end it."""
        task = asyncio.current_task()
        assert task is not None
        self._running.add(task)
        try:
            return await self.run_due(day)
        finally:
            self._running.discard(task)

    def shutting_down(self) -> None:
        """Shutdown has begun: a trigger cut short from now on ends quietly, whether
        :meth:`stop` cancels it or the shutdown cancels the delivery it runs (after the
        deliveries' grace period), which it does first. :meth:`stop` ends this state."""
        self._stopping = True

    async def stop(self) -> None:
        """Cancel triggers still running (on shutdown, once deliveries had their grace period)
        and wait for them to unwind, so none outlives the ledger."""
        tasks = list(self._running)
        self.shutting_down()
        try:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._stopping = False

    def _later(self, when: dt.datetime, day: dt.date) -> None:
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            self._job,
            DateTrigger(run_date=when),
            args=[day],
            id=f"retry-{day.isoformat()}",
            name=f"look again for the issue of {day}",
            replace_existing=True,
            misfire_grace_time=int(self.config.retry_every.total_seconds()),
        )
