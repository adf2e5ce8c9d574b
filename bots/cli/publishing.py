"""`digest-bot preview --to-admins`: the next issue's preview, sent privately to the admins."""

from __future__ import annotations

import argparse
import logging
import sys

from digest_core.errors import IssueNotFound
from digest_core.settings import Settings

log = logging.getLogger(__name__)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The ``--to-admins`` option of ``digest-bot preview``."""
    parser.add_argument(
        "--to-admins",
        action="store_true",
        help="send the preview (default date: the next issue) privately to the configured "
        "admins of every platform, exactly as readers will get it; nothing is recorded as a "
        "delivery",
    )


def cmd_preview_to_admins(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when at least one admin got the preview, else 1 (the reason on stderr)."""
    from bots.cli.common import EXIT_FAILED, EXIT_OK, run_async

    async def send() -> int:
        from bots.runtime import open_service
        from bots.starting import all_running

        async with open_service(settings) as service:
            day = args.date or service.publishing.next_day()
            async with all_running(service.platforms.values(), service, receive=False):
                try:
                    sent = await service.publishing.preview_to_admins(day)
                except IssueNotFound as exc:
                    print(f"digest-bot: preview --to-admins: {exc}", file=sys.stderr)
                    return EXIT_FAILED
        for platform, count in sent.items():
            print(f"{platform}: preview of {day} sent to {count} admin(s)")
        if not any(sent.values()):
            print(
                "digest-bot: no admin got the preview; configure [telegram] admins or "
                "[discord] admin_users (and have them start a chat with the bot)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        return EXIT_OK

    return run_async(send())
