"""The editor's side of the daily post: early publishes, previews to admins, approval, readiness.

- **Early publish**: an admin posting a day before its publish time makes it public at once;
  the fact is audited (:data:`~digest_core.publishing.embargo.EARLY_ACTION`) and reloaded on start.
- **Preview**: the exact messages readers will get (the channel post, buttons included), sent
  privately to admins (:class:`AdminInbox`), recorded nowhere as a delivery.
- **Approval** (``[schedule] require_approval``): at ``review_time`` admins get the preview with
  Approve / Hold buttons; the scheduled post waits for an approval of the day's *current*
  revision (a file changed after approval voids it); unapproved at post time, admins are
  alerted every :data:`ALERT_EVERY`, and an approval given late posts at once. Every decision
  is audited (actions ``approve`` / ``hold``, args ``date`` and ``revision``).
- **Held back**: with ``require_approval``, a day not approved (its current revision) and not
  posted is kept from readers past its post time (:meth:`Embargo.hold`); the post a late
  approval or an admin makes is its publish time (:meth:`Embargo.release`), so what readers
  see and what is new to them (follows, timed subscribers, inline mode) start then.
- **Readiness**: missing / invalid (first error) / ready / approved, for ``status``; at
  ``missing_alert`` admins hear of a missing or invalid next issue.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from digest_core.archive import Archive
from digest_core.clock import Clock, zoned_text
from digest_core.commands import editor
from digest_core.commands.buttons import CommandButton
from digest_core.commands.declaration import spec_of
from digest_core.errors import IssueNotFound
from digest_core.publishing.embargo import EARLY_ACTION, Embargo
from digest_core.publishing.schedule import PostState
from digest_core.rendering import Message, Part, notice, render

if TYPE_CHECKING:
    from digest_core.delivery import Ledger
    from digest_core.port import Adapter

log = logging.getLogger(__name__)

#: how often admins are reminded of a post held for want of approval
ALERT_EVERY = dt.timedelta(minutes=30)
#: the commands of a review's buttons; their names are the audit log's actions of decisions
APPROVE, HOLD = spec_of(editor.approve), spec_of(editor.hold)
#: how far back the audit log is read for decisions and early publishes
_AUDIT_WINDOW = 2000


@runtime_checkable
class AdminInbox(Protocol):
    """A platform that can write to its configured admins privately (optional for adapters)."""

    async def message_admins(
        self, messages: Sequence[Message], *, actions: Sequence[CommandButton] = ()
    ) -> int:
        """Send ``messages`` in order to every configured admin privately, ``actions`` as
        buttons under a last message of their own; returns how many admins got them. Best
        effort: MUST NOT raise; nothing is recorded as a delivery."""
        ...


class Readiness(StrEnum):
    """Whether the issue of a day can go out."""

    MISSING = "missing"
    INVALID = "invalid"
    READY = "ready"
    APPROVED = "approved"


@dataclass(frozen=True)
class ApprovalDecision:
    """An admin's approve or hold of one revision of a day (from the audit log)."""

    action: str
    date: dt.date
    revision: str
    by: str
    at: dt.datetime


@dataclass(frozen=True)
class PublishingConfig:
    require_approval: bool = False
    #: review_time is this long before post time
    review_before: dt.timedelta = dt.timedelta(hours=2)
    #: missing_alert is this long before post time
    missing_before: dt.timedelta = dt.timedelta(hours=3)


class Publishing:
    """See the module docstring. ``post`` runs the day's post (the service's scheduled post,
    without the gate); ``state`` says how far a day's post got; ``alert`` tells every admin."""

    def __init__(
        self,
        config: PublishingConfig,
        *,
        embargo: Embargo,
        archive: Archive,
        ledger: Ledger,
        clock: Clock,
        platforms: Callable[[], Sequence[Adapter]],
        post: Callable[[dt.date], Awaitable[object]],
        state: Callable[[dt.date], Awaitable[PostState]],
        alert: Callable[[str], Awaitable[None]],
    ) -> None:
        self.config = config
        self.embargo = embargo
        self.archive = archive
        self.ledger = ledger
        self.clock = clock
        self._platforms = platforms
        self._post = post
        self._state = state
        self._alert = alert
        self._scheduler: AsyncIOScheduler | None = None
        #: days whose post is held for want of approval (reminders run)
        self.held: set[dt.date] = set()

    @property
    def zone(self) -> dt.tzinfo:
        return self.embargo.zone

    # ------------------------------------------------------------ early publish

    async def load(self) -> None:
        """Read the early publishes recorded in the audit log into the embargo, and (with
        ``require_approval``) which days around today are held back."""
        for day, at in (await early_publishes(self.ledger)).items():
            self.embargo.published_early(day, at)
        await self.refresh_holds()

    async def refresh_holds(self) -> None:
        """With ``require_approval``: hold back today's and tomorrow's issue while its
        current revision is not approved and it is not posted (so no reader surface shows it
        at its post time); an approval before the post time lifts the hold. A held day is
        released by its post (:meth:`published`), the one after a late approval. Earlier days
        are left as they are: what was public stays so."""
        if not self.config.require_approval:
            return
        now = self.clock.now()
        today = now.astimezone(self.zone).date()
        for day in (today, today + dt.timedelta(days=1)):
            try:
                issue = await asyncio.to_thread(self.archive.on, day)
            except IssueNotFound:
                continue
            if await self.approved(day, issue.revision):
                if self.embargo.scheduled(day) > now:
                    self.embargo.unhold(day)  # public at its post time
                continue  # late: its post releases it
            if await self._state(day) is PostState.NONE:
                self.embargo.hold(day)

    async def published(self, day: dt.date, *, by: str) -> None:
        """``day`` is being posted by an admin's action (``by``: ``platform:user``): before
        its publish time, that publishes it early (audited); a day held back (a late
        approval's post) is public from now."""
        now = self.clock.now()
        if self.embargo.held(day) and self.embargo.scheduled(day) > now:
            self.embargo.unhold(day)  # posted before its time: an early publish, as any
        elif self.embargo.release(day, now):
            return
        if not self.embargo.published_early(day, now):
            return
        platform, _, user = by.rpartition(":")
        await self.ledger.record_audit(
            platform=platform or "cli",
            user_id=user,
            action=EARLY_ACTION,
            args={"date": day.isoformat()},
            allowed=True,
            outcome=f"published before its time ({self.embargo.scheduled(day):%Y-%m-%d %H:%M})",
        )

    # ------------------------------------------------------------ preview

    def preview_of(self, day: dt.date, platform: Adapter) -> list[Message]:
        """Exactly the messages ``platform``'s channels get for ``day`` (the ``IssueNotFound``
        of the archive otherwise). Blocking file I/O: call from a worker thread."""
        issue = self.archive.on(day)
        return render(issue, platform.flavor, Part.ALL, options=platform.post_options)

    async def preview_to_admins(
        self, day: dt.date, *, note: str = "", actions: Sequence[CommandButton] = ()
    ) -> dict[str, int]:
        """Send every platform's admins the preview of ``day`` (after ``note``, if any); how
        many admins got it per platform that can write to admins. Nothing is a delivery.

        Raises:
            IssueNotFound: no issue for ``day``.
        """
        head = note or (
            f"预览 / preview: {day} 的日报，读者将看到以下内容 / what readers will get:"
        )
        sent: dict[str, int] = {}
        for platform in self._platforms():
            if not isinstance(platform, AdminInbox):
                continue
            messages = await asyncio.to_thread(self.preview_of, day, platform)
            tail = notice(
                self._review_text(day) if actions else "— 预览结束 / end of preview —",
                platform.flavor,
            )
            sent[platform.name] = await platform.message_admins(
                [*notice(head, platform.flavor), *messages, *tail], actions=actions
            )
        return sent

    def _review_text(self, day: dt.date) -> str:
        at = self.embargo.scheduled(day).astimezone(self.zone)
        return (
            f"批准后将于 {at:%m-%d %H:%M} 推送；暂缓则不推送。/ Approve to post it at "
            f"{zoned_text(at)}; Hold keeps it back. (/approve {day}, /hold {day})"
        )

    # ------------------------------------------------------------ approval

    async def decision(self, day: dt.date) -> ApprovalDecision | None:
        """The latest approve or hold of ``day`` (any revision)."""
        entries = await self.ledger.audit_log(
            actions=[APPROVE.name, HOLD.name], mentions=day.isoformat(), limit=_AUDIT_WINDOW
        )
        for entry in entries:
            if not entry.allowed or entry.args.get("date") != day.isoformat():
                continue
            return ApprovalDecision(
                entry.action,
                day,
                str(entry.args.get("revision", "")),
                f"{entry.platform}:{entry.user_id}",
                entry.at,
            )
        return None

    async def approved(self, day: dt.date, revision: str) -> bool:
        """True when the latest decision on ``day`` approves ``revision``."""
        return _approves(await self.decision(day), revision)

    async def gate(self, day: dt.date) -> bool:
        """May the scheduled post of ``day`` go out now? Without ``require_approval``,
        always; otherwise only with an approval of the current revision. Held: admins are
        alerted now and every :data:`ALERT_EVERY` until approved or posted."""
        if not self.config.require_approval:
            return True
        issue = await asyncio.to_thread(self.archive.on, day)
        decision = await self.decision(day)
        if _approves(decision, issue.revision):
            self.held.discard(day)
            return True
        if await self._state(day) is PostState.NONE:
            self.embargo.hold(day)  # before the alert: readers must not see it meanwhile
        await self._alert(self._held_text(day, issue.revision, decision))
        self.held.add(day)
        self._remind_later(day)
        return False

    def _held_text(self, day: dt.date, revision: str, decision: ApprovalDecision | None) -> str:
        if decision is None:
            why = "还没有人批准 / nobody approved it"
        elif decision.action == HOLD.name:
            why = f"{decision.by} 暂缓了它 / {decision.by} put it on hold"
        else:
            why = (
                f"批准后文件改了（批准的是 {decision.revision}，现在是 {revision}），批准作废 / "
                f"the file changed after approval ({decision.revision} → {revision}): "
                "the approval is void"
            )
        return (
            f"⏸ {day} 的日报未推送，等待批准：{why}。\n"
            f"The post of {day} is held: {why}. /preview {day} to read it, "
            f"/approve {day} posts it at once."
        )

    async def remind(self, day: dt.date) -> bool:
        """A reminder of a held post (run every :data:`ALERT_EVERY`); False once the day was
        posted or approved (no more reminders)."""
        if day not in self.held or await self._state(day) is PostState.DONE:
            self.held.discard(day)
            return False
        try:
            issue = await asyncio.to_thread(self.archive.on, day)
        except IssueNotFound as exc:
            await self._alert(f"⏸ {day}: {exc}")
            self._remind_later(day)
            return True
        decision = await self.decision(day)
        if _approves(decision, issue.revision):
            self.held.discard(day)
            return False
        await self._alert(self._held_text(day, issue.revision, decision))
        self._remind_later(day)
        return True

    def _remind_later(self, day: dt.date) -> None:
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            self.remind,
            DateTrigger(run_date=self.clock.now() + ALERT_EVERY),
            args=[day],
            id=f"held-{day.isoformat()}",
            name=f"remind the admins of the held post of {day}",
            replace_existing=True,
            misfire_grace_time=int(ALERT_EVERY.total_seconds()),
        )

    async def decide(self, day: dt.date, *, approve: bool, revision: str | None, by: str) -> str:
        """Record an admin's approve or hold of ``day`` (audited); an approval of a revision
        that is no longer current is refused. An approval after the post time of a day not
        yet posted posts it at once. Returns the reply text.

        Raises:
            IssueNotFound: no issue for ``day``.
        """
        issue = await asyncio.to_thread(self.archive.on, day)
        platform, _, user = by.rpartition(":")
        action = (APPROVE if approve else HOLD).name
        current = issue.revision
        if revision is not None and revision != current:
            await self.ledger.record_audit(
                platform=platform, user_id=user, action=action,
                args={"date": day.isoformat(), "revision": revision}, allowed=False,
                outcome=f"stale: the file is now revision {current}",
            )  # fmt: skip
            return (
                f"{day} 的文件已经改过（预览的是 {revision}，现在是 {current}），请看新的预览。\n"
                f"The file of {day} changed since that preview ({revision} → {current}); "
                f"/preview {day} shows the current one, /approve {day} approves it."
            )
        due = self.embargo.scheduled(day)
        late = approve and self.clock.now() >= due
        posted = late and await self._state(day) is PostState.DONE
        outcome = f"{action} revision {current}"
        if late and not posted:
            outcome += "; late: posted at once"
        await self.ledger.record_audit(
            platform=platform, user_id=user, action=action,
            args={"date": day.isoformat(), "revision": current}, allowed=True, outcome=outcome,
        )  # fmt: skip
        log.info("%s of %s (revision %s) by %s", action, day, current, by)
        if not approve:
            if self.config.require_approval and await self._state(day) is PostState.NONE:
                self.embargo.hold(day)
            return (
                f"已暂缓 {day}（{current}）：到点不会推送，/approve {day} 可放行。\n"
                f"{day} is on hold (revision {current}): it will not be posted until approved."
            )
        self.held.discard(day)
        if not late:
            self.embargo.unhold(day)  # public at its post time
        if late and not posted:
            result = await self._post(day)
            summary = f"\n{result}" if isinstance(result, str) and result else ""
            return f"已批准并立即推送 {day}。/ Approved; {day} posted at once.{summary}"
        if posted:
            return f"已批准 {day}（已推送过）。/ Approved; {day} was posted already."
        at = due.astimezone(self.zone)
        return (
            f"已批准 {day}（{current}），将于 {at:%m-%d %H:%M} 推送。\n"
            f"Approved revision {current} of {day}; it goes out at {zoned_text(at)}."
        )

    async def review(self, day: dt.date) -> dict[str, int]:
        """Send admins the preview of ``day`` with Approve / Hold buttons (at review_time);
        a missing issue is an alert instead."""
        try:
            issue = await asyncio.to_thread(self.archive.on, day)
        except IssueNotFound:
            await self._alert(self._missing_text(day, None))
            return {}
        args = (day.isoformat(), issue.revision)
        actions = (APPROVE.button(*args), HOLD.button(*args))
        note = (
            f"待批准 / to approve: {day} 的日报（{issue.revision}），读者将看到以下内容 / "
            "what readers will get:"
        )
        return await self.preview_to_admins(day, note=note, actions=actions)

    # ------------------------------------------------------------ readiness

    async def readiness(self, day: dt.date) -> tuple[Readiness, str]:
        """The readiness of ``day``'s issue and a line for ``status``."""
        entries = await asyncio.to_thread(self.archive.list)
        entry = next((e for e in entries if e.date == day and e.used_instead is None), None)
        if entry is None:
            return Readiness.MISSING, f"{day}: 缺失 / missing"
        if entry.problem is not None:
            return Readiness.INVALID, f"{day}: 无效 / invalid: {entry.problem}"
        assert entry.issue is not None
        revision = entry.issue.revision
        if self.config.require_approval:
            if await self.approved(day, revision):
                return Readiness.APPROVED, f"{day}: 已批准 / approved ({revision})"
            return Readiness.READY, f"{day}: 就绪，待批准 / ready, not approved ({revision})"
        return Readiness.READY, f"{day}: 就绪 / ready ({revision})"

    async def check_missing(self, day: dt.date) -> Readiness:
        """At ``missing_alert``: alert the admins if ``day``'s issue is missing or invalid."""
        state, line = await self.readiness(day)
        if state in (Readiness.MISSING, Readiness.INVALID):
            await self._alert(self._missing_text(day, line if state is Readiness.INVALID else None))
        return state

    def _missing_text(self, day: dt.date, invalid: str | None) -> str:
        at = self.embargo.scheduled(day).astimezone(self.zone)
        what = (
            f"文件无效 / the file is invalid: {invalid}"
            if invalid
            else ("文件还没有 / there is no file yet")
        )
        return (
            f"⚠ {day} 的日报（{at:%H:%M} 推送）：{what}\n"
            f"The issue of {day} (due {zoned_text(at)}) is not ready."
        )

    def next_day(self) -> dt.date:
        """The day of the next post (today before its post time, else tomorrow)."""
        now = self.clock.now()
        today = now.astimezone(self.zone).date()
        return today if self.embargo.scheduled(today) > now else today + dt.timedelta(days=1)

    # ------------------------------------------------------------ schedule

    def install(self, scheduler: AsyncIOScheduler) -> None:
        """Add the daily review (with ``require_approval``) and missing-issue jobs."""
        self._scheduler = scheduler
        post = dt.datetime.combine(dt.date(2000, 1, 3), self.embargo.post_time)
        jobs: list[tuple[str, dt.timedelta, Callable[[], Awaitable[object]]]] = [
            ("missing-alert", self.config.missing_before, self._missing_job),
        ]
        if self.config.require_approval:
            jobs.append(("review", self.config.review_before, self._review_job))
        # early publishes another process recorded (`digest-bot post` of a future day)
        scheduler.add_job(
            self.load,
            IntervalTrigger(minutes=1),
            id="embargo-refresh",
            replace_existing=True,
            coalesce=True,
            max_instances=1,
        )
        for job_id, before, job in jobs:
            at = (post - before).time()
            if scheduler.get_job(job_id) is not None:
                scheduler.remove_job(job_id)
            scheduler.add_job(
                job,
                CronTrigger(hour=at.hour, minute=at.minute, timezone=self.zone),
                id=job_id,
                replace_existing=True,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=600,
            )

    async def _missing_job(self) -> None:
        await self.check_missing(self.next_day())

    async def _review_job(self) -> None:
        await self.review(self.next_day())


def _approves(decision: ApprovalDecision | None, revision: str) -> bool:
    """True when ``decision`` is an approval of ``revision``."""
    if decision is None:
        return False
    return decision.action == APPROVE.name and decision.revision == revision


async def early_publishes(ledger: Ledger) -> dict[dt.date, dt.datetime]:
    """The days an admin published before their time, and when (the first time), as the audit
    log records them (:data:`~digest_core.publishing.embargo.EARLY_ACTION`)."""
    found: dict[dt.date, dt.datetime] = {}
    for entry in await ledger.audit_log(actions=[EARLY_ACTION], limit=_AUDIT_WINDOW):
        try:
            day = dt.date.fromisoformat(str(entry.args.get("date")))
        except ValueError:
            continue
        if day not in found or entry.at < found[day]:
            found[day] = entry.at
    return found
