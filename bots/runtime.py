"""Assembling and running the bot: one process, one event loop, one scheduler, every platform."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bots import registry
from bots.inflight import InFlight
from bots.registry import BuildContext
from bots.starting import PlatformStarts
from digest_core.archive import Archive
from digest_core.clock import Clock, SystemClock
from digest_core.delivery import Backoff, DeliveryEngine, Ledger
from digest_core.delivery.retention import RetentionJob, RetentionPolicy
from digest_core.delivery.watchdog import LedgerWatchdog
from digest_core.errors import ConfigError, LeadershipLost, LedgerLost
from digest_core.leadership import Leadership, receives_as_standby
from digest_core.metrics import NULL_METRICS, MetricsSink
from digest_core.personal import install as install_personal
from digest_core.port import Adapter
from digest_core.publishing import PublishingConfig
from digest_core.scheduling import ScheduleConfig
from digest_core.service import DigestService
from digest_core.settings import Settings

if TYPE_CHECKING:
    from bots.http import HttpEndpoint, RouteInstaller
    from bots.metrics import PrometheusMetrics

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
    targets), or the fallback (the console) when none is.

    ``in_flight`` tracks the command handlers of all of them (each makes its own without).
    ``option`` is how the user asked for ``only`` (``--only`` of ``run``, ``--platform`` of
    ``post``), for the error that says what it needs.

    Raises:
        ConfigError: ``only`` names no platform, or one its settings do not configure, or
            a configured platform's SDK is not installed.
    """
    if only is not None and only not in registry.names():
        raise ConfigError(f"unknown platform {only!r} (choose from {', '.join(registry.names())})")
    ctx = BuildContext(clock=clock, stdin=stdin, out=out, in_flight=in_flight)
    adapters: list[Adapter] = []
    fallbacks: list[registry.PlatformSpec] = []
    for spec in registry.specs():
        if spec.fallback:
            fallbacks.append(spec)
            if only != spec.name:
                continue
        if only not in (None, spec.name):
            continue
        section = settings.platform(spec.name) if spec.settings is not None else None
        try:
            adapter = spec.build(section, ctx)
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
            built = spec.build(None, ctx)
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
    commands do; ``option`` is :func:`build_adapters`'.

    Raises:
        ConfigError: the archive folder is missing (:func:`check_archive_dir`), or see
            :func:`build_adapters`.
    """
    check_archive_dir(settings)
    clock = clock or SystemClock()
    adapters = build_adapters(
        settings,
        only=only,
        option=option,
        clock=clock,
        stdin=stdin,
        out=out,
        in_flight=in_flight,
    )
    if settings.site.base_url is not None:  # posts and replies link to the web archive
        for adapter in adapters:
            adapter.post_options = replace(adapter.post_options, site_url=settings.site.base_url)
    d = settings.delivery
    async with Ledger.open(
        settings.database_url,
        clock=clock,
        new_ledger=new_ledger,
        upgrade=settings.ledger.auto_upgrade,
    ) as ledger:
        engine = DeliveryEngine(
            ledger,
            clock=clock,
            backoff=Backoff(
                base=d.backoff_base_seconds, cap=d.backoff_max_seconds, max_attempts=d.max_attempts
            ),
            metrics=metrics,
            max_wait=d.max_wait_seconds,
        )
        s = settings.schedule
        service = DigestService(
            archive=Archive(settings.archive_dir),
            ledger=ledger,
            engine=engine,
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
        await service.load()
        service.resumer.check_every = d.resume_check_seconds
        yield service


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
    """Run until SIGINT/SIGTERM (or ``stop`` is set): schedule, catch-up, commands.

    Of the processes sharing the ledger, one leads (:mod:`digest_core.leadership`): this one
    waits as a standby until it leads, then starts its platforms, the schedule and the
    catch-up. A standby starts only the adapters that can answer commands without holding a
    connection of their own (``standby_receives``: Telegram in webhook mode). The HTTP
    endpoint (``[http] listen``) runs throughout.

    Stopping takes at most :data:`SHUTDOWN_BUDGET_SECONDS`, whatever is being answered: see
    :func:`_shut_down`.

    Raises:
        LeadershipLost: this process led and lost the leader's lease (another leads now):
            its deliveries were cancelled at once and it stopped.
        LedgerLost: the ledger's database was deleted or replaced while running (seen within
            ``delivery.ledger_check_seconds``): deliveries were stopped, admins alerted.
        LedgerError: the ledger cannot be opened, or is not the one its marker records.
        ConfigError: a platform refused its configuration (a revoked token), at start or
            when one that could not be reached at start answered (:mod:`bots.starting`).
    """
    stop = stop or asyncio.Event()
    in_flight = InFlight()
    lost: list[LedgerLost | LeadershipLost] = []
    refused: list[Exception] = []  # a platform that cannot start, found after the start
    metrics = _metrics(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with open_service(
        settings,
        only=only,
        clock=clock,
        stdin=stdin,
        out=out,
        in_flight=in_flight,
        new_ledger=new_ledger,
        metrics=metrics or NULL_METRICS,
    ) as service:
        # the search index is built off the loop now, not by the first reader's /search
        service.archive.index_in_background()
        service.resume_after_trouble = True  # a post cut by ledger trouble goes on by itself
        leadership = Leadership(
            service.ledger, clock=service.clock, lease_seconds=settings.leader.lease_seconds
        )
        started: list[Adapter] = []

        async def on_started(adapter: Adapter) -> None:
            # it missed what was posted while it was unreachable: catch up (on it alone,
            # as the other platforms have it already)
            if leadership.leading and settings.schedule.enabled and not stop.is_set():
                await service.catch_up()

        def on_fatal(error: Exception) -> None:
            refused.append(error)
            stop.set()

        # a platform that cannot be reached at start is retried meanwhile (not ready); its
        # posts wait (the service leaves out what it lists) and catch up once it starts
        starts = PlatformStarts(
            service, started, clock=service.clock, on_started=on_started, on_fatal=on_fatal
        )
        service.unavailable = starts.waiting
        endpoint = await _start_endpoint(
            settings, service, leadership, started, metrics, waiting=starts.waiting
        )

        async def on_lost(error: LedgerLost) -> None:
            lost.append(error)
            await service.ledger_lost(error)
            stop.set()

        watchdog = asyncio.create_task(
            LedgerWatchdog(
                service.ledger,
                clock=service.clock,
                interval=settings.delivery.ledger_check_seconds,
                shown=settings.database_url,
                on_lost=on_lost,
            ).run(),
            name="ledger-watchdog",
        )
        scheduler = AsyncIOScheduler(timezone=settings.zone, event_loop=loop)
        scheduler.start()  # (no job until this process leads)
        retention = retention_job(service, settings)
        catch_up: asyncio.Task[object] | None = None
        holding: asyncio.Task[None] | None = None
        resuming: asyncio.Task[None] | None = None

        async def hold() -> None:
            await leadership.hold()
            lost.append(
                LeadershipLost(
                    "this process lost the leadership (another one leads now); stopped so "
                    "that a supervisor restarts it as a standby"
                )
            )
            cancelled = await service.cancel_deliveries()
            if cancelled:
                log.error("stopped %d delivery(ies): no longer the leader", cancelled)
            stop.set()

        try:
            for adapter in service.platforms.values():
                if receives_as_standby(adapter):
                    await starts.start(adapter)
            if not await _until_leading(leadership, stop):
                return
            holding = asyncio.create_task(hold(), name="leadership")
            for adapter in service.platforms.values():
                await starts.start(adapter)
            if settings.schedule.enabled:
                service.poster.install(scheduler)
                service.publishing.install(scheduler)
                install_personal(
                    scheduler, service.deliver_personal, now=service.clock.now(),
                    every=settings.schedule.personal_seconds,
                )  # fmt: skip
            retention.install(scheduler)
            if settings.schedule.corrections == "auto":
                scheduler.add_job(
                    service.auto_correct, "interval", seconds=AUTO_CORRECT_SECONDS,
                    id="auto-correct", max_instances=1, coalesce=True,
                )  # fmt: skip
            else:  # a posted day's file that changes is told to the admins, never silently
                scheduler.add_job(
                    service.check_posted_files, "interval", seconds=AUTO_CORRECT_SECONDS,
                    id="posted-files", max_instances=1, coalesce=True,
                )  # fmt: skip
            # what a delivery left waiting is sent when due, queued alerts once they can be
            resuming = asyncio.create_task(service.resumer.run(), name="resume")
            names = ", ".join(service.platforms)
            if settings.schedule.enabled:
                log.info(
                    "digest-bot running on %s; next post %s", names, service.poster.next_post()
                )
                catch_up = asyncio.create_task(service.catch_up(), name="catch-up")
            else:
                log.info("digest-bot running on %s; the daily post is disabled", names)
            await stop.wait()
            log.info("stopping")
        finally:
            watchdog.cancel()  # (done already if it found the ledger lost)
            tasks = [watchdog] if holding is None else [watchdog, holding]
            if holding is not None and not holding.done():
                holding.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await starts.stop()  # (a platform still unreachable is not started now)
            await retention.stop()  # before the ledger closes (the scheduler is shut below)
            service.resumer.stop()  # (a resumed post under way is one of the deliveries)
            await _shut_down(service, scheduler, started, in_flight, catch_up, lost=bool(lost))
            if resuming is not None:
                resuming.cancel()
                await asyncio.gather(resuming, return_exceptions=True)
            if endpoint is not None:
                await endpoint.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
    if lost:
        raise lost[0]
    if refused:
        raise refused[0]


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
    from bots.cli import version

    return PrometheusMetrics(version=version())


async def _start_endpoint(
    settings: Settings,
    service: DigestService,
    leadership: Leadership,
    started: list[Adapter],
    metrics: PrometheusMetrics | None,
    *,
    waiting: dict[str, str],
) -> HttpEndpoint | None:
    address = settings.http.address
    if address is None:
        return None
    from bots.http import HttpEndpoint, Probe

    if metrics is not None:
        metrics.watch_ledger(lambda: service.ledger.health.failures)
        metrics.watch_waiting(service.resumer)
    probe = Probe(
        service,
        leadership,
        started,
        metrics=metrics,
        scheduled=settings.schedule.enabled,
        waiting=waiting,
    )
    routes: list[RouteInstaller] = []
    if settings.http.site:  # the web archive at the root
        from bots.site_http import endpoint_routes

        routes = endpoint_routes(settings)
    endpoint = HttpEndpoint(probe, host=address[0], port=address[1], routes=routes)
    await endpoint.start()
    return endpoint


async def _shut_down(
    service: DigestService,
    scheduler: AsyncIOScheduler,
    started: list[Adapter],
    in_flight: InFlight,
    catch_up: asyncio.Task[object] | None,
    *,
    lost: bool = False,
) -> None:
    """Stop within :data:`SHUTDOWN_BUDGET_SECONDS`, adapters still connected until the end.

    No new triggers, and new commands are told to try again. A post under way gets
    :data:`SHUTDOWN_GRACE_SECONDS`, then is cancelled (the ledger keeps what it had not sent
    and the next start sends it); commands being answered get :data:`COMMAND_GRACE_SECONDS`
    (or as long as the post), then are cancelled and their users told to try again. Then
    nothing of ours may outlive the ledger: the catch-up and the poster end, and each
    adapter closes within what is left of the budget. A ``lost`` ledger's deliveries were
    cancelled when it was found; its alerts go out before the adapters close.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_BUDGET_SECONDS

    def left() -> float:
        return max(0.0, deadline - loop.time())

    scheduler.pause()
    in_flight.close()
    # both graces run at once; a /repost is a delivery: it ends with the deliveries' grace
    answering = asyncio.ensure_future(in_flight.idle(COMMAND_GRACE_SECONDS))
    finished = lost or await service.idle(SHUTDOWN_GRACE_SECONDS)
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
    if catch_up is not None:
        catch_up.cancel()
        await asyncio.gather(catch_up, return_exceptions=True)
    await service.poster.stop()
    scheduler.shutdown(wait=False)
    await service.settle_alerts(within=left() / 2)
    for adapter in reversed(started):
        try:
            await asyncio.wait_for(adapter.stop(), timeout=max(left(), 0.5))
        except TimeoutError:
            log.warning("%s did not stop within the shutdown budget; left to close", adapter.name)
        except Exception:
            log.exception("stopping %s failed", adapter.name)
