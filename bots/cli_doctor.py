"""The ``digest-bot doctor`` command: run :mod:`bots.doctor`'s checks and print the table."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from digest_core.settings import Settings

log = logging.getLogger(__name__)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``doctor`` to the CLI's subcommands."""
    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="check config, archive, ledger, tokens, channel rights, webhook and clock; "
        "print a table with the fix for each failure (exit 1 if any fails)",
    )
    p.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from bots.doctor import Status, format_table, run_checks

    checks = asyncio.run(run_checks(settings))
    print(format_table(checks))
    return 1 if any(c.status is Status.FAIL for c in checks) else 0
