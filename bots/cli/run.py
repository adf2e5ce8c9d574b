"""`digest-bot run`, `post`, `reactivate` and `status`: the commands that open the service."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import TYPE_CHECKING

from bots import registry
from bots.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, parse_date, run_async
from digest_core.platform import Target, TargetKind

if TYPE_CHECKING:
    from digest_core.delivery import PartOutcome
    from digest_core.settings import Settings


def configure_run(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The options of ``run``."""
    p.add_argument("--only", choices=registry.names(), help="run just this platform")
    p.add_argument(
        "--new-ledger",
        action="store_true",
        help="accept an empty (or another) ledger where the marker beside it records the one "
        "the bot had; without it such a start is refused (restore the backup instead)",
    )
    p.set_defaults(handler=cmd_run)


def configure_post(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The options of ``post``."""
    p.add_argument("--date", type=parse_date, help="issue date YYYY-MM-DD (default: today)")
    p.add_argument("--platform", choices=registry.names(), help="only this one")
    p.add_argument("--target", metavar="ID", help="only this chat/channel id")
    p.add_argument("--force", action="store_true", help="send everything again, as a new delivery")
    p.set_defaults(handler=cmd_post)


def configure_reactivate(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The argument of ``reactivate``."""
    p.add_argument("target", metavar="PLATFORM:ID", help="e.g. telegram:-1001234567890")
    p.set_defaults(handler=cmd_reactivate)


def configure_status(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``status`` has no options of its own."""
    p.set_defaults(handler=cmd_status, reports=True)


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    # The bot's modules (the ledger's SQLAlchemy, the scheduler, every service) are imported
    # here: what they build lives as long as the process, so the collector's passes over it
    # while it is built find nothing (about 4% of the start). Collection is off while they
    # are imported, and what they built is then frozen out of later full passes (until the
    # first delivery's end gives it back: digest_core.heap). It is frozen before
    # collection is on again: the first allocation after gc.enable() would otherwise collect
    # the youngest generation, which holds all of it (25 ms of CPU before the bot is ready,
    # benchmarks/startup.py, December 2026).
    gc.disable()
    try:
        from bots.runtime import run
        from digest_core.heap import start_up_frozen

        with start_up_frozen():
            gc.enable()
            run_async(run(settings, only=args.only, new_ledger=args.new_ledger))
    finally:
        gc.enable()
    return EXIT_OK


def cmd_post(args: argparse.Namespace, settings: Settings) -> int:
    return run_async(_post(args, settings))


async def _post(args: argparse.Namespace, settings: Settings) -> int:
    from bots.runtime import open_service
    from bots.starting import all_running

    async with open_service(settings, only=args.platform, option="--platform") as service:
        day = args.date or service.poster.today()
        issue = service.archive.on(day)
        async with all_running(service.platforms.values(), service, receive=False):
            progress = _Progress(enabled=sys.stderr.isatty())
            reports = await service.post(
                issue.date,
                only_target=args.target,
                force=args.force,
                progress=progress.update,
            )
            progress.close()
            # "sent 0" says why: already delivered at …, and that --force sends it again
            lines = [await service.describe(r, force="--force") for r in reports]
    if not reports:
        print("nothing to post: no targets configured", file=sys.stderr)
        return EXIT_FAILED
    for line in lines:
        print(line)
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED


class _Progress:
    """A one-line progress counter on a terminal; silent otherwise."""

    def __init__(self, *, enabled: bool):
        self.enabled = enabled
        self.done = 0
        self.failed = 0
        self.unknown = 0

    def update(self, outcome: PartOutcome) -> None:
        from digest_core.delivery import PartState

        self.done += 1
        if outcome.state is PartState.UNKNOWN:
            self.unknown += 1  # it may have arrived: not "not sent"
        elif outcome.state is not PartState.SENT:
            self.failed += 1
        if self.enabled:
            unknown = f", {self.unknown} outcome unknown" if self.unknown else ""
            sys.stderr.write(f"\r{self.done} parts done, {self.failed} not sent{unknown}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            sys.stderr.write("\n")


def cmd_reactivate(args: argparse.Namespace, settings: Settings) -> int:
    platform, _, target_id = args.target.rpartition(":")
    if not platform or not target_id:
        print("digest-bot: give the target as PLATFORM:ID, e.g. telegram:-100123", file=sys.stderr)
        return EXIT_USAGE
    return run_async(_reactivate(settings, platform, target_id))


async def _reactivate(settings: Settings, platform: str, target_id: str) -> int:
    from bots.runtime import open_service

    async with open_service(settings) as service:
        target = Target(platform, target_id, TargetKind.CHANNEL)
        changed = await service.ledger.reactivate(target)
    outcome = "active again" if changed else "was not deactivated"
    print(f"{platform}:{target_id}: {outcome}")
    return EXIT_OK if changed else EXIT_FAILED


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    return run_async(_status(settings))


async def _status(settings: Settings) -> int:
    from bots.runtime import open_service
    from digest_core.service.leadership import describe_leader

    async with open_service(settings) as service:
        print(await service.status())
        print(await describe_leader(service.ledger))
    return EXIT_OK
