"""DigestService: the running bot's composition root — it builds the core's collaborators,
wires them to each other and to the platforms (:mod:`.platforms`), and owns no behaviour.

The service posts through the adapters (:mod:`.posting`: also the catch-up and the ledger's
trouble) and answers them through the :class:`~digest_core.port.Port` (:mod:`.reception`);
alerts :mod:`.alerts`, ``status`` :mod:`.status`, the admin commands :mod:`.admin`, resuming
:mod:`digest_core.delivery.resuming`. One built before one it calls gets it through a lambda
that only forwards (tests/core/test_layout.py checks that the root only delegates).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TypedDict

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.commands.confirmation import Confirmations
from digest_core.commands.dispatch import Commands
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.resuming import Resumer
from digest_core.metrics import NULL_METRICS, MetricsSink, Tee
from digest_core.port import Adapter
from digest_core.publishing.approval import Publishing, PublishingConfig
from digest_core.publishing.changes import FileChanges
from digest_core.publishing.embargo import Embargo
from digest_core.publishing.pins import Pins
from digest_core.publishing.schedule import DailyPoster, ScheduleConfig
from digest_core.service.admin import Admin
from digest_core.service.alerts import Alerts
from digest_core.service.dashboard import Dashboard
from digest_core.service.engagement import Engagement
from digest_core.service.platforms import Platforms
from digest_core.service.posting import Posting, UnderWay
from digest_core.service.reception import Reception
from digest_core.service.status import StatusReport, describe_report
from digest_core.subscriptions.delivery import Visibility

__all__ = ["RESUME_CAP_SECONDS", "DigestService", "describe_report"]

#: waiting posts and queued alerts are tried again at least this often (so a post resumes
#: within this long of an outage's end, plus what the try under way still waits)
RESUME_CAP_SECONDS = 15.0
#: no approval needed, alerts at their default times
NO_APPROVAL = PublishingConfig()


class Basis(TypedDict):
    """What posting and the adapters' reception are built on (keyword arguments of both)."""

    archive: Archive
    ledger: Ledger
    engine: DeliveryEngine
    clock: Clock
    zone: dt.tzinfo


class DigestService:
    """Ties the archive, the ledger and the platforms together; the adapters'
    :class:`~digest_core.port.Port` (its :class:`.Reception`'s methods), and what
    ``digest-bot`` commands call."""

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
        publishing: PublishingConfig = NO_APPROVAL,
    ):
        """``publishing``: approval and alert times; :meth:`load` before serving."""
        self.engagement = Engagement(clock=clock, zone=zone)  # readers' counts, live sends
        engine.metrics = Tee(engine.metrics, self.engagement)
        self.archive, self.ledger, self.engine, self.clock = archive, ledger, engine, clock
        self.zone, self.metrics = zone, Tee(metrics, self.engagement)
        self.basis = Basis(archive=archive, ledger=ledger, engine=engine, clock=clock, zone=zone)
        self.platforms = Platforms(platforms)
        self.under_way = UnderWay()
        self._build_publishing(schedule, publishing)
        self._build_posting(schedule)
        self._build_commands()
        self.changes = FileChanges(
            archive=archive,
            ledger=ledger,
            platforms=self.platforms,
            today=self.poster.today,
            correct=self.posting.correct,
            alert=self.alert,
        )
        ledger.health.subscribe(self.posting.ledger_health_changed)
        self._expose()

    def _build_publishing(self, schedule: ScheduleConfig, publishing: PublishingConfig) -> None:
        """What resumes waiting deliveries, the alerts, the embargo and the approvals."""
        #: what deliveries left waiting, resumed while the bot runs (and alerts queued)
        self.resumer = Resumer(
            clock=self.clock,
            window=lambda day: self.posting.window(day),
            today=lambda: self.poster.today(),
            state=lambda day: self.posting.state(day),
            post=lambda day: self.posting.resume(day),
            post_on=lambda day, name: self.posting.resume_on(day, name),
            answers=self.ledger.answers,
            waiting=lambda day: self.posting.waiting(day),
            busy=self.under_way.busy,
            send_alert=self.platforms.alert_admins,
            alert=lambda text: self.alerts.alert(text),
            base=self.engine.backoff.base,
            cap=min(self.engine.backoff.cap, RESUME_CAP_SECONDS),
        )
        self.alerts = Alerts(self.platforms, queue=self.resumer.queue_alert)
        self.alert = self.alerts.alert
        #: the one rule of what readers may see (every reader surface reads through it)
        self.embargo = Embargo(zone=schedule.zone, post_time=schedule.post_time, clock=self.clock)
        self.visibility = Visibility(self.embargo)
        self.publishing = Publishing(
            publishing,
            embargo=self.embargo,
            archive=self.archive,
            ledger=self.ledger,
            clock=self.clock,
            platforms=self.platforms.adapters,
            post=lambda day: self.admin.approved(day),
            state=lambda day: self.posting.state(day),
            alert=self.alert,
        )

    def _build_posting(self, schedule: ScheduleConfig) -> None:
        """The daily poster, posting (the day's and subscribers' own), status and admin."""
        self.poster = DailyPoster(
            schedule,
            clock=self.clock,
            has_issue=lambda day: self.posting.has_issue(day),
            state=lambda day: self.posting.state(day),
            post=lambda day: self.posting.scheduled(day),
            alert=self.alert,
            settle=lambda day: self.posting.settled(day),
        )
        self.posting = Posting(
            **self.basis,
            platforms=self.platforms,
            metrics=self.metrics,
            publishing=self.publishing,
            visibility=self.visibility,
            pins=Pins(self.ledger, alert=self.alert),
            alerts=self.alerts,
            under_way=self.under_way,
            resumer=self.resumer,
            poster=self.poster,
        )
        self.report = StatusReport(
            ledger=self.ledger,
            targets=self.posting.targets,
            zone=self.zone,
            platforms=self.platforms,
            unavailable=self.posting.unavailable,
            poster=self.poster,
            publishing=self.publishing,
            interrupted=self.posting.interrupted,
            resumer=self.resumer,
        )
        self.admin = Admin(self.posting, self.report, self.publishing, self.ledger)

    def _build_commands(self) -> None:
        """The commands (the core's, readers', ``/email``), the Port and the dashboard."""
        self.commands = Commands(
            self.archive,
            self.clock,
            self.zone,
            backend=self.admin,
            post_options=self.platforms.post_options(),
            subscribable=self.platforms.subscribable,
            metrics=self.metrics,
            embargo=self.embargo,
            readers=self.engagement,
            store=self.ledger,
            signup=self.platforms.signup(),
        )
        self.reception = Reception(
            self.commands,
            **self.basis,
            embargo=self.embargo,
            poster=self.poster,
            confirmations=Confirmations(self.commands),
            visibility=self.visibility,
            engagement=self.engagement,
        )
        self.dashboard = Dashboard(
            archive=self.archive,
            ledger=self.ledger,
            publishing=self.publishing,
            confirmations=self.reception.confirmations,
            posting=self.posting,
            engagement=self.engagement,
            commands=self.commands,
            zone=self.zone,
        )

    def _expose(self) -> None:
        """What adapters (the Port), commands, the runtime and tests call: its parts' own."""
        r, p, c = self.reception, self.posting, self.changes
        self.handle, self.section, self.archive_dates = r.handle, r.section, r.archive_dates
        self.confirmations, self.receive_issue_file = r.confirmations, r.receive_issue_file
        self.inactive_targets, self.inline, self.reply = r.inactive_targets, r.inline, r.reply
        self.account, self.counted, self.preferences = r.account, r.counted, r.preferences
        self.greeting, self.set_preferences, self.post = r.greeting, r.set_preferences, p.post
        self.personal, self.post_state, self.catch_up = p.personal, p.state, p.catch_up
        self.deliver_personal, self.cancel_deliveries = p.deliver_personal, p.cancel
        self.ledger_lost, self.idle, self.pins = p.ledger_lost, self.under_way.idle, p.pins
        self.correct, self.status, self.describe = p.correct, self.report.text, self.report.describe
        self.auto_correct, self.check_posted_files = c.auto_correct, c.check_posted_files
        self.subscribe, self.settle_alerts = self.admin.subscribe, self.alerts.settle

    async def load(self) -> None:
        """Read what earlier runs recorded that the service needs (early publishes)."""
        await self.publishing.load()

    @property
    def command_names(self) -> Sequence[str]:
        """The core's commands' names (those installed so far)."""
        return self.reception.command_names

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
