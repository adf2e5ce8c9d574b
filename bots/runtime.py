"""Assembling and running the bot: one process, one event loop, one scheduler, every platform."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bots import periodic, registry
from bots.inflight import InFlight
from bots.platformspec import BuildContext, PlatformSpec
from bots.starting import PlatformStarts
from digest_core.archive import Archive, index_for
from digest_core.clock import Clock, SystemClock
from digest_core.delivery import Backoff, DeliveryEngine, Ledger
from digest_core.delivery.retention import RetentionJob, RetentionPolicy
from digest_core.delivery.watchdog import LedgerWatchdog
from digest_core.errors import ConfigError, LeadershipLost, LedgerLost
from digest_core.metrics import NULL_METRICS, MetricsSink
from digest_core.port import Adapter
from digest_core.publishing.approval import PublishingConfig
from digest_core.publishing.schedule import ScheduleConfig
from digest_core.service.leadership import Leadership, receives_as_standby
from digest_core.service.root import DigestService
from digest_core.settings import Settings
from digest_core.subscriptions.delivery import install as install_personal

if TYPE_CHECKING:
    from bots.http import HttpEndpoint, RouteInstaller
    from bots.metrics import PrometheusMetrics
    from digest_core.delivery.resuming import Resumer

log = logging.getLogger(__name__)

#: a shutdown, from the signal to the last adapter closed, takes at most this long
SHUTDOWN_BUDGET_SECONDS = 10.0
#: of which it waits this long for a delivery under way before leaving it to the next start
SHUTDOWN_GRACE_SECONDS = 6.0
#: and this long for commands being answered (as long as a delivery is still finishing)
COMMAND_GRACE_SECONDS = 3.0
#: then, at most this long telling the users of cancelled commands to try again
APOLOGY_SECONDS = 1.5


def check_archive_dir(settings: Settings) -> None:
    """Refuse to start on an archive folder that is not there (a typo, the wrong working
    directory): the bot would run and never find an issue.

    Raises:
        ConfigError: ``archive_dir`` (or ``--archive``) names no folder; the message names it
            (and, when relative, where it was looked for).
    """
    path = settings.archive_dir
    if path.is_dir():
        return
    shown = str(path) if path.is_absolute() else f"{path} ({Path.cwd() / path})"
    what = "is not a folder" if os.path.lexists(path) else "does not exist"
    raise ConfigError(
        f"the archive folder {shown} {what}: create it, or point archive_dir (or --archive) "
        "at the folder of issue files",
        key="archive_dir",
    )


def build_adapters(
    settings: Settings,
    *,
    only: str | None = None,
    option: str = "--only",
    clock: Clock,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    in_flight: InFlight | None = None,
) -> list[Adapter]:
    """The platforms to run, in registry order: each one its settings configure (a token,
    targets), or the fallback (the console) when none is; each built to send under the pacing
    its spec states for its settings (:meth:`~bots.platformspec.PlatformSpec.pacing`).

    ``in_flight`` tracks the command handlers of all of them (each makes its own without).
    ``option`` is how the user asked for ``only`` (``--only`` of ``run``, ``--platform`` of
    ``post``), for the error that says what it needs.

    Raises:
        ConfigError: ``only`` names no platform, or one its settings do not configure, or
            a configured platform's SDK is not installed.
    """
    if only is not None and only not in registry.names():
        raise ConfigError(f"unknown platform {only!r} (choose from {', '.join(registry.names())})")

    def context(spec: PlatformSpec, section: object) -> BuildContext:
        """What ``spec.build`` gets: the pacing its spec states for ``section`` among it."""
        limits = spec.pacing(section)
        return BuildContext(clock=clock, limits=limits, stdin=stdin, out=out, in_flight=in_flight)

    adapters: list[Adapter] = []
    fallbacks: list[PlatformSpec] = []
    for spec in registry.specs():
        if spec.fallback:
            fallbacks.append(spec)
            if only != spec.name:
                continue
        if only not in (None, spec.name):
            continue
        section = settings.platform(spec.name) if spec.settings is not None else None
        try:
            adapter = spec.build(section, context(spec, section))
        except ImportError as exc:
            raise ConfigError(
                f"{spec.name} is configured but {spec.sdk or exc.name} is not installed: "
                f"pip install 'digest-bot[{spec.name}]'"
            ) from exc
        if adapter is None:
            if only == spec.name:
                raise ConfigError(f"{option} {spec.name} {spec.needs}", key=spec.needs_key)
            continue
        adapters.append(adapter)
    if not adapters:
        for spec in fallbacks:
            built = spec.build(None, context(spec, None))
            if built is not None:
                adapters.append(built)
    return adapters


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings,
    *,
    only: str | None = None,
    option: str = "--only",
    clock: Clock | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    in_flight: InFlight | None = None,
    new_ledger: bool = False,
    metrics: MetricsSink = NULL_METRICS,
) -> AsyncIterator[DigestService]:
    """The service with its ledger open and its adapters built (not yet started).

    ``new_ledger`` accepts an empty (or another) ledger where the marker beside it records
    the one the bot had (see :meth:`Ledger.open`); ``metrics`` hears what the engine and the
    commands do; ``option`` is :func:`build_adapters`'. Leaving it adds the readers' counts
    since the last periodic flush to the ledger, then closes it.

    Raises:
        ConfigError: the archive folder is missing (:func:`check_archive_dir`), or see
            :func:`build_adapters`.
    """
    check_archive_dir(settings)
    clock = clock or SystemClock()
    adapters = build_adapters(
        settings, only=only, option=option, clock=clock, stdin=stdin, out=out, in_flight=in_flight
    )
    _post_options(settings, adapters)
    async with Ledger.open(
        settings.database_url,
        clock=clock,
        new_ledger=new_ledger,
        upgrade=settings.ledger.auto_upgrade,
    ) as ledger:
        service = _service(settings, ledger, adapters, clock=clock, metrics=metrics)
        await service.load()
        service.resumer.check_every = settings.delivery.resume_check_seconds
        try:
            yield service
        finally:
            # the readers' counts since the last periodic flush, inline queries still
            # settling among them (flush never raises: a refused one is logged)
            service.engagement.searches.settle_all()
            await service.engagement.flush(ledger)


def _service(
    settings: Settings,
    ledger: Ledger,
    adapters: Sequence[Adapter],
    *,
    clock: Clock,
    metrics: MetricsSink,
) -> DigestService:
    """The service over ``ledger`` and ``adapters``, as ``settings`` configure it: the
    engine's backoff and waits (``[delivery]``), the schedule and approvals (``[schedule]``)."""
    d, s = settings.delivery, settings.schedule
    backoff = Backoff(
        base=d.backoff_base_seconds, cap=d.backoff_max_seconds, max_attempts=d.max_attempts
    )
    return DigestService(
        archive=Archive(
            settings.archive_dir, index=index_for(settings.database_url, settings.archive_dir)
        ),
        ledger=ledger,
        engine=DeliveryEngine(
            ledger, clock=clock, backoff=backoff, metrics=metrics, max_wait=d.max_wait_seconds
        ),
        clock=clock,
        zone=settings.zone,
        schedule=ScheduleConfig(
            zone=settings.zone,
            post_time=s.time,
            catch_up=_hours(s.catch_up_hours),
            retry_every=_hours(s.retry_minutes / 60),
            deadline=_hours(s.deadline_hours),
            enabled=s.enabled,
            settle=dt.timedelta(seconds=s.settle_seconds),
        ),
        platforms=adapters,
        metrics=metrics,
        publishing=PublishingConfig(
            require_approval=s.require_approval,
            review_before=s.before_post(s.review_time, default_hours=2),
            missing_before=s.before_post(s.missing_alert, default_hours=3),
        ),
    )


def _post_options(settings: Settings, adapters: Sequence[Adapter]) -> None:
    """Posts and replies link to the web archive (``[site] base_url``), and their source
    links go through the bot's counting redirect (``[analytics] track_links``)."""
    if settings.site.base_url is not None:
        for adapter in adapters:
            adapter.post_options = replace(adapter.post_options, site_url=settings.site.base_url)
    _track_links(settings, adapters)


def _track_links(settings: Settings, adapters: Sequence[Adapter]) -> None:
    """With ``[analytics] track_links``, every post's source links go through the bot's
    counting redirect (:mod:`bots.links`), each platform's own."""
    key, base = settings.analytics.resolved_secret_key(), settings.redirect_base
    if not settings.analytics.track_links or key is None or base is None:
        return
    from bots.links import LinkTokens, LinkTracker

    tokens = LinkTokens(key)
    for adapter in adapters:
        tracker = LinkTracker(tokens, base, adapter.name)
        adapter.post_options = replace(adapter.post_options, links=tracker)


def retention_job(service: DigestService, settings: Settings) -> RetentionJob:
    """The daily pruning of the ledger, as ``[ledger]`` configures it."""
    s = settings.ledger
    return RetentionJob(
        service.ledger,
        RetentionPolicy(keep_days=s.keep_days, audit_keep_days=s.audit_keep_days),
        clock=service.clock,
        zone=settings.zone,
        at=s.prune_at,
    )


#: how often the archive is checked for a posted day's new file (corrected with ``corrections =
#: "auto"``, else told to the admins)
AUTO_CORRECT_SECONDS = 60.0
#: how often readers' counts are added to the ledger (the dashboard flushes before it reads)
ENGAGEMENT_FLUSH_SECONDS = 15.0


def _hours(h: float) -> dt.timedelta:
    return dt.timedelta(hours=h)


async def run(
    settings: Settings,
    *,
    only: str | None = None,
    clock: Clock | None = None,
    stop: asyncio.Event | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    new_ledger: bool = False,
) -> None:
    """Run until SIGINT/SIGTERM (or ``stop``): schedule, catch-up, commands. As a standby
    (:mod:`digest_core.service.leadership`) only the adapters that ``standby_receives`` run;
    once this process leads, every platform, the jobs and the catch-up start. Each part is
    an async context manager entered in turn on one exit stack (:func:`_serve`), so each
    outlives the ones entered after it: left from the last within
    :data:`SHUTDOWN_BUDGET_SECONDS`, whatever ended the run.

    Raises:
        LeadershipLost: it led and lost the leader's lease (its deliveries cancelled at once).
        LedgerLost: the ledger's database was deleted or replaced while running.
        LedgerError: the ledger cannot be opened, or is not the one its marker records.
        ConfigError: a platform refused its configuration (a revoked token) at its start.
    """
    ending, in_flight, metrics = _Ending(stop or asyncio.Event()), InFlight(), _metrics(settings)
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(_signals(ending.stop))  # left last, after the ledger closes
        service = await stack.enter_async_context(
            open_service(
                settings,
                only=only,
                metrics=metrics or NULL_METRICS,
                new_ledger=new_ledger,
                clock=clock,
                in_flight=in_flight,
                stdin=stdin,
                out=out,
            )
        )
        if not await _serve(stack, settings, service, ending, in_flight, metrics):
            return  # stopped as a standby, before it led
    ending.raise_first()


async def _serve(
    stack: contextlib.AsyncExitStack,
    settings: Settings,
    service: DigestService,
    ending: _Ending,
    in_flight: InFlight,
    metrics: PrometheusMetrics | None,
) -> bool:
    """The running bot's parts, each an async context manager that stops what it started,
    entered in turn on the run's ``stack``: the parts entered before the shutdown's graces
    (:class:`_Shutdown`) outlive them, the ones entered after it stop before they begin.
    Then the platforms start and, once this process leads, the jobs, the resumer and the
    catch-up; until ``ending`` stops it (False: it stopped before it led)."""
    enter = stack.enter_async_context
    service.archive.index_in_background()  # not by the first reader's /search
    service.resume_after_trouble = True  # a post cut by ledger trouble goes on by itself
    leadership = Leadership(
        service.ledger, clock=service.clock, lease_seconds=settings.leader.lease_seconds
    )
    starts = _platform_starts(service, settings, leadership, ending)
    await enter(_endpoint(settings, service, leadership, starts, metrics))  # throughout
    resumer = await enter(_Resumer(service.resumer))  # its loop: ends after the adapters
    await enter(starts)  # the adapters: stop after the graces, the last started first
    await enter(_alerts_settled(service, ending.budget))  # the alerts under way: sent first
    scheduler = await enter(_scheduler(settings))  # paused by the graces, then shut down
    shutdown = await enter(_Shutdown(service, scheduler, in_flight, ending))  # the graces
    await enter(resumer.resuming())  # new resumes: none once the shutdown begins,
    retention = await enter(_retention(service, settings))  # nor pruning,
    await enter(starts.retrying())  # nor a platform still unreachable started,
    tasks = await enter(_Tasks())  # nor the ledger's watchdog, nor the lease held
    tasks.spawn(_watch_ledger(service, settings, ending), "ledger-watchdog")
    await starts.start_all(filter(receives_as_standby, service.platforms.values()))
    if not await _until_leading(leadership, ending.stop):
        return False
    tasks.spawn(_hold(leadership, service, ending), "leadership")
    await starts.start_all(service.platforms.values())
    _install_jobs(scheduler, service, settings, retention)
    resumer.start()  # what deliveries left waiting
    _log_running(service, settings)
    if settings.schedule.enabled:
        shutdown.catching_up.spawn(service.catch_up(), "catch-up")
    await ending.stop.wait()
    log.info("stopping")
    return True


class _Ending:
    """How a run ends: its ``stop`` event, what ended it besides a signal (a ledger or the
    leadership lost, a platform that refused its configuration after the start: raised once
    everything stopped), and the shutdown's :attr:`budget`."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.budget = _Budget(SHUTDOWN_BUDGET_SECONDS)
        self.lost: list[LedgerLost | LeadershipLost] = []
        self.refused: list[Exception] = []

    def lose(self, error: LedgerLost | LeadershipLost) -> None:
        self.lost.append(error)
        self.stop.set()

    def refuse(self, error: Exception) -> None:
        self.refused.append(error)
        self.stop.set()

    def raise_first(self) -> None:
        """Raise what ended the run (a loss before a refusal), if anything did."""
        if self.lost:
            raise self.lost[0]
        if self.refused:
            raise self.refused[0]


class _Budget:
    """The shutdown budget: :meth:`left` is all of it until :meth:`begin`, then what remains."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._deadline: float | None = None

    def begin(self) -> None:
        self._deadline = asyncio.get_running_loop().time() + self.seconds

    def left(self) -> float:
        if self._deadline is None:
            return self.seconds
        return max(0.0, self._deadline - asyncio.get_running_loop().time())


class _Tasks(contextlib.AbstractAsyncContextManager["_Tasks"]):
    """Background tasks of the run, cancelled (and waited for) when the stack reaches them."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[object]] = []

    def spawn(self, work: Coroutine[object, object, object], name: str) -> None:
        self.tasks.append(asyncio.create_task(work, name=name))

    async def cancel(self) -> None:
        """Cancel them (those done already are left as they are) and wait for them to unwind."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def __aexit__(self, *exc: object) -> None:
        await self.cancel()


class _Resumer(contextlib.AbstractAsyncContextManager["_Resumer"]):
    """The resumer's loop (:class:`~digest_core.delivery.resuming.Resumer`): started once
    this process leads (:meth:`start`), cancelled on leaving, after the adapters stopped (an
    alert it is resending finishes meanwhile). New resumes begin only while :meth:`resuming`
    is entered, which is left before the shutdown's graces (one under way is a delivery:
    the graces wait for it)."""

    def __init__(self, resumer: Resumer) -> None:
        self.resumer = resumer
        self._loop = _Tasks()

    def start(self) -> None:
        self._loop.spawn(self.resumer.run(), "resume")

    @contextlib.asynccontextmanager
    async def resuming(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.resumer.stop()

    async def __aexit__(self, *exc: object) -> None:
        await self._loop.cancel()


@contextlib.contextmanager
def _signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` (where the loop can take signal handlers)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def _platform_starts(
    service: DigestService,
    settings: Settings,
    leadership: Leadership,
    ending: _Ending,
) -> PlatformStarts:
    """The platforms' starts: a platform that cannot be reached at start is retried meanwhile
    (not ready); its posts wait (the service leaves out what it lists) and catch up once it
    starts. A refusal after the start ends the run."""

    async def on_started(adapter: Adapter) -> None:
        # it missed what was posted while it was unreachable: catch up (on it alone, as the
        # other platforms have it already)
        if leadership.leading and settings.schedule.enabled and not ending.stop.is_set():
            await service.catch_up()

    starts = PlatformStarts(
        service,
        [],
        clock=service.clock,
        on_started=on_started,
        on_fatal=ending.refuse,
        stop_within=ending.budget.left,
    )
    service.unavailable = starts.waiting
    return starts


async def _watch_ledger(service: DigestService, settings: Settings, ending: _Ending) -> None:
    """Watch for the ledger's database deleted or replaced: admins alerted, the run ended."""

    async def on_lost(error: LedgerLost) -> None:
        ending.lost.append(error)
        await service.ledger_lost(error)
        ending.stop.set()

    watchdog = LedgerWatchdog(
        service.ledger,
        clock=service.clock,
        interval=settings.delivery.ledger_check_seconds,
        shown=settings.database_url,
        on_lost=on_lost,
    )
    await watchdog.run()


async def _hold(leadership: Leadership, service: DigestService, ending: _Ending) -> None:
    """Hold the leader's lease; once it is lost, cancel the deliveries and end the run."""
    await leadership.hold()
    ending.lost.append(
        LeadershipLost(
            "this process lost the leadership (another one leads now); stopped so "
            "that a supervisor restarts it as a standby"
        )
    )
    cancelled = await service.cancel_deliveries()
    if cancelled:
        log.error("stopped %d delivery(ies): no longer the leader", cancelled)
    ending.stop.set()


def _install_jobs(
    scheduler: AsyncIOScheduler, service: DigestService, settings: Settings, retention: RetentionJob
) -> None:
    """The leader's jobs: the daily post, publishing, readers' own times (when the schedule
    is enabled), the ledger's pruning, the platforms' own (:mod:`bots.periodic`), and a posted
    day's changed file, corrected (``corrections = "auto"``) or told to the admins, never
    silently."""
    if settings.schedule.enabled:
        service.poster.install(scheduler)
        service.publishing.install(scheduler)
        every = settings.schedule.personal_seconds
        install_personal(scheduler, service.deliver_personal, now=service.clock.now(), every=every)
    retention.install(scheduler)
    periodic.install(scheduler, service.platforms.values(), now=service.clock.now())
    if settings.schedule.corrections == "auto":
        _every(scheduler, AUTO_CORRECT_SECONDS, service.auto_correct, "auto-correct")
    else:
        _every(scheduler, AUTO_CORRECT_SECONDS, service.check_posted_files, "posted-files")
    # readers' counts (commands, buttons, searches, clicks) into the ledger, for the dashboard
    flush = service.engagement.flush
    _every(scheduler, ENGAGEMENT_FLUSH_SECONDS, flush, "usage-counts", service.ledger)


def _every(
    scheduler: AsyncIOScheduler,
    seconds: float,
    job: Callable[..., Awaitable[object]],
    name: str,
    *args: object,
) -> None:
    """``job(*args)`` every ``seconds``, one run at a time, missed runs run once (job ``name``)."""
    scheduler.add_job(
        job,
        "interval",
        args=list(args),
        seconds=seconds,
        id=name,
        max_instances=1,
        coalesce=True,
    )


@contextlib.asynccontextmanager
async def _scheduler(settings: Settings) -> AsyncIterator[AsyncIOScheduler]:
    """The run's scheduler, started (in the digest's zone, on the running loop), shut down on
    leaving (the shutdown's graces paused it: no job fires meanwhile)."""
    scheduler = AsyncIOScheduler(timezone=settings.zone, event_loop=asyncio.get_running_loop())
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=False)


@contextlib.asynccontextmanager
async def _retention(service: DigestService, settings: Settings) -> AsyncIterator[RetentionJob]:
    """The ledger's daily pruning (its job installed once this process leads), stopped on
    leaving (a pruning under way ends)."""
    job = retention_job(service, settings)
    try:
        yield job
    finally:
        await job.stop()


@contextlib.asynccontextmanager
async def _alerts_settled(service: DigestService, budget: _Budget) -> AsyncIterator[None]:
    """Leaving it waits, within half of what is left of the shutdown ``budget``, for the
    admins' alerts under way (a lost ledger's, an interrupted post's), before the adapters
    they go through close."""
    try:
        yield
    finally:
        await service.settle_alerts(within=budget.left() / 2)


def _log_running(service: DigestService, settings: Settings) -> None:
    names = ", ".join(service.platforms)
    if settings.schedule.enabled:
        log.info("digest-bot running on %s; next post %s", names, service.poster.next_post())
    else:
        log.info("digest-bot running on %s; the daily post is disabled", names)


async def _until_leading(leadership: Leadership, stop: asyncio.Event) -> bool:
    """Wait as a standby until this process leads (True) or is stopped first (False)."""
    leading = asyncio.create_task(leadership.wait_to_lead(), name="election")
    stopped = asyncio.create_task(stop.wait(), name="stop")
    try:
        await asyncio.wait((leading, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (leading, stopped):
            task.cancel()
        await asyncio.gather(leading, stopped, return_exceptions=True)
    error = leading.exception() if leading.done() and not leading.cancelled() else None
    if error is not None:
        raise error
    return leadership.leading and not stop.is_set()


def _metrics(settings: Settings) -> PrometheusMetrics | None:
    """The Prometheus sink when the HTTP endpoint is on (None: nothing is counted)."""
    if settings.http.listen is None:
        return None
    try:
        from bots.metrics import PrometheusMetrics
    except ImportError as exc:
        raise ConfigError(
            "the HTTP endpoint needs prometheus-client: pip install 'digest-bot[http]'",
            key="http.listen",
        ) from exc
    from bots import version

    return PrometheusMetrics(version=version())


@contextlib.asynccontextmanager
async def _endpoint(
    settings: Settings,
    service: DigestService,
    leadership: Leadership,
    starts: PlatformStarts,
    metrics: PrometheusMetrics | None,
) -> AsyncIterator[HttpEndpoint | None]:
    """The operator's HTTP endpoint (``[http] listen``; None when off), stopped on leaving."""
    address = settings.http.address
    if address is None:
        yield None
        return
    from bots.http import HttpEndpoint, Probe

    if metrics is not None:
        metrics.watch_ledger(lambda: service.ledger.health.failures)
        metrics.watch_waiting(service.resumer)
    probe = Probe(
        service,
        leadership,
        starts.started,
        metrics=metrics,
        scheduled=settings.schedule.enabled,
        waiting=starts.waiting,
    )
    routes: list[RouteInstaller] = []
    if settings.http.admin:  # the editor's dashboard at /admin/
        from bots import dashboard

        routes += dashboard.endpoint_routes(settings)
    if settings.analytics.track_links:  # /r/<token>: tracked links
        from bots import links

        routes += links.endpoint_routes(settings)
    if settings.http.site:  # the web archive at the root (last: it takes every other path)
        from bots.site_http import endpoint_routes

        routes += endpoint_routes(settings)
    endpoint = HttpEndpoint(probe, host=address[0], port=address[1], routes=routes)
    await endpoint.start()
    try:
        yield endpoint
    finally:
        await endpoint.stop()


class _Shutdown(contextlib.AbstractAsyncContextManager["_Shutdown"]):
    """The shutdown's graces: leaving it begins the :data:`SHUTDOWN_BUDGET_SECONDS` budget,
    adapters still connected (the parts entered before it are left after it, the scheduler's
    shut down, the alerts under way sent and the adapters stopped within what remains).

    No new triggers (the scheduler paused), and new commands are told to try again. A post
    under way gets :data:`SHUTDOWN_GRACE_SECONDS`, then is cancelled (the ledger keeps what it
    had not sent and the next start sends it); commands being answered get
    :data:`COMMAND_GRACE_SECONDS` (or as long as the post), then are cancelled and their users
    told to try again. Then nothing of ours may outlive the ledger: the catch-up
    (:attr:`catching_up`) and the poster end. A lost ledger's deliveries were cancelled when
    it was found.
    """

    def __init__(
        self,
        service: DigestService,
        scheduler: AsyncIOScheduler,
        in_flight: InFlight,
        ending: _Ending,
    ) -> None:
        self.service = service
        self.scheduler = scheduler
        self.in_flight = in_flight
        self.budget = ending.budget
        self.ending = ending
        #: the catch-up of the start, cancelled once the graces are over
        self.catching_up = _Tasks()

    async def __aexit__(self, *exc: object) -> None:
        service, in_flight, left = self.service, self.in_flight, self.budget.left
        self.budget.begin()
        self.scheduler.pause()
        in_flight.close()
        # both graces run at once; a /repost is a delivery: it ends with the deliveries' grace
        answering = asyncio.ensure_future(in_flight.idle(COMMAND_GRACE_SECONDS))
        finished = bool(self.ending.lost) or await service.idle(SHUTDOWN_GRACE_SECONDS)
        # a ledger that does not answer (a full disk, a server gone) must not hold the stop:
        # its retries end now, and so do the resumes waiting for it
        service.ledger.stop_retrying()
        cancelled = await service.cancel_deliveries()
        if not finished:
            log.warning(
                "stopped %d delivery(ies) still running after %.0f s; what they had not "
                "sent is in the ledger and the next start sends it",
                cancelled,
                SHUTDOWN_GRACE_SECONDS,
            )
        if not await answering:
            cut = await in_flight.cancel(within=min(1.0, left() / 4))
            log.warning("cancelled %d command(s) still being answered; telling them to retry", cut)
        await in_flight.apologise(within=min(APOLOGY_SECONDS, left() / 2))
        await self.catching_up.cancel()
        await service.poster.stop()
