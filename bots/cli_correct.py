"""`digest-bot correct`: edit a posted day's messages in place to show its corrected issue."""

from __future__ import annotations

import argparse
import sys

from bots import registry
from digest_core.settings import Settings

EXIT_OK, EXIT_FAILED = 0, 1


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The options of ``correct`` (its line in ``--help`` is in :data:`bots.cli.COMMANDS`)."""
    from bots.cli import parse_date

    p.description = (
        "Edit every message already posted for the day (channels and subscribers) "
        "to show the issue's current revision, marked 已更正 / corrected HH:MM. Only changed "
        "messages are edited; added parts are sent after the last, surplus ones deleted. A run "
        "cut short is resumed by running it again; with nothing to change it changes nothing. "
        "Send-only platforms (work-chat webhooks) cannot edit: use `post --force` there."
    )
    p.add_argument("--date", type=parse_date, help="issue date YYYY-MM-DD (default: today)")
    p.add_argument("--platform", choices=registry.names(), help="only this one")
    p.set_defaults(handler=cmd_correct)


def cmd_correct(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    return asyncio.run(_correct(args, settings))


async def _correct(args: argparse.Namespace, settings: Settings) -> int:
    from bots.runtime import open_service
    from bots.starting import all_running

    async with open_service(settings, only=args.platform) as service:
        day = args.date or service.poster.today()
        service.archive.on(day)  # IssueNotFound: one line, before anything connects
        async with all_running(service.platforms.values(), service, receive=False):
            reports = await service.correct(day)
    if not reports:
        print("nothing to correct: no platform is configured", file=sys.stderr)
        return EXIT_FAILED
    for report in reports:
        print(report.describe())
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED
