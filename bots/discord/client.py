"""The bot's discord.py client: command tree, persistent buttons, the port, admin servers."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from bots.discord.commands import DigestTranslator, install_commands
from bots.discord.settings import DiscordSettings
from bots.discord.uploads import on_direct_message
from bots.discord.views import ActionButton, ChoiceButton, SectionButton, no_mentions
from bots.inflight import InFlight
from digest_core.port import UserRateLimiter

if TYPE_CHECKING:
    from digest_core.port import Port

log = logging.getLogger(__name__)


def intents() -> discord.Intents:
    """Default intents, none privileged (slash commands and buttons need none), without the
    server message and typing events a command-only bot never reads (less gateway traffic);
    direct messages are read, for admins' issue files."""
    wanted = discord.Intents.default()
    wanted.messages = False
    wanted.typing = False
    # direct messages only, for an admin's issue file (not privileged: a DM's content and
    # attachments reach the bot without the message content intent)
    wanted.dm_messages = True
    return wanted


def _no_voice_warnings() -> None:
    """The bot never joins a voice channel: discord.py's start-up warnings that PyNaCl and
    davey (voice libraries) are missing say nothing to its operator, so they are switched off
    (discord.py warns once per process, while these flags are set)."""
    for flag in ("warn_nacl", "warn_dave"):
        if hasattr(discord.VoiceClient, flag):
            setattr(discord.VoiceClient, flag, False)


def amortize_bucket_cleanup(http: Any) -> None:
    """Make discord.py's sweep of idle rate-limit buckets run once the bucket count has
    doubled since the last sweep, not on every new bucket past 256.

    discord.py keeps a bucket per route and channel and, once it holds 256, scans all of
    them for idle ones (unused for 5 minutes) each time it adds one: a post to n channels
    made n - 256 scans of up to 2n buckets (0.13 ms of CPU per message at 500 channels, and
    growing with the channel count). The same buckets are swept, as discord.py sweeps them,
    only less often: memory stays within twice the live buckets. A discord.py without that
    sweep (another version) is left alone.
    """
    sweep = getattr(http, "_try_clear_expired_ratelimits", None)
    if sweep is None or not isinstance(getattr(http, "_buckets", None), dict):
        return
    swept_at = 0

    def sweep_when_doubled() -> None:
        nonlocal swept_at
        if len(http._buckets) >= max(256, 2 * swept_at):
            sweep()
            swept_at = len(http._buckets)

    http._try_clear_expired_ratelimits = sweep_when_doubled


class DigestClient(discord.Client):
    """A discord.Client with our command tree and persistent section buttons.

    Interactions reach the core through ``interaction.client.port`` (typed: the views and
    commands take ``discord.Interaction[DigestClient]``); it is None in ``digest-bot discord
    sync`` (commands are registered, never run).
    """

    def __init__(self, settings: DiscordSettings, **options: Any) -> None:
        options.setdefault("intents", intents())
        _no_voice_warnings()
        super().__init__(
            allowed_mentions=no_mentions(),
            guild_ready_timeout=settings.guild_ready_timeout_seconds,
            # no message cache: nothing here reads old messages
            max_messages=None,
            **options,
        )
        self.settings = settings
        amortize_bucket_cleanup(self.http)
        #: what interactions may ask of the core (None while only syncing commands)
        self.port: Port | None = None
        #: the per-user flood limit of readers' commands and presses (set with ``service``)
        self.limiter: UserRateLimiter | None = None
        #: the command handlers under way (see bots.inflight); None while only syncing
        self.in_flight: InFlight | None = None
        self.tree: app_commands.CommandTree[DigestClient] = app_commands.CommandTree(self)
        #: configured channel (or thread) id -> the id of the server holding it, for those
        #: resolved so far; Manage Server and ``admin_roles`` count only in these servers
        self.channel_guilds: dict[int, int] = {}
        install_commands(self.tree)

    async def setup_hook(self) -> None:
        """Runs in ``login``: translations for sync, and buttons that outlive restarts."""
        await self.tree.set_translator(DigestTranslator())
        self.add_dynamic_items(SectionButton, ActionButton, ChoiceButton)

    # ------------------------------------------------------------ where admins are admins

    def admin_guild_ids(self) -> frozenset[int]:
        """The servers holding at least one configured channel: the only ones where a member's
        Manage Server / Administrator permission or ``admin_roles`` make them an admin.

        Channels not resolved yet are looked up in the gateway cache (cheap, no request); one
        that cannot be resolved grants nothing.
        """
        for channel_id in self._configured_ids():
            if channel_id not in self.channel_guilds:
                self._note_channel(channel_id, self.get_channel(channel_id))
        return frozenset(self.channel_guilds.values())

    async def resolve_channel_guilds(self) -> None:
        """Map every configured channel to its server: from the cache, else ``GET
        /channels/{id}`` (once per channel per ready; a channel that answers an error, is a
        DM, or does not answer in time stays unresolved)."""
        for channel_id in self._configured_ids():
            if self._note_channel(channel_id, self.get_channel(channel_id)):
                continue
            try:
                async with asyncio.timeout(self.settings.request_timeout_seconds):
                    channel = await self.fetch_channel(channel_id)
            except (discord.HTTPException, discord.InvalidData, TimeoutError, OSError) as exc:
                log.warning(
                    "discord: configured channel %s cannot be resolved (%s); its server's "
                    "managers are not admins of the bot until it can",
                    channel_id,
                    exc,
                )
                continue
            self._note_channel(channel_id, channel)
        log.info(
            "discord: admin servers (holding configured channels): %s",
            sorted(set(self.channel_guilds.values())),
        )

    async def on_ready(self) -> None:
        await self.resolve_channel_guilds()

    async def on_message(self, message: discord.Message) -> None:
        """A DM with a file: an admin's issue file (see bots.discord.uploads)."""
        await on_direct_message(self, message)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        self._note_guild(guild)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        self._note_guild(guild)

    def _note_guild(self, guild: discord.Guild) -> None:
        """A GUILD_CREATE: configured channels (and threads) in ``guild`` map to it."""
        for channel_id in self._configured_ids():
            self._note_channel(channel_id, guild.get_channel_or_thread(channel_id))

    def _note_channel(self, channel_id: int, channel: object) -> bool:
        guild = getattr(channel, "guild", None)
        if not isinstance(guild, discord.Guild):
            return False
        self.channel_guilds[channel_id] = guild.id
        return True

    def _configured_ids(self) -> list[int]:
        return [int(c) for c in self.settings.channels]


class ShardedDigestClient(DigestClient, discord.AutoShardedClient):
    """The same client over several gateway shards (big bots; Discord says when)."""
