"""Posting a day: its issue to every target of the running platforms, concurrently, each
platform's delivery of a day one at a time, tracked so that shutdown waits for it.

What :class:`Posting` owns: which platforms a post goes to (not those still starting), the
groups of targets per format (channels, private subscribers in their own formats), the pins
after a post, corrections in place, and a delivery that raised: kept for ``status``, told to
the admins, and resumed after ledger trouble (:meth:`~digest_core.delivery.resuming.Resumer.
after_trouble`). And what the running bot asks of posting: the start-up catch-up, what the
:class:`~digest_core.delivery.resuming.Resumer` resumes (a day's window, its waiting rows), the
admins told when the ledger fails, answers again, or is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from digest_core.archive import Archive
from digest_core.archive.settling import wait_settled
from digest_core.clock import Clock
from digest_core.delivery import DeliveryEngine, DeliveryReport, Ledger, ProgressCallback
from digest_core.delivery.health import Trouble, is_transient, short_error
from digest_core.delivery.ledger.preferences import Format
from digest_core.delivery.resuming import Resumer
from digest_core.delivery.threads import thread_title
from digest_core.errors import DeliveryBusy, IssueNotFound, LedgerLost
from digest_core.metrics import MetricsSink
from digest_core.models import Issue
from digest_core.platform import Target, TargetKind
from digest_core.port import Adapter
from digest_core.publishing.approval import Publishing
from digest_core.publishing.corrections import CorrectionReport, correct
from digest_core.publishing.pins import Pins
from digest_core.publishing.schedule import SETTLE_MAX_FACTOR, DailyPoster, PostState
from digest_core.rendering import Message, Part, render
from digest_core.service.alerts import Alerts, ledger_health_text
from digest_core.service.platforms import Platforms
from digest_core.service.status import Interrupted, describe_report, describe_waits
from digest_core.subscriptions.delivery import FORMAT_OF_PART, PART_OF_FORMAT, Personal, Visibility

log = logging.getLogger(__name__)

#: the waiting rows of a day the Resumer reads at a time (newest first)
WAITING_ROWS = 500
#: who a resumed post is requested by (its audit record; a resume's waits are not alerted)
RESUME = "resume:"

#: a post's groups: the format each engine run records, its messages, its targets
Groups = list[tuple[Format, list[Message], list[Target]]]
_R = TypeVar("_R")


class UnderWay:
    """The deliveries under way in this process: one lock per (day, platform), so a
    ``/repost`` while the daily post runs waits for it, and the tasks shutdown waits for."""

    def __init__(self) -> None:
        self._locks: dict[tuple[dt.date, str], asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def lock(self, day: dt.date, platform: str) -> asyncio.Lock:
        return self._locks.setdefault((day, platform), asyncio.Lock())

    def busy(self, day: dt.date) -> bool:
        """A delivery of ``day`` runs in this process now."""
        return any(lock.locked() for (d, _), lock in self._locks.items() if d == day)

    @contextlib.asynccontextmanager
    async def tracked(self) -> AsyncIterator[None]:
        """The current task delivers until the block ends: :meth:`idle` waits for it."""
        task = asyncio.current_task()
        assert task is not None, "deliveries run in a task"
        self._tasks.add(task)
        self._idle.clear()
        try:
            yield
        finally:
            self._tasks.discard(task)
            if not self._tasks:
                self._idle.set()

    async def idle(self, within: float) -> bool:
        """Wait up to ``within`` seconds for deliveries under way; True when none is left."""
        try:
            await asyncio.wait_for(self._idle.wait(), within)
        except TimeoutError:
            return False
        return True

    def tasks(self) -> list[asyncio.Task[object]]:
        return list(self._tasks)


@dataclass
class Posting:
    """Posts and corrects days on the running platforms (see the module's docstring)."""

    archive: Archive
    ledger: Ledger
    engine: DeliveryEngine
    clock: Clock
    zone: dt.tzinfo
    platforms: Platforms
    metrics: MetricsSink
    publishing: Publishing
    #: readers' view of the embargo (subscribers' own deliveries read through it)
    visibility: Visibility
    pins: Pins
    alerts: Alerts
    under_way: UnderWay
    resumer: Resumer
    #: when days are due (the settle time of a file still being saved, the catch-up window)
    poster: DailyPoster
    #: the running bot (``run`` sets it): a delivery that raised is told to the admins, and
    #: one that ledger trouble interrupted resumes once the ledger answers
    resume_after_trouble: bool = False

    def __post_init__(self) -> None:
        #: subscribers' own times and formats, and follows (the minute job: deliver_personal)
        self.personal = Personal(
            archive=self.archive,
            ledger=self.ledger,
            engine=self.engine,
            platforms=self.platforms.subscribed(),
            clock=self.clock,
            zone=self.zone,
            visibility=self.visibility,
            lock=self.under_way.lock,
            catch_up=self.poster.config.catch_up,
        )
        #: a delivery that raised, by (day, platform), until one of that day and platform
        #: completes: shown by ``status``
        self.interrupted: dict[tuple[dt.date, str], Interrupted] = {}
        #: platforms that could not start yet -> why (the runtime's live view); posts leave
        #: them out meanwhile
        self.unavailable: dict[str, str] = {}

    def has_issue(self, day: dt.date) -> bool:
        try:
            self.archive.on(day)
        except IssueNotFound:
            return False
        return True

    async def targets(self, platform: Adapter) -> list[Target]:
        """The configured channels plus the active private subscribers of ``platform`` who
        take the issue at the digest's time (the others get it at theirs: :attr:`personal`)."""
        subscribers = await self.ledger.subscribers(platform.name)
        timed = {p.chat_id for p in await self.ledger.timed_subscribers(platform.name)}
        return [*platform.channel_targets(), *(t for t in subscribers if t.id not in timed)]

    async def post(
        self,
        day: dt.date,
        *,
        platforms: Sequence[str] | None = None,
        only_target: str | None = None,
        force: bool = False,
        progress: ProgressCallback | None = None,
        requested_by: str = "cli:",
    ) -> list[DeliveryReport]:
        """Deliver the issue of ``day`` to every target of the chosen platforms (default all).

        Only what the ledger lacks is sent unless ``force``. Platforms deliver concurrently; a
        platform or target failing never stops the others. Posting a day before its publish
        time publishes it early (``requested_by``, ``platform:user``, is audited).

        Raises:
            IssueNotFound: there is no issue for ``day``.
            ValueError: an unknown platform name.
        """
        issue = self.archive.on(day)
        await self.publishing.published(day, by=requested_by)
        chosen = [p for p in self._chosen(platforms) if self._started(p, day)]
        async with self.under_way.tracked():
            reports = await _every(
                chosen,
                functools.partial(self._deliver, issue, only_target, force, progress),
                "delivery",
            )
        if any(r.waiting for r in reports) or (platforms is None and only_target is None):
            self.resumer.note(day, reports)
        waits = [r for r in reports if r.waiting]
        if waits and requested_by != RESUME:  # (a resume's waits are in `status`)
            await self.alerts.alert(describe_waits(day, waits, self.zone))
        return reports

    def _chosen(self, platforms: Sequence[str] | None) -> list[Adapter]:
        if not platforms:
            return list(self.platforms.values())
        unknown = [n for n in platforms if n not in self.platforms]
        if unknown:
            known = ", ".join(self.platforms) or "none"
            raise ValueError(f"platform {unknown[0]!r} is not running (running: {known})")
        return [self.platforms[n] for n in platforms]

    def _started(self, platform: Adapter, day: dt.date) -> bool:
        if platform.name not in self.unavailable:
            return True
        log.warning(
            "not posting %s on %s yet: it is not started (%s); it is posted once it is",
            day,
            platform.name,
            self.unavailable[platform.name],
        )
        return False

    async def _deliver(
        self,
        issue: Issue,
        only_target: str | None,
        force: bool,
        progress: ProgressCallback | None,
        platform: Adapter,
    ) -> DeliveryReport | None:
        started = self.clock.monotonic()
        try:
            report = await self._deliver_on(issue, platform, only_target, force, progress)
        except (asyncio.CancelledError, DeliveryBusy):
            raise  # (another process delivers: not a failure)
        except Exception as exc:
            self._interrupted(issue.date, platform.name, exc, started)
            raise
        self._completed(issue.date, platform.name, report)
        return report

    async def _deliver_on(
        self,
        issue: Issue,
        platform: Adapter,
        only_target: str | None,
        force: bool,
        progress: ProgressCallback | None,
    ) -> DeliveryReport | None:
        targets = await self.targets(platform)
        if only_target is not None:
            targets = [t for t in targets if t.id == only_target] or [
                Target(platform.name, only_target, TargetKind.CHANNEL)
            ]
        if not targets:
            log.info("%s has no targets configured; nothing to post", platform.name)
            return None
        groups = await self._groups(issue, platform, targets, force)
        report: DeliveryReport | None = None
        deliver = functools.partial(
            self.engine.deliver,
            force=force,
            progress=progress,
            # the post's thread, where a target gets one (a forum post): date and headline
            title=thread_title(issue.date, issue.headline.title),
        )
        async with self.under_way.lock(issue.date, platform.name):
            for fmt, parts, group in groups:
                if group:
                    done = await deliver(issue.ref, platform, parts, group, variant=fmt.value)
                    report = done if report is None else report.merged(done)
            await self.pins.after_post(issue.date, platform, platform.channel_targets())
        return report

    async def _groups(
        self, issue: Issue, platform: Adapter, targets: list[Target], force: bool
    ) -> Groups:
        """The engine runs of one platform's post: private subscribers may get another part
        (the platform's subscriber format, or the one a reader chose), each another run of
        the same ledger delivery (rows are per target; a correction edits each message in
        the format its run recorded)."""
        messages = render(issue, platform.flavor, Part.ALL, options=platform.post_options)
        default = Part(getattr(platform, "subscriber_part", Part.ALL))
        if platform.name in self.personal.platforms:
            return await self.personal.groups(
                issue, platform, targets, messages, default=default, force=force
            )
        if default is Part.ALL:
            return [(Format.FULL, messages, targets)]
        compact = render(issue, platform.flavor, default, options=platform.post_options)
        private = [t for t in targets if t.kind is TargetKind.PRIVATE]
        return [
            (Format.FULL, messages, [t for t in targets if t.kind is not TargetKind.PRIVATE]),
            (FORMAT_OF_PART.get(default, Format.FULL), compact, private),
        ]

    def _interrupted(self, day: dt.date, name: str, exc: Exception, started: float) -> None:
        """A delivery raised: shown in ``status`` and counted as incomplete (the engine
        counts only those that return). With :attr:`resume_after_trouble` the admins are
        told, and one interrupted by ledger trouble resumes by itself once the ledger answers."""
        resumes = (
            self.resume_after_trouble and is_transient(exc) and not self.ledger.retries_stopped
        )
        now = self.clock.now()
        error = short_error(exc)
        self.interrupted[(day, name)] = Interrupted(day, name, now, error, resumes)
        self.metrics.delivery(name, self.clock.monotonic() - started, ok=False, at=now)
        if not self.resume_after_trouble:
            return
        if resumes:
            self.resumer.after_trouble(day, name)
        then = (
            "it resumes by itself once the ledger answers"
            if resumes
            else "what it had not sent is left in the ledger: `digest-bot post` sends it"
        )
        self.alerts.soon(f"{day} 的推送中断 / the post of {day} on {name} failed ({error}); {then}")

    def _completed(self, day: dt.date, name: str, report: DeliveryReport | None) -> None:
        was = self.interrupted.pop((day, name), None)
        if was is not None and report is not None:
            log.warning("the interrupted post of %s on %s went on: %s", day, name, report.sent)
            self.alerts.soon(
                f"{day} 的推送已恢复 / the interrupted post of {day} on {name} went on:\n"
                + describe_report(report)
            )

    async def correct(
        self,
        day: dt.date,
        platforms: Sequence[str] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> list[CorrectionReport]:
        """Edit the messages already posted for ``day`` to show its current revision, on the
        chosen platforms (default all): see :func:`digest_core.publishing.corrections.correct`.
        Platforms correct concurrently; one failing never stops the others.

        Raises:
            IssueNotFound: there is no issue for ``day``.
            ValueError: an unknown platform name.
        """
        issue = self.archive.on(day)

        async def run(platform: Adapter) -> CorrectionReport:
            # each format the day's messages may be in, rendered as the post renders it
            messages = {
                fmt.value: render(issue, platform.flavor, part, options=platform.post_options)
                for fmt, part in PART_OF_FORMAT.items()
            }
            async with self.under_way.lock(issue.date, platform.name):
                return await correct(
                    self.engine, issue.ref, platform, messages, zone=self.zone, progress=progress
                )

        async with self.under_way.tracked():
            return await _every(self._chosen(platforms), run, "correction")

    async def deliver_personal(self) -> list[DeliveryReport]:
        """What is due to readers on their own terms now (the minute job): the issue at each
        subscriber's time, follow messages. Shutdown waits for it like for a post."""
        async with self.under_way.tracked():
            return await self.personal.run_due()

    async def settled(self, day: dt.date) -> float:
        """Wait while the file of ``day`` is still being saved (the scheduled post's settle)."""
        settle = self.poster.config.settle.total_seconds()
        return await wait_settled(
            functools.partial(asyncio.to_thread, self.archive.file_of, day),
            clock=self.clock,
            settle=settle,
            max_wait=settle * SETTLE_MAX_FACTOR,
        )

    async def scheduled(self, day: dt.date) -> None:
        """The daily post of ``day`` (the schedule's job): held unless approved; failures
        told to the admins (waits are told by :meth:`post`)."""
        if not await self.publishing.gate(day):
            log.warning("the post of %s is held: not approved", day)
            return
        reports = await self.post(day, requested_by="scheduler:")
        failed = [r for r in reports if not r.ok and not r.waiting]
        if failed:
            lines = [describe_report(r, zone=self.zone) for r in failed]
            await self.alerts.alert(
                f"{day} 的推送有失败 / the post of {day} had failures:\n" + "\n".join(lines)
            )

    async def state(self, day: dt.date) -> PostState:
        """How far the post of ``day`` got on every running platform (any revision)."""
        states: list[PostState] = []
        for name, platform in self.platforms.items():
            if not await self.targets(platform):
                continue  # nothing to post there: it cannot hold the day back
            states.append(PostState((await self.ledger.day_state(day, platform=name)).value))
        if not states or all(s is PostState.NONE for s in states):
            return PostState.NONE
        if all(s is PostState.DONE for s in states):
            return PostState.DONE
        return PostState.PARTIAL

    async def cancel(self) -> int:
        """Cancel the deliveries under way (on shutdown, after the grace period) and wait for
        them to unwind: a part being sent stays in flight in the ledger and the next start
        resends it; parts not started stay pending. Resumes waiting for the ledger end too.
        Returns how many deliveries were cancelled. The run ends after this (a shutdown, a
        lost ledger or leadership): a scheduled post cut short here ends quietly, not as an
        error of its job."""
        self.poster.shutting_down()
        tasks = self.under_way.tasks()
        waiting = [t for t in self.resumer.waiters() if t not in tasks]
        for task in [*tasks, *waiting]:
            task.cancel()
        await asyncio.gather(*tasks, *waiting, return_exceptions=True)
        return len(tasks)

    # ------------------------------------------------------------ the running bot

    async def catch_up(self) -> None:
        """The start-up catch-up; missed posts are reported unless the ledger is brand new."""
        first_start = not await self.ledger.records(limit=1)
        await self.poster.catch_up(report_missed=not first_start)

    async def resume(self, day: dt.date) -> list[DeliveryReport]:
        """The Resumer's post of ``day`` (what the ledger lacks)."""
        return await self.post(day, requested_by=RESUME)

    async def resume_on(self, day: dt.date, platform: str) -> list[DeliveryReport]:
        """The Resumer's post of ``day`` on ``platform`` alone (after ledger trouble)."""
        return await self.post(day, platforms=[platform], requested_by=RESUME)

    def window(self, day: dt.date) -> tuple[dt.datetime, dt.datetime]:
        """The post time of ``day`` and the end of its catch-up window: the Resumer resumes a
        post only inside it."""
        at = self.poster.post_at(day)
        return at, at + self.poster.config.catch_up

    async def waiting(self, day: dt.date) -> list[tuple[str | None, str]]:
        """(error, target) of the day's rows a delivery left waiting, newest first."""
        rows = await self.ledger.waiting(day, limit=WAITING_ROWS)
        return [(r.last_error, r.target) for r in rows]

    def ledger_health_changed(self, trouble: Trouble, cleared_at: dt.datetime | None) -> None:
        """The ledger's database failed (``cleared_at`` None) or answers again: the admins
        told, with the deliveries it interrupted (a listener of the ledger's health)."""
        stopped = sorted(self.interrupted.values(), key=lambda i: (i.day, i.platform))
        which = [(i.platform, i.day, i.resumes) for i in stopped]
        self.alerts.soon(ledger_health_text(trouble, cleared_at, self.zone, which))

    async def ledger_lost(self, error: LedgerLost) -> None:
        """The ledger's database was deleted or replaced (the watchdog saw it): cancel the
        deliveries under way (the ledger already refuses their claims) and alert the admins.
        The runtime then stops the bot."""
        cancelled = await self.cancel()
        if cancelled:
            log.error("stopped %d delivery(ies): the ledger is lost", cancelled)
        await self.alerts.alert(f"账本数据库丢失，机器人停止 / {error}")


async def _every(
    chosen: Sequence[Adapter], run: Callable[[Adapter], Awaitable[_R | None]], what: str
) -> list[_R]:
    """``run`` on every platform concurrently; one failing never stops the others, and the
    first error is raised once all have finished."""
    results = await asyncio.gather(*(run(p) for p in chosen), return_exceptions=True)
    errors = [(p, r) for p, r in zip(chosen, results, strict=True) if isinstance(r, BaseException)]
    for platform, error in errors:
        log.error("%s on %s failed: %s", what, platform.name, error)
    if errors:
        raise errors[0][1]
    return [r for r in results if r is not None and not isinstance(r, BaseException)]
