"""DigestService: the running bot's composition root — it builds the core's collaborators,
wires them to each other and to the platforms, and owns no behaviour of its own.

Adapters (:class:`~digest_core.port.Adapter`) are Platforms that also receive commands; the
service posts through them (:mod:`.posting`) and answers their commands through the narrow
:class:`~digest_core.port.Port` (:mod:`.port`), so every platform behaves the same. Where each
concern lives: posting and corrections :mod:`.posting`, alerts :mod:`.alerts`, ``status``
:mod:`.status`, the admin commands' backend :mod:`.admin`, resuming what waits
:mod:`digest_core.delivery.resuming`, a changed file after its post
:mod:`digest_core.publishing.changes`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.commands import Commands
from digest_core.commands.confirmation import Confirmations
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.health import Trouble
from digest_core.delivery.resuming import Resumer
from digest_core.errors import LedgerLost
from digest_core.metrics import NULL_METRICS, MetricsSink, Tee
from digest_core.port import Adapter
from digest_core.publishing.approval import Publishing, PublishingConfig
from digest_core.publishing.changes import FileChanges
from digest_core.publishing.embargo import Embargo
from digest_core.publishing.pins import Pins
from digest_core.publishing.schedule import DailyPoster, ScheduleConfig
from digest_core.service.admin import Admin
from digest_core.service.alerts import Alerts, ledger_health_text
from digest_core.service.dashboard import Dashboard
from digest_core.service.engagement import Engagement
from digest_core.service.posting import Posting, UnderWay
from digest_core.service.reception import Reception
from digest_core.service.status import StatusReport, describe_report
from digest_core.subscriptions.commands import ReaderCommands
from digest_core.subscriptions.delivery import Personal, Visibility
from digest_core.subscriptions.signup import AddressSignup, SignupCommands

__all__ = ["RESUME_CAP_SECONDS", "DigestService", "describe_report"]

log = logging.getLogger(__name__)

#: waiting posts and queued alerts are tried again at least this often (so a post resumes
#: within this long of an outage's end, plus what the try under way still waits)
RESUME_CAP_SECONDS = 15.0


class DigestService(Reception):
    """Ties the archive, the ledger and the platforms together; the adapters'
    :class:`~digest_core.port.Port`, and what ``digest-bot`` commands call."""

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
        self.engagement = Engagement(clock=clock, zone=zone)  # readers' counts, a post's live sends
        engine.metrics = Tee(engine.metrics, self.engagement)
        self.archive, self.ledger, self.engine, self.clock = archive, ledger, engine, clock
        self.zone, self.metrics = zone, Tee(metrics, self.engagement)
        self.platforms = {p.name: p for p in platforms}
        self.under_way = UnderWay()
        subscribable = frozenset(p.name for p in platforms if getattr(p, "subscriptions", False))
        self._build_publishing(schedule, publishing or PublishingConfig())
        self._build_posting(schedule, subscribable)
        self._build_commands(schedule, platforms, subscribable)
        self.changes = FileChanges(
            archive=archive,
            ledger=ledger,
            platforms=self.platforms,
            today=self.poster.today,
            correct=lambda day, names: self.posting.correct(day, platforms=names),
            alert=self.alert,
        )
        ledger.health.subscribe(self._ledger_health_changed)
        self._expose()

    def _build_publishing(self, schedule: ScheduleConfig, publishing: PublishingConfig) -> None:
        """What resumes waiting deliveries, the alerts, the embargo and the approvals."""
        ledger, engine, clock = self.ledger, self.engine, self.clock
        #: what deliveries left waiting, resumed while the bot runs (and alerts queued)
        self.resumer = Resumer(
            clock=clock,
            window=lambda day: (
                self.poster.post_at(day),
                self.poster.post_at(day) + schedule.catch_up,
            ),
            today=lambda: self.poster.today(),
            state=lambda day: self.posting.state(day),
            post=lambda day: self.post(day, requested_by="resume:"),
            post_on=lambda day, name: self.post(day, platforms=[name], requested_by="resume:"),
            answers=ledger.answers,
            waiting=self._waiting_rows,
            busy=self.under_way.busy,
            send_alert=lambda name, text: self.platforms[name].alert_admins(text),
            alert=lambda text: self.alerts.alert(text),
            base=engine.backoff.base,
            cap=min(engine.backoff.cap, RESUME_CAP_SECONDS),
        )
        self.alerts = Alerts(self.platforms, queue=self.resumer.queue_alert)
        self.alert = self.alerts.alert
        #: the one rule of what readers may see (every reader surface reads through it)
        self.embargo = Embargo(zone=schedule.zone, post_time=schedule.post_time, clock=clock)
        self.visibility = Visibility(self.embargo)
        self.publishing = Publishing(
            publishing,
            embargo=self.embargo,
            archive=self.archive,
            ledger=ledger,
            clock=clock,
            platforms=lambda: list(self.platforms.values()),
            post=lambda day: self.admin.repost(day, force=False, requested_by="approval"),
            state=lambda day: self.posting.state(day),
            alert=self.alert,
        )

    def _build_posting(self, schedule: ScheduleConfig, subscribable: frozenset[str]) -> None:
        """Posting (the day's and subscribers' own), the daily poster, status and admin."""
        archive, ledger, engine, clock, zone = (
            self.archive, self.ledger, self.engine, self.clock, self.zone
        )  # fmt: skip
        #: subscribers' own times and formats, and follows (the minute job: deliver_personal)
        self.personal = Personal(
            archive=archive, ledger=ledger, engine=engine, clock=clock, zone=zone,
            visibility=self.visibility,
            platforms={n: p for n, p in self.platforms.items() if n in subscribable},
            lock=self.under_way.lock, catch_up=schedule.catch_up,
        )  # fmt: skip
        self.pins = Pins(ledger, alert=self.alert)
        self.posting = Posting(
            archive=archive, ledger=ledger, engine=engine, clock=clock, zone=zone,
            platforms=self.platforms, metrics=self.metrics, publishing=self.publishing,
            personal=self.personal, pins=self.pins, alerts=self.alerts,
            under_way=self.under_way, resumer=self.resumer,
            settle=schedule.settle.total_seconds(),
        )  # fmt: skip
        self.poster = DailyPoster(
            schedule,
            clock=clock,
            has_issue=self.posting.has_issue,
            state=self.posting.state,
            post=self.posting.scheduled,
            alert=self.alert,
            settle=self.posting.settled,
        )
        self.report = StatusReport(
            ledger=ledger, zone=zone, platforms=self.platforms, poster=self.poster,
            publishing=self.publishing, resumer=self.resumer, targets=self.posting.targets,
            unavailable=self.posting.unavailable, interrupted=self.posting.interrupted,
        )  # fmt: skip
        self.admin = Admin(self.posting, self.report, self.publishing, ledger)

    def _build_commands(
        self, schedule: ScheduleConfig, platforms: Sequence[Adapter], subscribable: frozenset[str]
    ) -> None:
        """The commands (the core's, readers', ``/email``), confirmations and the dashboard."""
        self.commands = Commands(
            self.archive, self.clock, self.zone,
            backend=self.admin,
            post_options={p.name: p.post_options for p in platforms},
            subscribable=subscribable, metrics=self.metrics, embargo=self.embargo,
            readers=self.engagement,
        )  # fmt: skip
        self.confirmations = Confirmations(self.commands)
        self.dashboard = Dashboard(
            archive=self.archive, ledger=self.ledger, publishing=self.publishing,
            posting=self.posting, engagement=self.engagement, commands=self.commands,
            confirmations=self.confirmations, zone=self.zone,
        )  # fmt: skip
        ReaderCommands(
            self.commands, self.ledger, zone_name=str(self.zone), post_time=schedule.post_time
        ).install()
        #: ``/email ADDRESS`` through the first platform that mails the digest (none: the
        #: command says it is not available)
        signups = [p for p in platforms if isinstance(p, AddressSignup)]
        SignupCommands(self.commands, signups[0] if signups else None).install()

    def _expose(self) -> None:
        """What `digest-bot` commands, the runtime and the tests call: the collaborators' own."""
        self.post, self.correct = self.posting.post, self.posting.correct
        self.deliver_personal, self.post_state = self.posting.deliver_personal, self.posting.state
        self.cancel_deliveries, self.idle = self.posting.cancel, self.under_way.idle
        self.status, self.describe = self.report.text, self.report.describe
        self.auto_correct = self.changes.auto_correct
        self.check_posted_files = self.changes.check_posted_files
        self.subscribe, self.settle_alerts = self.admin.subscribe, self.alerts.settle

    async def load(self) -> None:
        """Read what earlier runs recorded that the service needs (early publishes)."""
        await self.publishing.load()

    async def _waiting_rows(self, day: dt.date) -> list[tuple[str | None, str]]:
        """(error, target) of the day's rows a delivery left waiting, newest first."""
        return [(r.last_error, r.target) for r in await self.ledger.waiting(day, limit=500)]

    def _ledger_health_changed(self, trouble: Trouble, cleared_at: dt.datetime | None) -> None:
        stopped = sorted(self.posting.interrupted.values(), key=lambda i: (i.day, i.platform))
        which = [(i.platform, i.day, i.resumes) for i in stopped]
        self.alerts.soon(ledger_health_text(trouble, cleared_at, self.zone, which))

    async def ledger_lost(self, error: LedgerLost) -> None:
        """The ledger's database was deleted or replaced (the watchdog saw it): cancel the
        deliveries under way (the ledger already refuses their claims) and alert the admins.
        The runtime then stops the bot."""
        cancelled = await self.posting.cancel()
        if cancelled:
            log.error("stopped %d delivery(ies): the ledger is lost", cancelled)
        await self.alert(f"账本数据库丢失，机器人停止 / {error}")

    async def catch_up(self) -> None:
        """The start-up catch-up; missed posts are reported unless the ledger is brand new."""
        first_start = not await self.ledger.records(limit=1)
        await self.poster.catch_up(report_missed=not first_start)

    @property
    def unavailable(self) -> dict[str, str]:
        """Platforms that could not start yet -> why (the runtime's live view)."""
        return self.posting.unavailable

    @unavailable.setter
    def unavailable(self, value: dict[str, str]) -> None:
        self.posting.unavailable = self.report.unavailable = value

    @property
    def resume_after_trouble(self) -> bool:
        """The running bot: deliveries that raised are told, those cut by the ledger resume."""
        return self.posting.resume_after_trouble

    @resume_after_trouble.setter
    def resume_after_trouble(self, value: bool) -> None:
        self.posting.resume_after_trouble = value
