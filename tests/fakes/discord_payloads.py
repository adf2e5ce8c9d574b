"""Builders for Discord API objects shaped the way discord.py 2.7 parses them."""

from __future__ import annotations

import datetime
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Json = dict[str, Any]

# https://discord.com/developers/docs/reference#snowflakes
DISCORD_EPOCH_MS = 1_420_070_400_000
# Upload limit reported in INTERACTION_CREATE for a guild without boosts (10 MiB).
DEFAULT_ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
# A plain member: add reactions, view channel, send, embed links, attach files, read history,
# use application commands, create public threads, send messages in threads (these two on by
# default for @everyone: https://discord.com/developers/docs/topics/permissions).
DEFAULT_MEMBER_PERMISSIONS = sum(1 << bit for bit in (6, 10, 11, 14, 15, 16, 31, 35, 38))
ADMINISTRATOR = 1 << 3

_counter = itertools.count()
_counter_lock = threading.Lock()


def snowflake(at: float | None = None) -> int:
    """Return a new, unique snowflake whose timestamp is `at` (Unix seconds, default now)."""
    ms = int((time.time() if at is None else at) * 1000) - DISCORD_EPOCH_MS
    with _counter_lock:
        increment = next(_counter) & 0xFFF
    return (ms << 22) | (1 << 17) | increment


def iso_now() -> str:
    """Return the current UTC time in Discord's ISO 8601 format."""
    return datetime.datetime.now(datetime.UTC).isoformat()


def user(user_id: int, username: str | None = None, *, bot: bool = False) -> Json:
    """A user object (https://discord.com/developers/docs/resources/user#user-object)."""
    name = username or f"user{user_id}"
    return {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def bot_user(user_id: int, username: str) -> Json:
    """The bot's own user, as `GET /users/@me` returns it."""
    return {
        **user(user_id, username, bot=True),
        "global_name": None,
        "verified": True,
        "mfa_enabled": False,
        "flags": 0,
        "email": None,
        "locale": "en-US",
    }


def role(role_id: int, name: str, *, permissions: int = 0, position: int = 0) -> Json:
    """A role object; the @everyone role has the guild's id."""
    return {
        "id": str(role_id),
        "name": name,
        "permissions": str(permissions),
        "position": position,
        "color": 0,
        "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "icon": None,
        "unicode_emoji": None,
        "flags": 0,
    }


def member(
    user_payload: Json,
    *,
    roles: Iterable[int] = (),
    permissions: int | None = None,
    nick: str | None = None,
) -> Json:
    """A guild member; `permissions` is only present in interaction payloads."""
    data: Json = {
        "user": user_payload,
        "roles": [str(r) for r in roles],
        "nick": nick,
        "avatar": None,
        "joined_at": iso_now(),
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "communication_disabled_until": None,
    }
    if permissions is not None:
        data["permissions"] = str(permissions)
    return data


def text_channel(
    channel_id: int, name: str, *, guild_id: int | None = None, position: int = 0, type: int = 0
) -> Json:
    """A guild text (0) or announcement (5) channel."""
    data: Json = {
        "id": str(channel_id),
        "type": type,
        "name": name,
        "position": position,
        "parent_id": None,
        "topic": None,
        "nsfw": False,
        "rate_limit_per_user": 0,
        "last_message_id": None,
        "permission_overwrites": [],
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
    return data


def dm_channel(channel_id: int, recipient: Json) -> Json:
    """A DM channel (type 1)."""
    return {"id": str(channel_id), "type": 1, "last_message_id": None, "recipients": [recipient]}


def guild_create(
    guild_id: int,
    name: str,
    *,
    owner_id: int,
    channels: Iterable[Json],
    roles: Iterable[Json],
    members: Iterable[Json],
) -> Json:
    """A GUILD_CREATE dispatch body (channels carry no guild_id there)."""
    member_list = list(members)
    return {
        "id": str(guild_id),
        "name": name,
        "unavailable": False,
        "owner_id": str(owner_id),
        "icon": None,
        "splash": None,
        "banner": None,
        "description": None,
        "features": [],
        "preferred_locale": "en-US",
        "verification_level": 0,
        "default_message_notifications": 1,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "system_channel_flags": 0,
        "afk_timeout": 300,
        "joined_at": iso_now(),
        "large": False,
        "member_count": len(member_list),
        "channels": [{k: v for k, v in c.items() if k != "guild_id"} for c in channels],
        "roles": list(roles),
        "members": member_list,
        "threads": [],
        "presences": [],
        "voice_states": [],
        "emojis": [],
        "stickers": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    }


def application(app_id: int, name: str, owner: Json, *, flags: int = 0) -> Json:
    """`GET /oauth2/applications/@me`."""
    return {
        "id": str(app_id),
        "name": name,
        "description": "",
        "icon": None,
        "summary": "",
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": owner,
        "team": None,
        "verify_key": "0" * 64,
        "flags": flags,
        "interactions_endpoint_url": None,
        "redirect_uris": [],
        "approximate_guild_count": 0,
        "tags": [],
    }


def message(
    *,
    message_id: int,
    channel_id: int,
    author: Json,
    content: str = "",
    embeds: Iterable[Json] = (),
    components: Iterable[Json] = (),
    flags: int = 0,
    guild_id: int | None = None,
    edited_timestamp: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Json:
    """A message object; `guild_id` is set on gateway dispatches only."""
    data: Json = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "type": 0,
        "author": author,
        "content": content,
        "timestamp": iso_now(),
        "edited_timestamp": edited_timestamp,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [{"type": "rich", **e} for e in embeds],
        "components": list(components),
        "pinned": False,
        "flags": flags,
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
    if extra:
        data.update(extra)
    return data
