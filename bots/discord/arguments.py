"""`digest-bot discord …` arguments, kept apart from discord.py so that the other commands of
the CLI start without importing it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from digest_core.port import Settings


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``discord sync [--guild ID]`` and ``discord invite [--client-id ID]`` under ``discord``
    (:data:`bots.cli.PLATFORM_COMMANDS`)."""
    sub = p.add_subparsers(title="discord commands", metavar="ACTION", required=True)

    s = sub.add_parser(
        "sync",
        parents=[common],
        help="register the slash commands with Discord (after install or upgrade), then exit",
    )
    s.add_argument(
        "--guild",
        type=int,
        metavar="ID",
        help="only in this server: instant, for testing (global commands can take a while)",
    )
    s.set_defaults(handler=_sync)

    i = sub.add_parser(
        "invite", parents=[common], help="print the link that adds the bot to a server"
    )
    i.add_argument(
        "--client-id",
        type=int,
        metavar="ID",
        help="the application id (default: ask Discord with the configured token)",
    )
    i.set_defaults(handler=_invite)


def _sync(args: argparse.Namespace, settings: Settings) -> int:
    from bots.discord.cli import cmd_sync

    return cmd_sync(args, settings)


def _invite(args: argparse.Namespace, settings: Settings) -> int:
    from bots.discord.cli import cmd_invite

    return cmd_invite(args, settings)
