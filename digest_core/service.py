"""DigestService: the running bot's core — archive, ledger, delivery, schedule and commands.

Adapters (:class:`~digest_core.port.Adapter`) are Platforms that also receive commands; the
service posts through them and answers their commands through the narrow
:class:`~digest_core.port.Port`, so every platform behaves the same.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from digest_core.archive import Archive
from digest_core.clock import Clock, zoned_text
from digest_core.commands import Commands, Request
from digest_core.confirmation import Confirmations
from digest_core.delivery import (
    DayState,
    DeliveryEngine,
    DeliveryReport,
    Ledger,
    PartState,
    ProgressCallback,
)
from digest_core.delivery.corrector import CorrectionReport, correct
from digest_core.delivery.health import Trouble, is_transient, read_trouble, short_error
from digest_core.delivery.ledger.readers import Format
from digest_core.delivery.reports import due_of
from digest_core.embargo import Embargo
from digest_core.errors import DeliveryBusy, IssueNotFound, LedgerLost, TransientError
from digest_core.metrics import NULL_METRICS, MetricsSink
from digest_core.models import Issue
from digest_core.personal import FORMAT_OF_PART, PART_OF_FORMAT, Personal, Visibility
from digest_core.pinning import Pins
from digest_core.platform import Editor, Target, TargetKind
from digest_core.port import Adapter, ServicePort, Tallied
from digest_core.publishing import Publishing, PublishingConfig
from digest_core.readers import ReaderCommands
from digest_core.rendering import Message, Part, render
from digest_core.resuming import Resumer
from digest_core.scheduling import SETTLE_MAX_FACTOR, DailyPoster, PostState, ScheduleConfig
from digest_core.settling import wait_settled
from digest_core.signup import AddressSignup, SignupCommands

log = logging.getLogger(__name__)

#: waiting posts and queued alerts are tried again at least this often (so a post resumes
#: within this long of an outage's end, plus what the try under way still waits)
RESUME_CAP_SECONDS = 15.0


class DigestService(ServicePort):
    """Ties the archive, the ledger and the platforms together; implements AdminBackend and
    the adapters' :class:`~digest_core.port.Port`."""

    def __init__(
        self,
        *,
        archive: Archive,
        ledger: Ledger,
        engine: DeliveryEngine,
        clock: Clock,
        zone: dt.tzinfo,
        schedule: ScheduleConfig,
        platforms: Sequence[Adapter],
        metrics: MetricsSink = NULL_METRICS,
        publishing: PublishingConfig | None = None,
    ):
        """``publishing``: approval and alert times (default: no approval needed); call
        :meth:`load` before serving so early publishes recorded earlier count."""
        self.archive = archive
        self.ledger = ledger
        self.engine = engine
        self.clock = clock
        self.zone = zone
        self.platforms = {p.name: p for p in platforms}
        self.metrics = metrics
        #: a delivery that raised, by (day, platform), until one of that day and platform
        #: completes: shown by :meth:`status`
        self.interrupted: dict[tuple[dt.date, str], Interrupted] = {}
        #: the running bot (``run`` sets it): a delivery that raised is told to the admins,
        #: and one that ledger trouble interrupted resumes once the ledger answers (a
        #: one-shot ``post`` reports the error itself and exits)
        self.resume_after_trouble = False
        self._resuming: dict[tuple[dt.date, str], asyncio.Task[None]] = {}
        self._locks: dict[tuple[dt.date, str], asyncio.Lock] = {}
        #: the tasks running post(): what shutdown waits for, then cancels
        self._posting: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        #: alerts under way (about the ledger's health: they never touch the ledger)
        self._alerts: set[asyncio.Task[None]] = set()
        ledger.health.subscribe(self._ledger_health_changed)
        #: the one rule of what readers may see (every reader surface reads through it)
        self.embargo = Embargo(zone=schedule.zone, post_time=schedule.post_time, clock=clock)
        self.publishing = Publishing(
            publishing or PublishingConfig(),
            embargo=self.embargo,
            archive=archive,
            ledger=ledger,
            clock=clock,
            platforms=lambda: list(self.platforms.values()),
            post=lambda day: self.repost(day, force=False, requested_by="approval"),
            state=self.post_state,
            alert=self.alert,
        )
        self.commands = Commands(
            archive,
            clock,
            zone,
            backend=self,
            post_options={p.name: p.post_options for p in platforms},
            subscribable=frozenset(p.name for p in platforms if getattr(p, "subscriptions", False)),
            metrics=metrics,
            embargo=self.embargo,
        )
        self.confirmations = Confirmations(self.commands)
        self.pins = Pins(ledger, alert=self.alert)
        #: (day, revision) that ``auto_correct`` found served everywhere
        self._auto_checked: set[tuple[dt.date, str]] = set()
        #: (day, file revision, what each platform was sent) that ``check_posted_files`` told
        self._told_changed: set[tuple[dt.date, str, tuple[tuple[str, str], ...]]] = set()
        #: platforms that could not start yet -> why (the runtime's live view: it retries them
        #: and runs the catch-up once one starts); posts leave them out meanwhile
        self.unavailable: dict[str, str] = {}
        self.poster = DailyPoster(
            schedule,
            clock=clock,
            has_issue=self.has_issue,
            state=self.post_state,
            post=self._scheduled_post,
            alert=self.alert,
            settle=self._settled,
        )
        #: what deliveries left waiting, resumed while the bot runs (and alerts queued)
        self.resumer = Resumer(
            clock=clock,
            window=lambda day: (
                self.poster.post_at(day),
                self.poster.post_at(day) + schedule.catch_up,
            ),
            today=self.poster.today,
            state=self.post_state,
            post=lambda day: self.post(day, requested_by="resume:"),
            waiting=self._waiting_rows,
            busy=lambda day: any(lock.locked() for (d, _), lock in self._locks.items() if d == day),
            send_alert=lambda name, text: self.platforms[name].alert_admins(text),
            alert=self.alert,
            base=engine.backoff.base,
            cap=min(engine.backoff.cap, RESUME_CAP_SECONDS),
        )
        #: what readers may see (the embargo's one rule)
        self.visibility = Visibility(self.embargo)
        self._install_readers_commands(platforms, post_time=schedule.post_time)
        #: subscribers' own times and formats, and follows (the minute job: deliver_personal)
        self.personal = Personal(
            archive=archive,
            ledger=ledger,
            engine=engine,
            clock=clock,
            zone=zone,
            visibility=self.visibility,
            platforms={n: p for n, p in self.platforms.items() if n in self.commands.subscribable},
            lock=lambda day, name: self._locks.setdefault((day, name), asyncio.Lock()),
            catch_up=schedule.catch_up,
        )

    def _install_readers_commands(
        self, platforms: Sequence[Adapter], *, post_time: dt.time
    ) -> None:
        """Readers' own commands, and ``/email ADDRESS`` through the first platform that
        mails the digest (none: the command says it is not available)."""
        ReaderCommands(
            self.commands, self.ledger, zone_name=str(self.zone), post_time=post_time
        ).install()
        signups = [p for p in platforms if isinstance(p, AddressSignup)]
        SignupCommands(self.commands, signups[0] if signups else None).install()

    async def load(self) -> None:
        """Read what earlier runs recorded that the service needs (early publishes)."""
        await self.publishing.load()

    # ------------------------------------------------------------ posting

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

    async def deliver_personal(self) -> list[DeliveryReport]:
        """What is due to readers on their own terms now (the minute job): the issue at each
        subscriber's time, follow messages. Shutdown waits for it like for a post."""
        task = asyncio.current_task()
        assert task is not None, "deliver_personal() runs in a task"
        self._posting.add(task)
        self._idle.clear()
        try:
            return await self.personal.run_due()
        finally:
            self._posting.discard(task)
            if not self._posting:
                self._idle.set()

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
        task = asyncio.current_task()
        assert task is not None, "post() runs in a task"
        self._posting.add(task)
        self._idle.clear()
        try:
            reports = await self._post(issue, platforms, only_target, force, progress)
        finally:
            self._posting.discard(task)
            if not self._posting:
                self._idle.set()
        if any(r.waiting for r in reports) or (platforms is None and only_target is None):
            self.resumer.note(day, reports)
        waits = [r for r in reports if r.waiting]
        if waits and requested_by != "resume:":  # (a resume's waits are in `status`)
            await self.alert(describe_waits(day, waits, self.zone))
        return reports

    async def _waiting_rows(self, day: dt.date) -> list[tuple[str | None, str]]:
        """(error, target) of the day's rows a delivery left waiting, newest first."""
        return [(r.last_error, r.target) for r in await self.ledger.waiting(day, limit=500)]

    async def idle(self, within: float) -> bool:
        """Wait up to ``within`` seconds for deliveries under way; True when none is left."""
        try:
            await asyncio.wait_for(self._idle.wait(), within)
        except TimeoutError:
            return False
        return True

    async def cancel_deliveries(self) -> int:
        """Cancel the deliveries under way (on shutdown, after the grace period) and wait for
        them to unwind: a part being sent stays in flight in the ledger and the next start
        resends it; parts not started stay pending. Resumes waiting for the ledger end too.
        Returns how many deliveries were cancelled."""
        tasks = list(self._posting)
        waiting = [t for t in self._resuming.values() if t not in self._posting]
        for task in [*tasks, *waiting]:
            task.cancel()
        await asyncio.gather(*tasks, *waiting, return_exceptions=True)
        return len(tasks)

    async def _post(
        self,
        issue: Issue,
        platforms: Sequence[str] | None,
        only_target: str | None,
        force: bool,
        progress: ProgressCallback | None,
    ) -> list[DeliveryReport]:
        chosen = (
            [self._platform(n) for n in platforms] if platforms else list(self.platforms.values())
        )
        for waiting in [p for p in chosen if p.name in self.unavailable]:
            log.warning(
                "not posting %s on %s yet: it is not started (%s); it is posted once it is",
                issue.date,
                waiting.name,
                self.unavailable[waiting.name],
            )
            chosen.remove(waiting)

        async def deliver(platform: Adapter) -> DeliveryReport | None:
            started = self.clock.monotonic()
            try:
                report = await deliver_on(platform)
            except asyncio.CancelledError:
                raise
            except DeliveryBusy:
                raise  # another process delivers: not a failure
            except Exception as exc:
                self._interrupted(issue.date, platform.name, exc, started)
                raise
            self._completed(issue.date, platform.name, report)
            return report

        async def deliver_on(platform: Adapter) -> DeliveryReport | None:
            targets = await self.targets(platform)
            if only_target is not None:
                targets = [t for t in targets if t.id == only_target] or [
                    Target(platform.name, only_target, TargetKind.CHANNEL)
                ]
            if not targets:
                log.info("%s has no targets configured; nothing to post", platform.name)
                return None
            messages = render(issue, platform.flavor, Part.ALL, options=platform.post_options)
            # private subscribers may get another part (the platform's subscriber format, or
            # the one a reader chose): they are then another engine run of the same ledger
            # delivery (rows are per target)
            # (the format each run records: a correction edits each message in its own)
            default = Part(getattr(platform, "subscriber_part", Part.ALL))
            groups: list[tuple[Format, list[Message], list[Target]]] = [
                (Format.FULL, messages, targets)
            ]
            if platform.name in self.personal.platforms:
                groups = await self.personal.groups(
                    issue, platform, targets, messages, default=default, force=force
                )
            elif default is not Part.ALL:
                compact = render(issue, platform.flavor, default, options=platform.post_options)
                groups = [
                    (
                        Format.FULL,
                        messages,
                        [t for t in targets if t.kind is not TargetKind.PRIVATE],
                    ),
                    (
                        FORMAT_OF_PART.get(default, Format.FULL),
                        compact,
                        [t for t in targets if t.kind is TargetKind.PRIVATE],
                    ),
                ]
            # one delivery of a day per platform at a time: a /repost while the daily post
            # runs waits for it, then finds everything sent
            report: DeliveryReport | None = None
            async with self._locks.setdefault((issue.date, platform.name), asyncio.Lock()):
                for fmt, parts, group in groups:
                    if not group:
                        continue
                    done = await self.engine.deliver(
                        issue.ref,
                        platform,
                        parts,
                        group,
                        force=force,
                        progress=progress,
                        variant=fmt.value,
                    )
                    report = done if report is None else report.merged(done)
                await self.pins.after_post(issue.date, platform, platform.channel_targets())
            return report

        # platforms deliver concurrently; one failing never stops the others, and its error
        # is raised once all have finished
        results = await asyncio.gather(*(deliver(p) for p in chosen), return_exceptions=True)
        errors = [
            (p, r) for p, r in zip(chosen, results, strict=True) if isinstance(r, BaseException)
        ]
        for platform, error in errors:
            log.error("delivery on %s failed: %s", platform.name, error)
        if errors:
            raise errors[0][1]
        return [r for r in results if isinstance(r, DeliveryReport)]

    def _interrupted(self, day: dt.date, name: str, exc: Exception, started: float) -> None:
        """A delivery raised: shown in :meth:`status` and counted as incomplete (the engine
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
            self._resume(day, name)
        then = (
            "it resumes by itself once the ledger answers"
            if resumes
            else "what it had not sent is left in the ledger: `digest-bot post` sends it"
        )
        self._alert_soon(f"{day} 的推送中断 / the post of {day} on {name} failed ({error}); {then}")

    def _completed(self, day: dt.date, name: str, report: DeliveryReport | None) -> None:
        was = self.interrupted.pop((day, name), None)
        if was is not None and report is not None:
            log.warning("the interrupted post of %s on %s went on: %s", day, name, report.sent)
            self._alert_soon(
                f"{day} 的推送已恢复 / the interrupted post of {day} on {name} went on:\n"
                + describe_report(report)
            )

    def _resume(self, day: dt.date, name: str) -> None:
        """Post ``day`` on ``name`` again once the ledger answers (one waiter per pair)."""
        key = (day, name)
        running = self._resuming.get(key)
        if running is not None and not running.done() and running is not asyncio.current_task():
            return

        async def resume() -> None:
            await self.ledger.answers()
            if self._resuming.get(key) is asyncio.current_task():
                del self._resuming[key]  # a failure from here on starts another waiter
            log.info("the ledger answers: resuming the post of %s on %s", day, name)
            try:
                await self.post(day, platforms=[name], requested_by="resume:")
            except Exception as exc:  # a delivery's own failure: reported by _interrupted
                log.warning("the resumed post of %s on %s failed: %s", day, name, exc)

        task = asyncio.get_running_loop().create_task(resume(), name=f"resume {day} {name}")
        self._resuming[key] = task
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _alert_soon(self, text: str) -> None:
        task = asyncio.get_running_loop().create_task(self.alert(text), name="delivery-alert")
        self._alerts.add(task)
        task.add_done_callback(self._alerts.discard)

    async def correct(
        self,
        day: dt.date,
        *,
        platforms: Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
    ) -> list[CorrectionReport]:
        """Edit the messages already posted for ``day`` to show its current revision, on the
        chosen platforms (default all): see :func:`digest_core.delivery.corrector.correct`.
        Platforms correct concurrently; one failing never stops the others.

        Raises:
            IssueNotFound: there is no issue for ``day``.
            ValueError: an unknown platform name.
        """
        issue = self.archive.on(day)
        chosen = (
            [self._platform(n) for n in platforms] if platforms else list(self.platforms.values())
        )

        async def run(platform: Adapter) -> CorrectionReport:
            # each format the day's messages may be in, rendered as the post renders it
            messages = {
                fmt.value: render(issue, platform.flavor, part, options=platform.post_options)
                for fmt, part in PART_OF_FORMAT.items()
            }
            async with self._locks.setdefault((issue.date, platform.name), asyncio.Lock()):
                return await correct(
                    self.engine, issue.ref, platform, messages, zone=self.zone, progress=progress
                )

        task = asyncio.current_task()
        assert task is not None, "correct() runs in a task"
        self._posting.add(task)
        self._idle.clear()
        try:
            results = await asyncio.gather(*(run(p) for p in chosen), return_exceptions=True)
        finally:
            self._posting.discard(task)
            if not self._posting:
                self._idle.set()
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            log.error("correction failed: %s", error)
        if errors:
            raise errors[0]
        return [r for r in results if isinstance(r, CorrectionReport)]

    def _platform(self, name: str) -> Adapter:
        try:
            return self.platforms[name]
        except KeyError:
            known = ", ".join(self.platforms) or "none"
            raise ValueError(f"platform {name!r} is not running (running: {known})") from None

    async def _settled(self, day: dt.date) -> float:
        """Wait while the file of ``day`` is still being saved (the scheduled post's settle)."""
        settle = self.poster.config.settle.total_seconds()
        return await wait_settled(
            functools.partial(asyncio.to_thread, self.archive.file_of, day),
            clock=self.clock,
            settle=settle,
            max_wait=settle * SETTLE_MAX_FACTOR,
        )

    async def _scheduled_post(self, day: dt.date) -> None:
        if not await self.publishing.gate(day):
            log.warning("the post of %s is held: not approved", day)
            return
        reports = await self.post(day, requested_by="scheduler:")
        failed = [r for r in reports if not r.ok and not r.waiting]  # (waits: told by post)
        if failed:
            lines = [describe_report(r, zone=self.zone) for r in failed]
            await self.alert(
                f"{day} 的推送有失败 / the post of {day} had failures:\n" + "\n".join(lines)
            )

    async def post_state(self, day: dt.date) -> PostState:
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

    async def catch_up(self) -> None:
        """The start-up catch-up; missed posts are reported unless the ledger is brand new."""
        first_start = not await self.ledger.records(limit=1)
        await self.poster.catch_up(report_missed=not first_start)

    def _ledger_health_changed(self, trouble: Trouble, cleared_at: dt.datetime | None) -> None:
        since = trouble.since.astimezone(self.zone)
        if cleared_at is None:
            text = (
                f"账本数据库出错，推送在等待 / {trouble.describe(self.zone)}: deliveries wait and "
                "resume by themselves once it answers; nothing is sent twice"
            )
        else:
            seconds = (cleared_at - trouble.since).total_seconds()
            stopped = sorted(self.interrupted.values(), key=lambda i: (i.day, i.platform))
            then = "deliveries go on"
            if stopped:
                names = ", ".join(f"{i.platform} {i.day}" for i in stopped)
                resuming = all(i.resumes for i in stopped)
                then = f"{len(stopped)} interrupted delivery(ies) ({names}) " + (
                    "resume now" if resuming else "wait for `digest-bot post`"
                )
            text = (
                f"账本数据库已恢复 / the ledger answers again after {seconds:.0f} s (trouble "
                f"since {since:%H:%M}: {trouble.error}); {then}"
            )
        self._alert_soon(text)

    async def ledger_lost(self, error: LedgerLost) -> None:
        """The ledger's database was deleted or replaced (the watchdog saw it): cancel the
        deliveries under way (the ledger already refuses their claims) and alert the admins.
        The runtime then stops the bot."""
        cancelled = await self.cancel_deliveries()
        if cancelled:
            log.error("stopped %d delivery(ies): the ledger is lost", cancelled)
        await self.alert(f"账本数据库丢失，机器人停止 / {error}")

    async def settle_alerts(self, *, within: float) -> None:
        """Wait up to ``within`` seconds for the alerts under way (on shutdown, before the
        adapters stop)."""
        if self._alerts:
            await asyncio.wait(list(self._alerts), timeout=max(within, 0.01))

    async def alert(self, text: str) -> None:
        """Tell every platform's admins ``text``; logged at WARNING, unless a platform shows
        alerts on the operator's terminal itself (``alerts_on_terminal``, the console): the
        operator reads it once."""
        if not any(getattr(p, "alerts_on_terminal", False) for p in self.platforms.values()):
            log.warning("alert: %s", text)
        for platform in self.platforms.values():
            try:
                await platform.alert_admins(text)
            except TransientError as exc:  # nobody got it: sent again once it answers
                self.resumer.queue_alert(platform.name, text, short_error(exc))
            except Exception:  # an alert must never take the bot down
                log.exception("could not alert %s admins", platform.name)

    # ------------------------------------------------------------ AdminBackend

    async def repost(self, date: dt.date, *, force: bool, requested_by: str) -> str:
        log.info("repost of %s (force=%s) requested by %s", date, force, requested_by)
        reports = await self.post(date, force=force, requested_by=requested_by)
        if not reports:
            return "没有配置推送目标 / no targets are configured"
        return "\n".join([await self.describe(r) for r in reports])

    async def describe(self, report: DeliveryReport, *, force: str = "force") -> str:
        """:func:`describe_report`, and when nothing was sent because everything had been,
        when it was delivered and that ``force`` (how the caller spells it) sends it again."""
        text = describe_report(report, zone=self.zone)
        if report.sent or not any(t.already_sent for t in report.targets):
            return text
        last = await self.ledger.records(
            report.ref, platform=report.platform, states=[PartState.SENT], limit=1
        )
        when = f"{last[0].updated_at.astimezone(self.zone):%Y-%m-%d %H:%M}" if last else "?"
        return (
            f"{text}\n  已于 {when} 送达，没有重发；加 {force} 可再发一遍。/ already delivered at "
            f"{when}; nothing sent again (add {force} to send it again)"
        )

    async def auto_correct(self) -> list[CorrectionReport]:
        """``corrections = "auto"``: correct yesterday and today on every platform that can
        edit and has posted the day, once per revision of the day's file (a correction with
        nothing to change changes nothing; one that failed is tried again next time). Admins
        are told what changed."""
        today = self.poster.today()
        done: list[CorrectionReport] = []
        for day in (today - dt.timedelta(days=1), today):
            try:
                issue = await asyncio.to_thread(self.archive.on, day)
            except IssueNotFound:
                continue
            if (day, issue.revision) in self._auto_checked:
                continue
            stale = []
            for name, platform in self.platforms.items():
                if not isinstance(platform, Editor):
                    continue
                if await self.ledger.day_state(day, platform=name) is not DayState.NONE:
                    stale.append(name)  # posted there: what it shows is compared
            if stale:
                reports = await self.correct(day, platforms=stale)
                done += reports
                changed = [r for r in reports if r.changed or not r.ok]
                if changed:
                    await self.alert(
                        f"{day} 的日报已自动更正 / the issue of {day} was corrected in place:\n"
                        + "\n".join(r.describe() for r in changed)
                    )
                if not all(r.ok for r in reports):
                    continue
            self._auto_checked.add((day, issue.revision))
        return done

    async def check_posted_files(self) -> list[str]:
        """``corrections = "manual"``: when the file of a day already posted (yesterday or
        today) changed since (a save completed after the post, a file replaced), log it and
        alert the admins that readers see another version than the file, and how to correct
        it: once per (file revision, revisions posted). Returns what it told, as
        ``platform:date`` (the platforms showing another revision than the file)."""
        today = self.poster.today()
        found: list[str] = []
        for day in (today - dt.timedelta(days=1), today):
            try:
                issue = await asyncio.to_thread(self.archive.on, day)
            except IssueNotFound:
                continue
            stale: dict[str, str] = {}  # platform -> the revision its readers were sent
            for name in self.platforms:
                posted = await self.ledger.posted_revision(day, platform=name)
                # (not posted there yet: the post sends the file as it is)
                if posted is not None and posted != issue.revision:
                    stale[name] = posted
            told = (day, issue.revision, tuple(sorted(stale.items())))
            if not stale or told in self._told_changed:
                continue
            self._told_changed.add(told)
            found += [f"{name}:{day}" for name in stale]
            log.warning(
                "the issue file of %s changed after it was posted: %s; the file is now revision %s",
                day,
                ", ".join(f"{n} readers see revision {r}" for n, r in stale.items()),
                issue.revision,
            )
            await self.alert(
                f"{day} 的日报文件在推送后改过了，读者看到的仍是推送时的版本。\n"
                f"The issue file of {day} changed after it was posted on {', '.join(stale)}: "
                f"readers see the version that was posted, not the file (now revision "
                f"{issue.revision}). To edit the posted messages to match: /correct {day} or "
                f'`digest-bot correct --date {day}` (`[schedule] corrections = "auto"` does '
                f"it by itself); to send it again as new messages: `digest-bot post --date "
                f"{day} --force`. If the change was a mistake, put the posted version back."
            )
        return found

    async def correct_issue(self, date: dt.date, *, requested_by: str) -> str:
        log.info("correction of %s requested by %s", date, requested_by)
        reports = await self.correct(date)
        if not reports:
            return "没有运行的平台 / no platform is running"
        return "\n".join(r.describe() for r in reports)

    async def status(self) -> str:
        lines = [f"下次推送 / next post: {zoned_text(self.poster.next_post())}"]
        for name, why in sorted(self.unavailable.items()):
            lines.append(f"⚠ {name} 未连接 / not connected: {why}")
        next_day = self.publishing.next_day()
        for day in sorted({next_day, self.poster.today() + dt.timedelta(days=1)}):
            lines.append("  " + (await self.publishing.readiness(day))[1])
        health = self.ledger.health
        if health.lost is not None:
            lines.append(f"⚠ 账本丢失 / {health.lost}")
            return "\n".join(lines)
        # this process's view, else what a running bot published (``digest-bot status``)
        trouble = health.trouble or (read_trouble(health.file) if health.file else None)
        if trouble is not None:
            lines.append(f"⚠ 账本异常 / {trouble.describe(self.zone)}")
        for stopped in sorted(self.interrupted.values(), key=lambda i: (i.day, i.platform)):
            lines.append("⚠ 推送中断 / " + stopped.describe(self.zone))
        try:
            lines += await self._ledger_status()
        except Exception as exc:
            if not is_transient(exc):
                raise
            lines.append(f"账本暂不可读 / the ledger cannot be read now: {short_error(exc)}")
        lines += self.resumer.describe(self.zone)
        lines += self.poster.notes[-3:]
        return "\n".join(lines)

    async def _ledger_status(self) -> list[str]:
        lines: list[str] = []
        waiting = await self.ledger.waiting(limit=500)
        due = {(w.platform, w.target): due_of(w.last_error) for w in reversed(waiting)}
        for platform in self.platforms.values():
            targets = await self.targets(platform)
            lines.append(f"{platform.name}: {len(targets)} 个目标 / targets")
            if isinstance(platform, Tallied):  # its own counts (never an address)
                for group, kinds in (await platform.tallies()).items():
                    lines.append(f"  {group}: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
            for target in targets[:20]:
                last = await self.ledger.last_sent(platform.name, target.id)
                when = "—"
                if last is not None:
                    at = last.updated_at.astimezone(self.zone)
                    when = f"{last.issue_date} (#{last.part + 1}, {at:%m-%d %H:%M})"
                elif old := await self.ledger.last_summarised(platform.name, target.id):
                    when = f"{old.issue_date} (已归档 / rows pruned; parts sent: {old.sent})"
                if (until := due.get((platform.name, target.id))) is not None:
                    local = until.astimezone(self.zone)
                    when += f"; 等待至 / waiting until {local:%m-%d %H:%M:%S}"
                lines.append(f"  {target.id}: 最近 / last {when}")
            if len(targets) > 20:
                lines.append(f"  … {len(targets) - 20} more")
            for inactive in await self.ledger.inactive_targets(platform.name):
                since = inactive.since.astimezone(self.zone)
                lines.append(
                    f"  {inactive.id}: 已停用 / deactivated {since:%m-%d %H:%M} "
                    f"({inactive.reason or 'gone'}); /reactivate {platform.name}:{inactive.id}"
                )
        failures = await self.ledger.failures(limit=5)
        if failures:
            lines.append("最近失败 / recent failures:")
            lines += [
                f"  {f.platform}:{f.target} {f.issue_date} #{f.part + 1}: {f.last_error}"
                for f in failures
            ]
        if waiting:
            lines.append("等待重发 / waiting to be sent again (reason; due):")
            lines += [
                f"  {w.platform}:{w.target} {w.issue_date} #{w.part + 1}: "
                f"{_until(w.last_error, self.zone)}"
                for w in waiting[:5]
            ]
        unknown = await self.ledger.records(states=[PartState.UNKNOWN], limit=5)
        if unknown:
            lines.append(
                "结果未知，将重发（可能重复）/ outcome unknown, to be sent again (possibly twice):"
            )
            lines += [
                f"  {u.platform}:{u.target} {u.issue_date} #{u.part + 1}: {u.last_error}"
                for u in unknown
            ]
        return lines

    async def reactivate(self, platform: str, target_id: str) -> bool:
        if platform not in self.platforms:
            return False
        targets = {t.id: t for t in self.platforms[platform].channel_targets()}
        target = targets.get(target_id, Target(platform, target_id, TargetKind.CHANNEL))
        return await self.ledger.reactivate(target)

    async def subscribe(self, platform: str, chat: str, *, on: bool) -> bool:
        if on:
            return await self.ledger.subscribe(platform, chat)
        return await self.ledger.unsubscribe(platform, chat)

    async def decide(
        self, date: dt.date, *, approve: bool, revision: str | None, requested_by: str
    ) -> str:
        return await self.publishing.decide(
            date, approve=approve, revision=revision, by=requested_by
        )

    async def audit(self, request: Request, *, action: str, allowed: bool, outcome: str) -> None:
        await self.ledger.record_audit(
            platform=request.platform,
            user_id=request.user,
            action=action,
            args={"args": list(request.args), "chat": request.chat},
            allowed=allowed,
            outcome=outcome,
        )


def _until(error: str | None, zone: dt.tzinfo) -> str:
    """A waiting row's error with its due time in the digest's zone."""
    text, due = error or "", due_of(error)
    if due is None:
        return text
    return text[: text.rfind("; due at ")] + f"; due {due.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}"


def describe_waits(day: dt.date, reports: Sequence[DeliveryReport], zone: dt.tzinfo) -> str:
    """The admins' alert about parts a post left waiting: how many, where, why, when."""
    lines = [f"{day} 的推送有部分在等待重发 / parts of the post of {day} wait:"]
    for r in reports:
        waiting = [t for t in r.targets if t.waiting]
        first = next((e for t in waiting for e in t.errors), "")
        reason = _until(first.split(": ", 1)[-1], zone)
        due = f"{r.due.astimezone(zone):%H:%M:%S}" if r.due is not None else "?"
        lines.append(
            f"  {r.platform}: {r.waiting} part(s) to {len(waiting)} target(s), first due {due}"
            f" (e.g. {waiting[0].target.id}: {reason}); the running bot sends them then"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Interrupted:
    """A delivery of ``day`` on ``platform`` that raised at ``at`` (aware UTC) with
    ``error``; ``resumes``: it is posted again once the ledger answers."""

    day: dt.date
    platform: str
    at: dt.datetime
    error: str
    resumes: bool

    def describe(self, zone: dt.tzinfo) -> str:
        then = (
            "resumes once the ledger answers"
            if self.resumes
            else "`digest-bot post` sends what is left"
        )
        return (
            f"delivery {self.platform} {self.day} failed at "
            f"{self.at.astimezone(zone):%H:%M}: {self.error} ({then})"
        )


def describe_report(report: DeliveryReport, *, zone: dt.tzinfo = dt.UTC) -> str:
    """One line per platform plus one per target that did not complete (times in ``zone``)."""
    head = (
        f"{report.platform} {report.ref.date}: 发送 / sent {report.sent}, "
        f"失败 / failed {report.failed}, 失效 / gone {len(report.gone)}"
    )
    if report.unknown or report.maybe_twice:
        # a cut send may have arrived: counted apart, never as "not sent"
        head += (
            f", 结果未知（下次重发）/ outcome unknown (sent again next time) {report.unknown}, "
            f"可能重复 / possibly twice {report.maybe_twice}"
        )
    if report.waiting and report.due is not None:
        head += (
            f", 等待重发 / waiting {report.waiting} (first due "
            f"{report.due.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}; a running bot sends them "
            "then)"
        )
    lines = [head]
    for t in report.targets:
        moved = f" → {t.moved_to}" if t.moved_to else ""
        if not t.complete or t.moved_to:
            why = "; ".join(_until(e, zone) for e in t.errors[-2:]) or ("gone" if t.gone else "")
            if t.waiting:
                why = f"{t.waiting} part(s) wait: {why}"
            lines.append(f"  {t.target.id}{moved}: {why}")
        elif t.sent_revision:
            lines.append(
                f"  {t.target.id}: 已收到修订前的版本 {t.sent_revision}（force 可重发）/ "
                f"already had revision {t.sent_revision}; force sends the correction"
            )
        elif t.in_progress:
            lines.append(
                f"  {t.target.id}: 另一次推送正在发送 / being sent by another delivery "
                f"({t.in_progress} parts)"
            )
    for target in report.inactive:
        lines.append(
            f"  {target.id}: 已停用，未发送（/reactivate {target.id} 恢复）/ deactivated "
            f"earlier, not sent (/reactivate {target.id} to resume)"
        )
    return "\n".join(lines)
