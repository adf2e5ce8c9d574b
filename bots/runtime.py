"""Assembling and running the bot: one process, one event loop, one scheduler, every platform."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import signal
from collections.abc import AsyncIterator
from typing import TextIO

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bots import registry
from bots.inflight import InFlight
from bots.registry import BuildContext
from digest_core.archive import Archive
from digest_core.clock import Clock, SystemClock
from digest_core.delivery import Backoff, DeliveryEngine, Ledger
from digest_core.delivery.watchdog import LedgerWatchdog
from digest_core.errors import ConfigError, LedgerLost
from digest_core.port import Adapter
from digest_core.scheduling import ScheduleConfig
from digest_core.service import DigestService
from digest_core.settings import Settings

log = logging.getLogger(__name__)

#: a shutdown, from the signal to the last adapter closed, takes at most this long
SHUTDOWN_BUDGET_SECONDS = 10.0
#: of which it waits this long for a delivery under way before leaving it to the next start
SHUTDOWN_GRACE_SECONDS = 6.0
#: and this long for commands being answered (as long as a delivery is still finishing)
COMMAND_GRACE_SECONDS = 3.0
#: then, at most this long telling the users of cancelled commands to try again
APOLOGY_SECONDS = 1.5


def build_adapters(
    settings: Settings,
    *,
    only: str | None = None,
    clock: Clock,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    in_flight: InFlight | None = None,
) -> list[Adapter]:
    """The platforms to run, in registry order: each one its settings configure (a token,
    targets), or the fallback (the console) when none is.

    ``in_flight`` tracks the command handlers of all of them (each makes its own without).

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
                raise ConfigError(f"--only {spec.name} {spec.needs}", key=spec.needs_key)
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
    clock: Clock | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    in_flight: InFlight | None = None,
    new_ledger: bool = False,
) -> AsyncIterator[DigestService]:
    """The service with its ledger open and its adapters built (not yet started).

    ``new_ledger`` accepts an empty (or another) ledger where the marker beside it records
    the one the bot had (see :meth:`Ledger.open`).
    """
    clock = clock or SystemClock()
    adapters = build_adapters(
        settings, only=only, clock=clock, stdin=stdin, out=out, in_flight=in_flight
    )
    d = settings.delivery
    async with Ledger.open(settings.database_url, clock=clock, new_ledger=new_ledger) as ledger:
        engine = DeliveryEngine(
            ledger,
            clock=clock,
            backoff=Backoff(
                base=d.backoff_base_seconds, cap=d.backoff_max_seconds, max_attempts=d.max_attempts
            ),
        )
        s = settings.schedule
        yield DigestService(
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
            ),
            platforms=adapters,
        )


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

    Stopping takes at most :data:`SHUTDOWN_BUDGET_SECONDS`, whatever is being answered: see
    :func:`_shut_down`.

    Raises:
        LedgerLost: the ledger's database was deleted or replaced while running (seen within
            ``delivery.ledger_check_seconds``): deliveries were stopped, admins alerted.
        LedgerError: the ledger cannot be opened, or is not the one its marker records.
    """
    stop = stop or asyncio.Event()
    in_flight = InFlight()
    lost: list[LedgerLost] = []
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
    ) as service:

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
        if settings.schedule.enabled:
            service.poster.install(scheduler)
        scheduler.start()
        started: list[Adapter] = []
        catch_up: asyncio.Task[object] | None = None
        try:
            for adapter in service.platforms.values():
                await adapter.start(service)
                started.append(adapter)
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
            await asyncio.gather(watchdog, return_exceptions=True)
            await _shut_down(service, scheduler, started, in_flight, catch_up, lost=bool(lost))
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
    if lost:
        raise lost[0]


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
    if not lost and not await service.idle(SHUTDOWN_GRACE_SECONDS):
        cancelled = await service.cancel_deliveries()
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
