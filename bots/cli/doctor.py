"""The ``digest-bot doctor`` command: the core's checks (:mod:`bots.doctor`) and each configured
platform's own (its spec's ``doctor``, from the registry), run and printed as a table."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib
import importlib.util
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from bots import registry
from bots.doctor import (
    Check,
    PlatformChecks,
    Status,
    archive_check,
    config_check,
    fail,
    format_table,
    kernel_clock_check,
    ledger_check,
    warn,
)
from digest_core.settings import Settings

if TYPE_CHECKING:
    from pydantic import BaseModel

log = logging.getLogger(__name__)


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``doctor`` has no options of its own (its line in ``--help``: :data:`bots.cli.COMMANDS`)."""
    p.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    checks = asyncio.run(run_checks(settings))
    print(format_table(checks))
    return 1 if any(c.status is Status.FAIL for c in checks) else 0


def platform_checkers() -> Iterable[tuple[str, PlatformChecks]]:
    """Each platform declaring checks, with its checks function (imported now)."""
    for declared in registry.specs():
        if declared.doctor is None:
            continue
        if declared.sdk_module and importlib.util.find_spec(declared.sdk_module) is None:
            continue
        module, _, function = declared.doctor.partition(":")
        yield declared.name, getattr(importlib.import_module(module), function)


async def run_checks(
    settings: Settings, *, now: Callable[[], dt.datetime] | None = None
) -> list[Check]:
    """Every check, in table order. ``now`` is the clock compared with the servers'."""
    now = now or (lambda: dt.datetime.now(dt.UTC))
    checks = [config_check(settings), *archive_check(settings), await ledger_check(settings)]
    configured = 0
    for name, checker in platform_checkers():
        section: BaseModel = settings.platform(name)
        try:
            found = await checker(section, now=now)
        except Exception as exc:  # one platform's bug must not hide the others' results
            from bots.network import network_reason

            reason = network_reason(exc)
            if reason is None:
                log.exception("doctor: %s checks failed", name)
                reason = f"{type(exc).__name__}: {exc}"
            found = [fail(name, "api", f"cannot check: {reason}", "check the network")]
        configured += bool(found)
        checks.extend(found)
    if not any(c.name == "clock" for c in checks):  # no server's Date header to compare with
        checks.append(kernel_clock_check())
    if not configured:
        checks.append(
            warn(
                "platforms",
                "configured",
                "no platform is configured: run would use the console",
                "set DIGEST_BOT_TELEGRAM__TOKEN or DIGEST_BOT_DISCORD__TOKEN and channels",
            )
        )
    return checks
