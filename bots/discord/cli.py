"""`digest-bot discord sync|invite`: register the slash commands, print the invite link."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import discord

from bots.discord.adapter import point_discord_py_at
from bots.discord.client import DigestClient
from bots.discord.settings import DiscordSettings
from bots.network import network_reason
from digest_core.port import ConfigError, DigestError, Settings

log = logging.getLogger(__name__)

#: What the bot needs in a channel: see it, post (in a forum: create posts), post in threads
#: (a forum post's later messages), open a thread on an issue's first message
#: (``thread_per_issue``), and embeds that render. (Slash commands and buttons need no
#: permission; the applications.commands scope covers them.)
#: https://discord.com/developers/docs/topics/permissions
BOT_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    create_public_threads=True,
    embed_links=True,
)
#: OAuth2 scopes of the invite: the bot user, and its slash commands.
INVITE_SCOPES = ("bot", "applications.commands")


def invite_url(client_id: int) -> str:
    """The OAuth2 URL that adds the bot with :data:`INVITE_SCOPES` and :data:`BOT_PERMISSIONS`."""
    return discord.utils.oauth_url(client_id, permissions=BOT_PERMISSIONS, scopes=INVITE_SCOPES)


def _quiet_sdk(settings: Settings) -> None:
    """A one-shot set-up command shows its result, not discord.py's start-up chatter (voice
    support missing, logging in); ``log_level = "DEBUG"`` keeps it."""
    if settings.log_level != "DEBUG":
        logging.getLogger("discord").setLevel(logging.ERROR)


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    _quiet_sdk(settings)
    names = asyncio.run(sync_commands(_discord(settings), guild=args.guild))
    where = f"server {args.guild}" if args.guild else "every server (global)"
    print(f"registered {len(names)} commands for {where}: {', '.join('/' + n for n in names)}")
    return 0


def cmd_invite(args: argparse.Namespace, settings: Settings) -> int:
    _quiet_sdk(settings)
    client_id = args.client_id or asyncio.run(application_id(_discord(settings)))
    print(invite_url(client_id))
    return 0


async def sync_commands(settings: DiscordSettings, *, guild: int | None = None) -> list[str]:
    """Log in, register the command tree globally or in one ``guild``, log out.

    Raises:
        ConfigError: no token, or Discord refused it.
        DigestError: Discord refused the commands (the message says why).
    """
    async with logged_in(settings) as client:
        try:
            if guild is None:
                synced = await client.tree.sync()
            else:
                target = discord.Object(id=guild)
                client.tree.copy_global_to(guild=target)
                synced = await client.tree.sync(guild=target)
        except discord.Forbidden as exc:
            raise DigestError(
                f"Discord refused the commands for server {guild}: is the bot in it, invited "
                f"with the applications.commands scope? ({exc.text})"
            ) from exc
        except discord.HTTPException as exc:
            raise DigestError(f"Discord refused the commands: {exc}") from exc
    log.info("synced %d commands (guild %s)", len(synced), guild)
    return [c.name for c in synced]


async def application_id(settings: DiscordSettings) -> int:
    """The bot's application id, asked from Discord with the configured token."""
    async with logged_in(settings) as client:
        if client.application_id is None:
            raise DigestError("Discord did not say the application id; pass --client-id")
        return client.application_id


@contextlib.asynccontextmanager
async def logged_in(settings: DiscordSettings) -> AsyncIterator[DigestClient]:
    """A logged-in (REST only) DigestClient, closed on exit.

    Raises:
        ConfigError: no token, Discord refused it, or ``api_base_url`` does not answer.
        DigestError: Discord could not be reached, at login or later in the ``with`` block
            (one line: where, why, and what to check).
    """
    token = settings.checked_token()
    if token is None:
        raise ConfigError(
            "set DIGEST_BOT_DISCORD__TOKEN or discord.token_file", key="discord.token"
        )
    async with point_discord_py_at(settings.api_base_url):
        client = DigestClient(settings)
        try:
            try:
                await client.login(token.get_secret_value())
            except discord.LoginFailure as exc:
                raise ConfigError("Discord refused the token (401)", key="discord.token") from exc
            except (discord.HTTPException, OSError, TimeoutError) as exc:
                error = _unreachable(settings, exc)
                raise error or DigestError(f"cannot log in to Discord: {exc}") from exc
            try:
                yield client
            except (OSError, TimeoutError) as exc:  # aiohttp's connection errors are OSErrors
                error = _unreachable(settings, exc)
                if error is None:
                    raise
                raise error from exc
        finally:
            await client.close()


def _unreachable(settings: DiscordSettings, exc: BaseException) -> DigestError | None:
    """The one-line error for a network failure (DNS, refused, timeout); None for others."""
    reason = network_reason(exc)
    if reason is None:
        return None
    return DigestError(
        f"cannot reach Discord at {settings.api_base_url}: {reason}; "
        "check the network or [discord] api_base_url"
    )


def _discord(settings: Settings) -> DiscordSettings:
    section = settings.platform("discord")
    assert isinstance(section, DiscordSettings)
    return section
