"""`digest-bot correct`: edit a posted day's messages in place to show its corrected issue."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from bots import registry
from digest_core.settings import Settings

EXIT_OK, EXIT_FAILED = 0, 1


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The options of ``correct`` (its line in ``--help`` is in :data:`bots.cli.COMMANDS`)."""
    from bots.cli.common import parse_date

    p.description = (
        "Edit every message already posted for the day (channels and subscribers) "
        "to show the issue's current revision, marked 已更正 / corrected HH:MM. Only changed "
        "messages are edited; added parts are sent after the last, surplus ones deleted. A run "
        "cut short is resumed by running it again; with nothing to change it changes nothing. "
        "Send-only platforms (work-chat webhooks) cannot edit: use `post --force` there. "
        "Mail cannot be edited either: --notify-email mails its readers a short notice."
    )
    p.add_argument("--date", type=parse_date, help="issue date YYYY-MM-DD (default: today)")
    p.add_argument("--platform", choices=registry.names(), help="only this one")
    p.add_argument(
        "--notify-email",
        action="store_true",
        help="also mail a short, linked correction notice to the email readers who got an "
        "earlier revision (once each; mail cannot be edited, and without this flag no mail "
        "is sent)",
    )
    p.set_defaults(handler=cmd_correct)


def cmd_correct(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    return asyncio.run(_correct(args, settings))


async def _correct(args: argparse.Namespace, settings: Settings) -> int:
    from bots.runtime import open_service
    from bots.starting import all_running

    if args.notify_email and not _mails(settings):
        print("--notify-email: the email platform is not configured", file=sys.stderr)
        return EXIT_FAILED
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
    ok = all(r.ok for r in reports)
    if args.notify_email:
        ok = await _notify_email(settings, day) and ok
    return EXIT_OK if ok else EXIT_FAILED


def _mails(settings: Settings) -> bool:
    """The email platform is configured (``--notify-email`` has readers to mail)."""
    from bots.email.settings import EmailSettings

    section = settings.platforms.get("email")
    return isinstance(section, EmailSettings) and section.configured


async def _notify_email(settings: Settings, day: dt.date) -> bool:
    """``--notify-email``: the notice of ``digest-bot email notify-correction`` (through the
    ledger: once per reader who got an earlier revision); True when all of them have it."""
    from bots.cli.email import notify_correction

    sent, readers = await notify_correction(settings, day)
    print(f"correction notice: sent {sent} of {readers} readers")
    return sent == readers
