"""Assembling and running the bot: one process, one event loop, one scheduler, every platform."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import logging
import signal
from collections.abc import AsyncIterator
from typing import TextIO

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from digest_core.archive import Archive
from digest_core.clock import Clock, SystemClock
from digest_core.delivery import Backoff, DeliveryEngine, Ledger
from digest_core.errors import ConfigError
from digest_core.scheduling import ScheduleConfig
from digest_core.service import Adapter, DigestService
from digest_core.settings import Settings

log = logging.getLogger(__name__)

PLATFORMS = ("console", "telegram", "discord")
#: (settings section and extra, adapter module, adapter class, SDK) of the chat platforms
_CHAT_PLATFORMS = (
    ("telegram", "bots.telegram", "TelegramAdapter", "python-telegram-bot"),
    ("discord", "bots.discord", "DiscordAdapter", "discord.py"),
)
#: how long a shutdown waits for a delivery under way before leaving it to the next start
SHUTDOWN_GRACE_SECONDS = 10.0


def build_adapters(
    settings: Settings,
    *,
    only: str | None = None,
    clock: Clock,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> list[Adapter]:
    """The platforms to run: each one whose token is set, or the console when none is.

    Raises:
        ConfigError: ``only`` names a platform without a token, or its SDK is not installed.
    """
    if only is not None and only not in PLATFORMS:
        raise ConfigError(f"unknown platform {only!r} (choose from {', '.join(PLATFORMS)})")
    adapters: list[Adapter] = []
    for name, module, cls, sdk in _CHAT_PLATFORMS:
        section = getattr(settings, name)
        token = section.resolved_token()
        if only not in (None, name):
            continue
        if token is None:
            if only == name:
                raise ConfigError(
                    f"--only {name} needs a token: set DIGEST_BOT_{name.upper()}__TOKEN "
                    f"or {name}.token_file",
                    key=f"{name}.token",
                )
            continue
        try:
            adapter_class = getattr(importlib.import_module(module), cls)
        except ImportError as exc:
            raise ConfigError(
                f"a {name} token is set but {sdk} is not installed: "
                f"pip install 'digest-bot[{name}]'"
            ) from exc
        adapters.append(adapter_class(section, token=token, clock=clock))
    if only == "console" or not adapters:
        from bots.console import ConsolePlatform

        adapters.append(ConsolePlatform(out=out, stdin=stdin))
    return adapters


@contextlib.asynccontextmanager
async def open_service(
    settings: Settings,
    *,
    only: str | None = None,
    clock: Clock | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> AsyncIterator[DigestService]:
    """The service with its ledger open and its adapters built (not yet started)."""
    clock = clock or SystemClock()
    adapters = build_adapters(settings, only=only, clock=clock, stdin=stdin, out=out)
    d = settings.delivery
    async with Ledger.open(settings.database_url, clock=clock) as ledger:
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
) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set): schedule, catch-up, commands."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with open_service(settings, only=only, clock=clock, stdin=stdin, out=out) as service:
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
            # no new triggers; a post under way gets the grace period, then is cancelled (the
            # ledger keeps what it had not sent); then nothing of ours may outlive the ledger
            scheduler.pause()
            if not await service.idle(SHUTDOWN_GRACE_SECONDS):
                cancelled = await service.cancel_deliveries()
                log.warning(
                    "stopped %d delivery(ies) still running after %.0f s; what they had not "
                    "sent is in the ledger and the next start sends it",
                    cancelled,
                    SHUTDOWN_GRACE_SECONDS,
                )
            if catch_up is not None:
                catch_up.cancel()
                await asyncio.gather(catch_up, return_exceptions=True)
            await service.poster.stop()
            scheduler.shutdown(wait=False)
            for adapter in reversed(started):
                try:
                    await adapter.stop()
                except Exception:
                    log.exception("stopping %s failed", adapter.name)
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
