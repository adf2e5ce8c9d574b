"""The ``digest-bot doctor`` command: run :mod:`bots.doctor`'s checks and print the table."""

from __future__ import annotations

import argparse
import asyncio
import logging

from digest_core.settings import Settings

log = logging.getLogger(__name__)


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``doctor`` has no options of its own (its line in ``--help``: :data:`bots.cli.COMMANDS`)."""
    p.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from bots.doctor import Status, format_table, run_checks

    checks = asyncio.run(run_checks(settings))
    print(format_table(checks))
    return 1 if any(c.status is Status.FAIL for c in checks) else 0
