"""Discord's `digest-bot doctor` checks: token, rights in each channel, interactions, clock.

The bot's permissions in a channel are computed as Discord computes them, from the guild's
roles, the bot member's roles and the channel's overwrites
(https://discord.com/developers/docs/topics/permissions#permission-overwrites). Plain REST
calls over aiohttp (discord.py's own HTTP library); nothing is sent to any channel.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import aiohttp

from bots.discord.settings import DiscordChannel, DiscordSettings
from bots.doctor import TIMEOUT_SECONDS, Check, clock_check, fail, ok, warn

log = logging.getLogger(__name__)

AREA = "discord"
TOKEN_FIX = (
    "copy the bot token from the Developer Portal (Bot → Reset Token) into "
    "DIGEST_BOT_DISCORD__TOKEN or discord.token_file"
)

# Permission bits (https://discord.com/developers/docs/topics/permissions#permissions-bitwise-permission-flags)
ADMINISTRATOR = 1 << 3
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
EMBED_LINKS = 1 << 14
ALL = (1 << 53) - 1
CREATE_PUBLIC_THREADS = 1 << 35
SEND_MESSAGES_IN_THREADS = 1 << 38
#: what posting the issue needs, with the name the server settings show
NEEDED = {VIEW_CHANNEL: "View Channel", SEND_MESSAGES: "Send Messages", EMBED_LINKS: "Embed Links"}
#: what a forum post per issue needs besides (a forum calls Send Messages "Create Posts")
FORUM_NEEDED = {SEND_MESSAGES_IN_THREADS: "Send Messages in Threads"}
#: what a thread on each issue's first message needs besides
THREAD_NEEDED = {CREATE_PUBLIC_THREADS: "Create Public Threads"}
#: channel types (https://discord.com/developers/docs/resources/channel#channel-object-channel-types)
DM_TYPES = (1, 3)
FORUM_TYPE = 15


def channel_permissions(
    *,
    guild_id: int,
    owner_id: int,
    roles: Mapping[int, int],
    member_id: int,
    member_roles: Iterable[int],
    overwrites: Iterable[Mapping[str, Any]],
) -> int:
    """A member's permissions in a guild channel: the base from @everyone and the member's
    roles (all for the owner or an administrator), then the channel's @everyone overwrite,
    the member's roles' overwrites (denies, then allows) and the member's own; without View
    Channel, nothing. ``roles`` maps each role id to its permissions."""
    if member_id == owner_id:
        return ALL
    mine = [int(r) for r in member_roles]
    perms = roles.get(guild_id, 0)
    for role in mine:
        perms |= roles.get(role, 0)
    if perms & ADMINISTRATOR:
        return ALL
    by_id = {int(o["id"]): o for o in overwrites}
    if (everyone := by_id.get(guild_id)) is not None:
        perms = (perms & ~int(everyone["deny"])) | int(everyone["allow"])
    allow = deny = 0
    for role in mine:
        if (o := by_id.get(role)) is not None:
            allow |= int(o["allow"])
            deny |= int(o["deny"])
    perms = (perms & ~deny) | allow
    if (own := by_id.get(member_id)) is not None:
        perms = (perms & ~int(own["deny"])) | int(own["allow"])
    return perms if perms & VIEW_CHANNEL else 0


class _Api:
    """REST calls answering (HTTP status, JSON body); remembers the last ``Date`` header."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str) -> None:
        self.session = session
        self.base = base
        self.headers = {"Authorization": f"Bot {token}"}
        self.last_date: str | None = None

    async def get(self, path: str) -> tuple[int, Any]:
        async with self.session.get(self.base + path, headers=self.headers) as response:
            self.last_date = response.headers.get("Date")
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
            return response.status, body


def _error(status: int, body: Any) -> str:
    message = body.get("message") if isinstance(body, dict) else None
    return f"HTTP {status}" + (f" {message}" if message else "")


async def checks(settings: DiscordSettings, *, now: Callable[[], dt.datetime]) -> list[Check]:
    """Discord's lines of the doctor's table; none when no token is configured."""
    token = settings.resolved_token()
    if token is None:
        return []
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        api = _Api(session, settings.api_base_url, token.get_secret_value())
        sent = now()
        status, me = await api.get("/users/@me")
        received = now()
        if status == 401:
            return [fail(AREA, "token", "Discord refuses the token (401)", TOKEN_FIX)]
        if status != 200:
            return [
                fail(
                    AREA, "token", f"/users/@me: {_error(status, me)}", "check discord.api_base_url"
                )
            ]
        out = [ok(AREA, "token", f"{me['username']} (id {me['id']})")]
        out.append(clock_check(AREA, api.last_date, sent=sent, received=received))
        out.append(await _interactions_check(api))
        if not settings.channels:
            out.append(
                warn(AREA, "channels", "no channels to post to", "list them in discord.channels")
            )
        for channel in settings.channels:
            options = settings.threads_of(channel)
            out.append(
                await _channel_check(
                    api, channel, int(me["id"]), embeds=settings.embeds, options=options
                )
            )
    return out


async def _interactions_check(api: _Api) -> Check:
    """Slash commands reach a gateway bot only when no Interactions Endpoint URL is set."""
    status, app = await api.get("/oauth2/applications/@me")
    if status != 200:
        return warn(AREA, "interactions", f"application: {_error(status, app)}", "none needed")
    url = app.get("interactions_endpoint_url")
    if url:
        return fail(
            AREA,
            "interactions",
            f"interactions go to {url}, so slash commands and buttons never reach the bot",
            "Developer Portal → General Information: clear Interactions Endpoint URL",
        )
    return ok(AREA, "interactions", "delivered over the gateway")


async def _channel_check(
    api: _Api, channel: str, bot_id: int, *, embeds: bool, options: DiscordChannel | None = None
) -> Check:
    """Whether the bot may post in ``channel`` as configured (a forum's posts and tags, a
    thread on each issue)."""
    name = f"rights {channel}"
    status, data = await api.get(f"/channels/{channel}")
    if status == 404:
        return fail(AREA, name, "unknown channel", "fix the id in discord.channels")
    if status == 403:
        return fail(
            AREA,
            name,
            "the bot cannot see the channel (Missing Access)",
            "invite the bot to the server and give it View Channel there",
        )
    if status != 200:
        return fail(AREA, name, f"/channels: {_error(status, data)}", "try again later")
    if int(data.get("type", 0)) in DM_TYPES:
        return ok(AREA, name, "a direct-message channel")
    kind = _kind_check(name, channel, data, options)
    if kind is not None:
        return kind
    guild_id = int(data["guild_id"])
    label = f"#{data.get('name', channel)}"
    g_status, guild = await api.get(f"/guilds/{guild_id}")
    m_status, member = await api.get(f"/guilds/{guild_id}/members/{bot_id}")
    if g_status != 200 or m_status != 200:
        return fail(
            AREA,
            name,
            f"cannot read the server's roles ({_error(g_status, guild)}, "
            f"{_error(m_status, member)})",
            "invite the bot to the server",
        )
    perms = channel_permissions(
        guild_id=guild_id,
        owner_id=int(guild["owner_id"]),
        roles={int(r["id"]): int(r["permissions"]) for r in guild["roles"]},
        member_id=bot_id,
        member_roles=member.get("roles", []),
        overwrites=data.get("permission_overwrites") or [],
    )
    needed = {bit: n for bit, n in NEEDED.items() if embeds or bit != EMBED_LINKS}
    if options is not None and options.forum:
        needed |= FORUM_NEEDED
    elif options is not None and options.thread_per_issue:
        needed |= THREAD_NEEDED
    missing = [n for bit, n in needed.items() if not perms & bit]
    if missing:
        return fail(
            AREA,
            name,
            f"in {label} the bot lacks {', '.join(missing)}",
            f"{label} → Edit Channel → Permissions: allow {', '.join(missing)} for the bot's "
            "role (or remove the overwrite that denies it)",
        )
    return ok(AREA, name, f"may post in {label} ({', '.join(needed.values())})")


def _kind_check(
    name: str, channel: str, data: dict[str, Any], options: DiscordChannel | None
) -> Check | None:
    """A forum configured as a text channel or the other way round, or a tag the forum lacks
    (None: the channel is what the configuration says)."""
    label = f"#{data.get('name', channel)}"
    forum = int(data.get("type", 0)) == FORUM_TYPE
    if forum and (options is None or not options.forum):
        return fail(
            AREA,
            name,
            f"{label} is a forum channel: it takes posts, not messages",
            f'write it in discord.channels as {{ id = "{channel}", forum = true }}',
        )
    if options is None or not options.forum:
        return None
    if not forum:
        return fail(
            AREA,
            name,
            f"{label} is not a forum channel (type {data.get('type')})",
            "drop forum = true (thread_per_issue = true opens a thread on each issue instead)",
        )
    tags = {t.get("name") for t in data.get("available_tags") or []}
    missing = [t for t in options.tags if t not in tags]
    if missing:
        return fail(
            AREA,
            name,
            f"{label} has no tag {', '.join(map(repr, missing))} (it has "
            f"{', '.join(sorted(map(repr, tags))) or 'none'})",
            f"{label} → Edit Channel → Tags: add it, or fix the name in discord.channels",
        )
    return None
