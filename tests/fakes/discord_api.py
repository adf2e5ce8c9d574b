"""A loopback double of Discord's REST API and gateway for a real discord.py client."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import hashlib
import json
import logging
import math
import re
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import yarl
from aiohttp import web

from tests.fakes import discord_payloads as p
from tests.fakes import discord_threads as t
from tests.fakes.discord_payloads import Json
from tests.fakes.discord_threads import (
    CREATE_PUBLIC_THREADS,
    HAS_THREAD,
    MANAGE_THREADS,
    SEND_MESSAGES_IN_THREADS,
    ThreadRefused,
)

log = logging.getLogger(__name__)

#: the double's bot token: shaped as Discord's are (the adapter refuses any other shape)
FAKE_TOKEN = "MTAwMDAwMDAwMDAwMDAwMDAx.ZmFrZQ.ZmFrZS1ib3QtdG9rZW4tb2YtdGhlLWRvdWJsZQ"

API_PREFIX = "/api/v10"
GATEWAY_PATH = "/gateway"

# Message flags (https://discord.com/developers/docs/resources/message#message-object-message-flags).
EPHEMERAL = 1 << 6
#: permission bits the message routes check (https://discord.com/developers/docs/topics/permissions)
MANAGE_MESSAGES = 1 << 13
PIN_MESSAGES = 1 << 51
#: what the bot may do in a guild channel unless :meth:`FakeDiscord.set_bot_permissions` says
#: otherwise: everything these routes check
BOT_PERMISSIONS = MANAGE_MESSAGES | PIN_MESSAGES
LOADING = 1 << 7

FaultKind = Literal[
    "missing_access",  # 403, code 50001
    "missing_permissions",  # 403, code 50013
    "cannot_dm",  # 403, code 50007 (user blocks DMs)
    "unknown_channel",  # 404, code 10003
    "server_error",  # 500 (discord.py retries)
    "bad_gateway",  # 502, an HTML body like Cloudflare's (discord.py retries)
    "unavailable",  # 503 (discord.py does NOT retry)
    "rate_limited",  # 429 with Via, retry_after from fail_next
    "slow",  # answer normally after `delay` seconds (with commit=True: act first, answer late)
]

_ERROR_FAULTS: dict[str, tuple[int, int, str]] = {
    "missing_access": (403, 50001, "Missing Access"),
    "missing_permissions": (403, 50013, "Missing Permissions"),
    "cannot_dm": (403, 50007, "Cannot send messages to this user"),
    "unknown_channel": (404, 10003, "Unknown Channel"),
    "server_error": (500, 0, "500: Internal Server Error"),
    "unavailable": (503, 0, "503: Service Unavailable"),
}

# How long Discord remembers a message nonce for `enforce_nonce` ("the past few minutes"; the
# exact figure is not documented).
NONCE_WINDOW = 180.0
# A create-message nonce: an int64, or a string of at most 25 characters (OpenAPI spec).
NONCE_MAX_LENGTH = 25
_INT64 = range(-(2**63), 2**63)

# Gateway intents bits that gate message events.
_GUILD_MESSAGES = 1 << 9
_DIRECT_MESSAGES = 1 << 12

_TYPE_OBJECT = {
    "code": "DICT_TYPE_CONVERT",
    "message": "Only dictionaries may be used in a DictType",
}
_TYPE_ARRAY = {"code": "BASE_TYPE_ARRAY", "message": "Must be an array."}
_COMMAND_NAME = re.compile(r"^[-_\w]{1,32}$")

# Permission bits (https://discord.com/developers/docs/topics/permissions).
ADMINISTRATOR = 1 << 3
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
EMBED_LINKS = 1 << 14
ALL_PERMISSIONS = (1 << 53) - 1


def channel_permissions(
    channel: Json,
    roles: Mapping[int, Json],
    member_roles: Iterable[int],
    member_id: int,
    *,
    owner: bool,
) -> int:
    """A member's permissions in a guild channel, computed as Discord documents it
    (https://discord.com/developers/docs/topics/permissions#permission-overwrites)."""
    guild_id = int(channel["guild_id"])
    if owner:
        return ALL_PERMISSIONS
    mine = [int(r) for r in member_roles]
    perms = int(roles[guild_id]["permissions"])
    for r in mine:
        if r in roles:
            perms |= int(roles[r]["permissions"])
    if perms & ADMINISTRATOR:
        return ALL_PERMISSIONS
    overwrites = {int(o["id"]): o for o in channel.get("permission_overwrites") or []}
    if (everyone := overwrites.get(guild_id)) is not None:
        perms = (perms & ~int(everyone["deny"])) | int(everyone["allow"])
    allow = deny = 0
    for r in mine:
        if (o := overwrites.get(r)) is not None:
            allow |= int(o["allow"])
            deny |= int(o["deny"])
    perms = (perms & ~deny) | allow
    if (own := overwrites.get(member_id)) is not None:
        perms = (perms & ~int(own["deny"])) | int(own["allow"])
    if not perms & VIEW_CHANNEL:
        return 0
    return perms


class ApiError(Exception):
    """An error answer in Discord's JSON shape, raised inside handlers."""

    def __init__(self, status: int, code: int, message: str, errors: Json | None = None) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors

    def body(self) -> Json:
        data: Json = {"message": self.message, "code": self.code}
        if self.errors:
            data["errors"] = self.errors
        return data


@dataclass(frozen=True)
class RateLimit:
    """`limit` requests per `window` seconds."""

    limit: int
    window: float


@dataclass
class Counters:
    """What the double has seen; tests assert on these instead of on logs."""

    requests: Counter[str] = field(
        default_factory=Counter
    )  # "POST /channels/{channel_id}/messages"
    statuses: Counter[int] = field(default_factory=Counter)
    rate_limited: Counter[str] = field(default_factory=Counter)  # "bucket", "global", "injected"
    gateway: Counter[str] = field(default_factory=Counter)  # "connect", "identify", "resume", ...
    # message creates answered with the message an earlier request made with the same nonce
    nonce_hits: int = 0

    @property
    def client_errors(self) -> int:
        """Number of 4xx answers, 429s included."""
        return sum(n for status, n in self.statuses.items() if 400 <= status < 500)

    @property
    def too_many_requests(self) -> int:
        return self.statuses[429]


@dataclass(eq=False)
class StoredMessage:
    """A message as the double holds it, with what the client sent to create it."""

    id: int
    channel_id: int
    guild_id: int | None
    author: Json
    content: str = ""
    embeds: list[Json] = field(default_factory=list)
    components: list[Json] = field(default_factory=list)
    flags: int = 0
    allowed_mentions: Json | None = None
    attachments: list[Json] = field(default_factory=list)
    request: Json = field(default_factory=dict)
    edits: list[Json] = field(default_factory=list)
    deleted: bool = False
    pinned: bool = False
    extra: Json = field(default_factory=dict)

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    def as_payload(self, *, with_guild: bool = False) -> Json:
        data = p.message(
            message_id=self.id,
            channel_id=self.channel_id,
            author=self.author,
            content=self.content,
            embeds=self.embeds,
            components=self.components,
            flags=self.flags,
            guild_id=self.guild_id if with_guild else None,
            edited_timestamp=p.iso_now() if self.edits else None,
            extra=self.extra,
        )
        data["attachments"] = self.attachments
        return data

    def apply(self, body: Json) -> None:
        """Apply an edit body (PATCH semantics: absent keys keep their value)."""
        if "content" in body:
            self.content = body["content"] or ""
        if "embeds" in body:
            self.embeds = [_rich(e) for e in body["embeds"] or []]
        if "components" in body:
            self.components = list(body["components"] or [])
        if "allowed_mentions" in body:
            self.allowed_mentions = body["allowed_mentions"]
        if body.get("flags") is not None:
            self.flags = (self.flags & (EPHEMERAL | LOADING)) | int(body["flags"])


@dataclass(eq=False)
class InteractionRecord:
    """One INTERACTION_CREATE sent to the client, and everything the client answered."""

    id: int
    token: str
    type: int
    channel_id: int
    guild_id: int | None
    payload: Json
    created_at: float
    callback: Json | None = None
    original: StoredMessage | None = None
    followups: list[StoredMessage] = field(default_factory=list)
    original_edits: list[Json] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def callback_type(self) -> int | None:
        return None if self.callback is None else int(self.callback["type"])

    @property
    def callback_data(self) -> Json:
        return {} if self.callback is None else dict(self.callback.get("data") or {})

    @property
    def choices(self) -> list[Json]:
        """The choices an autocomplete interaction was answered with."""
        return list(self.callback_data.get("choices") or [])

    @property
    def ephemeral(self) -> bool:
        """Whether the initial response asked for flag 64."""
        return bool(int(self.callback_data.get("flags") or 0) & EPHEMERAL)

    def _notify(self) -> None:
        self._changed.set()

    async def wait_for(
        self, predicate: Callable[[InteractionRecord], bool], *, within: float = 5.0
    ) -> None:
        """Wait until `predicate(self)` holds. Raises TimeoutError after `within` seconds."""
        async with asyncio.timeout(within):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

    async def wait_for_callback(self, *, within: float = 5.0) -> None:
        await self.wait_for(lambda r: r.callback is not None, within=within)

    async def wait_for_followups(self, count: int = 1, *, within: float = 5.0) -> None:
        await self.wait_for(lambda r: len(r.followups) >= count, within=within)


@dataclass
class _Fault:
    kind: str
    times: int
    retry_after: float
    delay: float
    is_global: bool
    commit: bool = False


@dataclass
class _Bucket:
    hash: str
    limit: int
    window: float
    count: int = 0
    reset_at: float = 0.0


@dataclass(frozen=True)
class _RouteMeta:
    template: str
    bucket: str
    auth: bool


@dataclass(eq=False)
class _Conn:
    ws: web.WebSocketResponse
    request: web.Request
    session: _Session | None = None
    closed_by_us: bool = False


@dataclass(eq=False)
class _Session:
    id: str
    intents: int
    shard: list[int] | None
    seq: int = 0
    frames: list[Json] = field(default_factory=list)
    conn: _Conn | None = None
    ended: bool = False


@dataclass
class _Guild:
    id: int
    name: str
    owner_id: int
    roles: dict[int, Json]
    channel_ids: list[int]
    #: the roles of the bot's member in this guild
    bot_roles: list[int] = field(default_factory=list)


def _rich(embed: Json) -> Json:
    return {"type": "rich", **embed}


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    # discord.py parses a body as JSON only if Content-Type is exactly "application/json".
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _valid_nonce(body: Json) -> int | str | None:
    """The create-message ``nonce`` (an int64 or a string of at most 25 characters) and a
    boolean ``enforce_nonce``, or a 400 like Discord's. (The codes for a wrong type are ours;
    Discord does not document them.)"""
    errors: Json = {}
    nonce = body.get("nonce")
    if isinstance(nonce, str):
        if len(nonce) > NONCE_MAX_LENGTH:
            message = f"Must be {NONCE_MAX_LENGTH} or fewer in length."
            _put_error(errors, ["nonce"], "BASE_TYPE_MAX_LENGTH", message)
    elif isinstance(nonce, int) and not isinstance(nonce, bool):
        if nonce not in _INT64:
            _put_error(errors, ["nonce"], "NUMBER_TYPE_MAX", "Int value is out of range.")
    elif nonce is not None:
        message = "Must be an integer or a string of 25 or fewer characters."
        _put_error(errors, ["nonce"], "NONCE_TYPE_INVALID", message)
    if body.get("enforce_nonce") is not None and not isinstance(body["enforce_nonce"], bool):
        _put_error(errors, ["enforce_nonce"], "BASE_TYPE_BOOLEAN", "Must be either true or false.")
    if errors:
        raise ApiError(400, 50035, "Invalid Form Body", errors)
    return nonce if isinstance(nonce, int | str) else None


def _put_error(errors: Json, path: Iterable[str | int], code: str, message: str) -> None:
    node = errors
    for key in path:
        node = node.setdefault(str(key), {})
    node.setdefault("_errors", []).append({"code": code, "message": message})


def _max_len(errors: Json, path: list[str | int], value: Any, limit: int) -> None:
    if isinstance(value, str) and len(value) > limit:
        _put_error(errors, path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def validate_message(body: Json, *, edit: bool = False) -> None:
    """Check a message body against Discord's limits.

    Raises
    ------
    ApiError
        400 code 50006 for an empty message, 400 code 50035 with an `errors` tree otherwise.
    """
    errors: Json = {}
    content = body.get("content")
    embeds = body.get("embeds") or []
    components = body.get("components") or []
    _max_len(errors, ["content"], content, 2000)
    if len(embeds) > 10:
        _put_error(errors, ["embeds"], "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
    total = 0
    for i, embed in enumerate(embeds):
        path: list[str | int] = ["embeds", i]
        _max_len(errors, [*path, "title"], embed.get("title"), 256)
        _max_len(errors, [*path, "description"], embed.get("description"), 4096)
        footer = embed.get("footer") or {}
        author = embed.get("author") or {}
        _max_len(errors, [*path, "footer", "text"], footer.get("text"), 2048)
        _max_len(errors, [*path, "author", "name"], author.get("name"), 256)
        fields = embed.get("fields") or []
        if len(fields) > 25:
            _put_error(
                errors, [*path, "fields"], "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."
            )
        for j, fld in enumerate(fields):
            for key, limit in (("name", 256), ("value", 1024)):
                value = fld.get(key)
                if not value:
                    _put_error(
                        errors,
                        [*path, "fields", j, key],
                        "BASE_TYPE_REQUIRED",
                        "This field is required",
                    )
                _max_len(errors, [*path, "fields", j, key], value, limit)
        total += sum(
            len(s or "")
            for s in (
                embed.get("title"),
                embed.get("description"),
                footer.get("text"),
                author.get("name"),
                *(f.get("name") for f in fields),
                *(f.get("value") for f in fields),
            )
        )
    if total > 6000:
        _put_error(
            errors, ["embeds"], "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000"
        )
    _validate_components(errors, components)
    if errors:
        raise ApiError(400, 50035, "Invalid Form Body", errors)
    empty = not (content or "").strip() and not embeds and not components
    empty = (
        empty
        and not body.get("attachments")
        and not body.get("sticker_ids")
        and not body.get("poll")
    )
    if empty and not edit:
        raise ApiError(400, 50006, "Cannot send an empty message")


def _validate_components(errors: Json, rows: list[Json]) -> None:
    if len(rows) > 5:
        _put_error(errors, ["components"], "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
    seen: set[str] = set()
    for i, row in enumerate(rows):
        children = row.get("components") or []
        if row.get("type") != 1:
            _put_error(
                errors,
                ["components", i, "type"],
                "UNION_TYPE_CHOICES",
                'Value of field "type" must be one of (1,).',
            )
            continue
        width = sum(1 if c.get("type") == 2 else 5 for c in children)
        if width > 5 or not children:
            _put_error(
                errors,
                ["components", i, "components"],
                "BASE_TYPE_BAD_LENGTH",
                "Must be between 1 and 5 in length.",
            )
        for j, comp in enumerate(children):
            path: list[str | int] = ["components", i, "components", j]
            custom_id = comp.get("custom_id")
            _max_len(errors, [*path, "custom_id"], custom_id, 100)
            _max_len(errors, [*path, "label"], comp.get("label"), 80)
            if comp.get("type") == 2 and comp.get("style") == 5:
                if not comp.get("url"):
                    _put_error(
                        errors, [*path, "url"], "BASE_TYPE_REQUIRED", "This field is required"
                    )
            elif not custom_id:
                _put_error(
                    errors, [*path, "custom_id"], "BASE_TYPE_REQUIRED", "This field is required"
                )
            elif custom_id in seen:
                _put_error(
                    errors,
                    [*path, "custom_id"],
                    "COMPONENT_CUSTOM_ID_DUPLICATED",
                    "Component custom id cannot be duplicated",
                )
            if custom_id:
                seen.add(custom_id)


def _validate_choices(data: Json) -> None:
    """Check an autocomplete answer: at most 25 choices, names 1-100 characters."""
    errors: Json = {}
    choices = data.get("choices")
    if not isinstance(choices, list):
        _put_error(errors, ["choices"], "BASE_TYPE_REQUIRED", "This field is required")
    else:
        if len(choices) > 25:
            _put_error(
                errors, ["choices"], "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."
            )
        for i, choice in enumerate(choices):
            name = choice.get("name")
            if not isinstance(name, str) or not 1 <= len(name) <= 100:
                _put_error(
                    errors,
                    ["choices", i, "name"],
                    "BASE_TYPE_BAD_LENGTH",
                    "Must be between 1 and 100 in length.",
                )
            if "value" not in choice:
                _put_error(
                    errors, ["choices", i, "value"], "BASE_TYPE_REQUIRED", "This field is required"
                )
    if errors:
        raise ApiError(400, 50035, "Invalid Form Body", errors)


class FakeDiscord:
    """Discord's REST API and gateway on 127.0.0.1, for a real discord.py client.

    Use as ``async with FakeDiscord() as dc:``, then point discord.py at ``dc.api_base`` with
    :func:`point_discord_py_at`. Rate limits are real (headers on every answer, per-route buckets,
    a global limit, 429s with ``Via``); ``rate_scale`` multiplies every window so tests run fast.
    Faults are injected with :meth:`fail_next`; interactions are simulated with
    :meth:`run_slash_command` and :meth:`press_button`, which return an :class:`InteractionRecord`.
    """

    def __init__(
        self,
        *,
        token: str = FAKE_TOKEN,
        application_id: int | None = None,
        bot_name: str = "digest-bot",
        host: str = "127.0.0.1",
        port: int = 0,
        heartbeat_interval: float = 41.25,
        message_rate: RateLimit = RateLimit(5, 5.0),
        default_rate: RateLimit = RateLimit(50, 1.0),
        global_rate: RateLimit = RateLimit(50, 1.0),
        rate_scale: float = 1.0,
        interaction_deadline: float = 3.0,
        application_flags: int = 0,
        nonce_window: float = NONCE_WINDOW,
        create_latency: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self.application_id = application_id or p.snowflake()
        # A bot's user id equals its application id.
        self.bot_user = p.bot_user(self.application_id, bot_name)
        self.host = host
        self.port = port
        self.heartbeat_interval = heartbeat_interval
        self.message_rate = message_rate
        self.default_rate = default_rate
        self.global_rate = global_rate
        self.rate_scale = rate_scale
        self.interaction_deadline = interaction_deadline
        self.application_flags = application_flags
        #: seconds a message nonce is remembered for ``enforce_nonce`` (on ``clock``)
        self.nonce_window = nonce_window
        #: every message create takes effect at once and is answered this many seconds late
        #: (a slow API: a client killed meanwhile never learns that its message exists)
        self.create_latency = create_latency
        self.clock = clock
        self.counters = Counters()
        self.identify_payloads: list[Json] = []
        self.gateway_queries: list[dict[str, str]] = []
        self.interactions: list[InteractionRecord] = []
        self._guilds: dict[int, _Guild] = {}
        self._channels: dict[int, Json] = {}
        self._dm_by_user: dict[int, int] = {}
        #: the bytes behind attachment URLs (what the CDN serves), by URL path
        self._cdn: dict[str, bytes] = {}
        #: the URL paths the CDN was asked for, in order
        self.cdn_requests: list[str] = []
        self._messages: dict[int, list[StoredMessage]] = {}
        self._message_index: dict[int, StoredMessage] = {}
        self._global_commands: list[Json] = []
        self._guild_commands: dict[int, list[Json]] = {}
        self._faults: dict[int | None, list[_Fault]] = {}
        # (author id, nonce) -> (message, created at), for enforce_nonce
        self._nonces: dict[tuple[int, str], tuple[StoredMessage, float]] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._global_count = 0
        self._global_reset_at = 0.0
        self._interactions_by_token: dict[str, InteractionRecord] = {}
        self._sessions: dict[str, _Session] = {}
        self._conns: set[_Conn] = set()
        self._gateway_open = asyncio.Event()
        self._gateway_open.set()
        self._meta: dict[Any, _RouteMeta] = {}
        #: guild channel id -> the bot's permissions there (absent: BOT_PERMISSIONS)
        self._bot_permissions: dict[int, int] = {}
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        #: seconds added to the wall clock in the ``Date`` header of every answer (a server
        #: whose clock differs from the client's, for clock-skew checks)
        self.date_offset = 0.0
        #: the application's Interactions Endpoint URL (set: Discord sends interactions there,
        #: not over the gateway)
        self.interactions_endpoint_url: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        return f"http://{self.host}:{self.port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}{GATEWAY_PATH}"

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(middlewares=[self._middleware])
        self._add_routes(app)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        assert server is not None and isinstance(server, asyncio.Server)
        self.port = server.sockets[0].getsockname()[1]
        log.debug("fake Discord listening on %s", self.api_base)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._gateway_open.set()
        for conn in list(self._conns):
            conn.closed_by_us = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.ws.close(code=1001), timeout=1.0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- world set-up ------------------------------------------------------------------------

    async def add_guild(
        self,
        guild_id: int,
        name: str,
        *,
        channels: Iterable[int | tuple[int, str] | Json] = (),
        roles: Iterable[tuple[int, str] | tuple[int, str, int] | Json] = (),
        owner_id: int | None = None,
    ) -> None:
        """Add a guild the bot is in; a connected client gets GUILD_CREATE at once.

        Channels are ids, ``(id, name)`` pairs or channel payloads; roles are ``(id, name)``,
        ``(id, name, permissions)`` or role payloads. @everyone (id = guild id) is implicit.
        """
        role_map = {
            guild_id: p.role(guild_id, "@everyone", permissions=p.DEFAULT_MEMBER_PERMISSIONS)
        }
        for pos, r in enumerate(roles, start=1):
            if isinstance(r, dict):
                role_map[int(r["id"])] = r
            else:
                perms = r[2] if len(r) > 2 else 0
                role_map[int(r[0])] = p.role(
                    int(r[0]), str(r[1]), permissions=int(perms), position=pos
                )
        guild = _Guild(guild_id, name, owner_id or p.snowflake(), role_map, [])
        self._guilds[guild_id] = guild
        for pos, c in enumerate(channels):
            if isinstance(c, dict):
                self._store_channel(guild, {**c, "guild_id": str(guild_id)})
            elif isinstance(c, tuple):
                self._store_channel(
                    guild, p.text_channel(c[0], c[1], guild_id=guild_id, position=pos)
                )
            else:
                self._store_channel(
                    guild, p.text_channel(c, f"channel-{c}", guild_id=guild_id, position=pos)
                )
        await self.dispatch("GUILD_CREATE", self._guild_create(guild))

    async def add_channel(
        self, guild_id: int, channel_id: int, name: str, *, type: int = 0
    ) -> Json:
        """Add a text (0) or announcement (5) channel; a connected client gets CHANNEL_CREATE."""
        guild = self._guilds[guild_id]
        data = p.text_channel(
            channel_id, name, guild_id=guild_id, position=len(guild.channel_ids), type=type
        )
        self._store_channel(guild, data)
        await self.dispatch("CHANNEL_CREATE", data)
        return data

    def set_bot_roles(self, guild_id: int, roles: Iterable[int]) -> None:
        """Give the bot's member in a guild these roles (ids of roles added with the guild)."""
        self._guilds[guild_id].bot_roles = [int(r) for r in roles]

    def set_role_permissions(self, guild_id: int, role_id: int, permissions: int) -> None:
        """Change a role's permissions (the guild's id is @everyone)."""
        self._guilds[guild_id].roles[role_id]["permissions"] = str(permissions)

    def set_overwrite(
        self,
        channel_id: int,
        target_id: int,
        *,
        allow: int = 0,
        deny: int = 0,
        member: bool = False,
    ) -> None:
        """Set a channel's permission overwrite for a role (or, with ``member``, a user)."""
        channel = self._channels[channel_id]
        kept = [o for o in channel["permission_overwrites"] if int(o["id"]) != target_id]
        kept.append(
            {
                "id": str(target_id),
                "type": 1 if member else 0,
                "allow": str(allow),
                "deny": str(deny),
            }
        )
        channel["permission_overwrites"] = kept

    def bot_permissions(self, channel_id: int) -> int:
        """The bot's permissions in a guild channel, as Discord computes them (a thread's are
        its parent channel's)."""
        channel = self._channels[channel_id]
        if t.is_thread(channel):
            channel = self._channels[int(channel["parent_id"])]
        guild = self._guilds[int(channel["guild_id"])]
        bot_id = int(self.bot_user["id"])
        return channel_permissions(
            channel, guild.roles, guild.bot_roles, bot_id, owner=guild.owner_id == bot_id
        )

    async def delete_channel(self, channel_id: int) -> None:
        """Delete a channel: later requests to it answer 404 Unknown Channel (10003)."""
        data = self._channels.pop(channel_id)
        guild_id = data.get("guild_id")
        if guild_id is not None:
            self._guilds[int(guild_id)].channel_ids.remove(channel_id)
            await self.dispatch("CHANNEL_DELETE", data)

    def add_message(
        self,
        channel_id: int,
        content: str = "",
        *,
        embeds: Iterable[Json] = (),
        components: Iterable[Json] = (),
    ) -> StoredMessage:
        """Store a message by the bot, e.g. one posted by a previous run (no validation)."""
        channel = self._channels[channel_id]
        msg = self._new_message(
            channel, {"content": content, "embeds": list(embeds), "components": list(components)}
        )
        self._keep(msg)
        return msg

    async def user_sends_dm(
        self,
        user: int | Json,
        content: str = "",
        *,
        files: Iterable[tuple[str, bytes]] = (),
    ) -> StoredMessage:
        """``user`` writes to the bot in their DM channel, with ``files`` attached, as Discord
        does: the message (MESSAGE_CREATE, to sessions with the DIRECT_MESSAGES intent; a DM's
        content and attachments need no privileged intent) lists each attachment's id, name,
        size, content type and a CDN ``url`` the bot downloads it from."""
        author = user if isinstance(user, dict) else p.user(int(user))
        user_id = int(author["id"])
        channel_id = self._dm_by_user.get(user_id)
        if channel_id is None:
            channel_id = self._dm_by_user[user_id] = p.snowflake()
            self._channels[channel_id] = p.dm_channel(channel_id, author)
        attachments: list[Json] = []
        for filename, data in files:
            attachment_id = p.snowflake()
            path = f"/attachments/{channel_id}/{attachment_id}/{filename}"
            self._cdn[path] = data
            url = f"http://{self.host}:{self.port}{path}?ex=0&is=0&hm=0"
            attachments.append(
                {
                    "id": str(attachment_id),
                    "filename": filename,
                    "size": len(data),
                    "content_type": "text/plain; charset=utf-8",
                    "url": url,
                    "proxy_url": url,
                }
            )
        msg = StoredMessage(
            id=p.snowflake(), channel_id=channel_id, guild_id=None, author=author,
            content=content, attachments=attachments,
        )  # fmt: skip
        self._keep(msg)
        await self.dispatch("MESSAGE_CREATE", msg.as_payload())
        return msg

    async def add_forum(
        self,
        guild_id: int,
        channel_id: int,
        name: str,
        *,
        tags: Iterable[str] = (),
        require_tag: bool = False,
    ) -> Json:
        """Add a forum channel (type 15) with these tags; a connected client gets
        CHANNEL_CREATE. ``require_tag``: a post without a tag is refused (40067)."""
        guild = self._guilds[guild_id]
        available = [
            {"id": str(p.snowflake()), "name": n, "moderated": False, "emoji_id": None,
             "emoji_name": None}
            for n in tags
        ]  # fmt: skip
        data = t.forum_payload(
            channel_id, name, guild_id=guild_id, tags=available, require_tag=require_tag
        )
        self._store_channel(guild, data)
        await self.dispatch("CHANNEL_CREATE", data)
        return data

    def threads(self, parent_id: int | None = None) -> list[Json]:
        """The threads (forum posts included) of a channel, or of every channel, oldest first."""
        return sorted(
            (
                c
                for c in self._channels.values()
                if t.is_thread(c) and (parent_id is None or int(c["parent_id"]) == parent_id)
            ),
            key=lambda c: int(c["id"]),
        )

    async def moderate_thread(
        self, thread_id: int, *, archived: bool | None = None, locked: bool | None = None
    ) -> None:
        """A moderator archives or locks a thread (THREAD_UPDATE to connected clients)."""
        meta = self._channels[thread_id]["thread_metadata"]
        if archived is not None:
            meta["archived"] = archived
            meta["archive_timestamp"] = p.iso_now()
        if locked is not None:
            meta["locked"] = locked
        await self.dispatch("THREAD_UPDATE", self._channels[thread_id])

    def set_bot_permissions(self, channel_id: int, permissions: int) -> None:
        """The bot's permissions in a guild channel (pins need Pin Messages or Manage
        Messages; deleting another author's message needs Manage Messages)."""
        self._bot_permissions[channel_id] = permissions

    def pinned(self, channel_id: int) -> list[StoredMessage]:
        """The pinned messages of a channel, in creation order."""
        return [m for m in self.messages(channel_id) if m.pinned]

    # -- inspection ----------------------------------------------------------------------------

    def messages(self, channel_id: int, *, include_deleted: bool = False) -> list[StoredMessage]:
        """Messages in a channel in creation order (ephemeral interaction replies excluded)."""
        return [m for m in self._messages.get(channel_id, []) if include_deleted or not m.deleted]

    def message(self, message_id: int) -> StoredMessage:
        return self._message_index[message_id]

    def commands(self, guild_id: int | None = None) -> list[Json]:
        """The registered application commands, global or for one guild."""
        if guild_id is None:
            return list(self._global_commands)
        return list(self._guild_commands.get(guild_id, []))

    def channel(self, channel_id: int) -> Json:
        return self._channels[channel_id]

    def gateway_frames(self) -> list[list[Json]]:
        """The DISPATCH frames (READY included) sent to each live gateway session, in order
        (its last 1000)."""
        return [list(s.frames) for s in self._sessions.values() if not s.ended]

    async def wait_until(self, predicate: Callable[[], bool], *, within: float = 5.0) -> None:
        """Wait until `predicate()` holds; re-checked after every request and gateway frame.

        Raises TimeoutError after `within` seconds.
        """
        async with asyncio.timeout(within):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    # -- fault injection -----------------------------------------------------------------------

    def fail_next(
        self,
        channel_id: int | None,
        kind: FaultKind,
        times: int = 1,
        *,
        retry_after: float = 0.05,
        delay: float = 0.5,
        is_global: bool = False,
        commit: bool = False,
    ) -> None:
        """Make the next `times` requests about `channel_id` (None: any request) fail with `kind`.

        A request is "about" a channel when the channel id is in its path, or it answers an
        interaction from that channel. `retry_after` applies to "rate_limited", `delay` to "slow".

        "slow" waits `delay` before handling the request, so a client that gives up meanwhile
        changed nothing. With ``commit=True`` the request is handled at once (a message is
        created, with its nonce) and only the answer comes `delay` late: Discord accepted the
        request, the client never heard so; a retry with the same nonce gets that message back.
        """
        if commit and kind != "slow":
            raise ValueError("commit applies to the 'slow' fault only")
        self._faults.setdefault(channel_id, []).append(
            _Fault(kind, times, retry_after, delay, is_global, commit)
        )

    # -- gateway control -------------------------------------------------------------------

    async def dispatch(self, event: str, data: Json) -> int:
        """Send a DISPATCH to every live session (kept for RESUME when disconnected).

        Returns the number of sessions it went to.
        """
        sent = 0
        for session in list(self._sessions.values()):
            if session.ended or not self._wants(session, event, data):
                continue
            session.seq += 1
            frame = {"op": 0, "t": event, "s": session.seq, "d": data}
            session.frames.append(frame)
            del session.frames[:-1000]
            sent += 1
            if session.conn is not None:
                await self._send(session.conn, frame)
        return sent

    async def disconnect_gateway(self, code: int | None = 4000, *, hold: bool = False) -> None:
        """Drop every gateway connection: close with `code`, or abort the TCP connection if None.

        With ``hold=True`` new connections wait (up to 30 s) until :meth:`release_gateway`,
        so a test can dispatch events that the client must get through RESUME.
        """
        if hold:
            self._gateway_open.clear()
        for conn in list(self._conns):
            conn.closed_by_us = True
            if conn.session is not None and conn.session.conn is conn:
                conn.session.conn = None
            if code is None:
                transport = conn.request.transport
                if transport is not None:
                    transport.abort()
            else:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        conn.ws.close(code=code, message=b"fake disconnect"), timeout=2.0
                    )
        self.counters.gateway["disconnect"] += 1

    def release_gateway(self) -> None:
        self._gateway_open.set()

    async def request_reconnect(self) -> None:
        """Send op 7 RECONNECT on every connection (the client should reconnect and RESUME)."""
        for conn in list(self._conns):
            await self._send(conn, {"op": 7, "d": None, "s": None, "t": None})

    async def invalidate_sessions(self) -> None:
        """Send op 9 INVALID_SESSION (not resumable): the client must IDENTIFY again."""
        for session in self._sessions.values():
            session.ended = True
        for conn in list(self._conns):
            await self._send(conn, {"op": 9, "d": False, "s": None, "t": None})

    # -- interactions ----------------------------------------------------------------------

    async def run_slash_command(
        self,
        guild_id: int | None,
        channel_id: int,
        user: int | Json,
        name: str,
        options: Mapping[str, Any] | None = None,
        *,
        member_roles: Iterable[int] = (),
        permissions: int = p.DEFAULT_MEMBER_PERMISSIONS,
        locale: str = "en-US",
        wait: bool = True,
        within: float = 5.0,
    ) -> InteractionRecord:
        """Invoke a registered chat-input command as `user`, as Discord would.

        The command MUST have been registered (bulk overwrite) for the guild or globally: Discord
        cannot send an interaction for a command it does not know. With `wait`, returns once the
        client sent its initial response. Raises LookupError, ValueError, TimeoutError.
        """
        command = self._find_command(name, guild_id)
        by_name = {o["name"]: o for o in command.get("options") or []}
        opts: list[Json] = []
        resolved: Json = {}
        for key, value in (options or {}).items():
            if key not in by_name:
                raise ValueError(f"command /{name} has no option {key!r}")
            opt_type = int(by_name[key]["type"])
            opts.append(
                {
                    "name": key,
                    "type": opt_type,
                    "value": self._option_value(opt_type, value, resolved),
                }
            )
        data: Json = {"id": command["id"], "name": name, "type": 1, "options": opts}
        if resolved:
            data["resolved"] = resolved
        if command.get("guild_id") is not None:
            data["guild_id"] = command["guild_id"]
        payload = self._interaction_payload(
            2,
            guild_id,
            channel_id,
            user,
            data,
            member_roles=member_roles,
            permissions=permissions,
            locale=locale,
        )
        return await self._start_interaction(payload, wait=wait, within=within)

    async def run_autocomplete(
        self,
        guild_id: int | None,
        channel_id: int,
        user: int | Json,
        name: str,
        options: Mapping[str, Any],
        *,
        focused: str,
        member_roles: Iterable[int] = (),
        permissions: int = p.DEFAULT_MEMBER_PERMISSIONS,
        locale: str = "en-US",
        within: float = 5.0,
    ) -> InteractionRecord:
        """Send the autocomplete interaction Discord sends while `user` types option `focused`
        of `/name` (`options` holds what is typed so far, as strings for the focused one).

        Returns once the client answered; its choices are in ``record.choices``.
        Raises LookupError, ValueError, TimeoutError.
        """
        command = self._find_command(name, guild_id)
        by_name = {o["name"]: o for o in command.get("options") or []}
        if focused not in options:
            raise ValueError(f"the focused option {focused!r} must be in options")
        opts: list[Json] = []
        for key, value in options.items():
            if key not in by_name:
                raise ValueError(f"command /{name} has no option {key!r}")
            opt: Json = {"name": key, "type": int(by_name[key]["type"]), "value": value}
            if key == focused:
                if not by_name[key].get("autocomplete"):
                    raise ValueError(f"option {key!r} of /{name} has no autocomplete")
                opt["focused"] = True
            opts.append(opt)
        data: Json = {"id": command["id"], "name": name, "type": 1, "options": opts}
        if command.get("guild_id") is not None:
            data["guild_id"] = command["guild_id"]
        payload = self._interaction_payload(
            4,
            guild_id,
            channel_id,
            user,
            data,
            member_roles=member_roles,
            permissions=permissions,
            locale=locale,
        )
        return await self._start_interaction(payload, wait=True, within=within)

    async def press_button(
        self,
        channel_id: int,
        message_id: int,
        custom_id: str,
        user: int | Json,
        *,
        member_roles: Iterable[int] = (),
        permissions: int = p.DEFAULT_MEMBER_PERMISSIONS,
        locale: str = "en-US",
        wait: bool = True,
        within: float = 5.0,
    ) -> InteractionRecord:
        """Press the button `custom_id` on a stored message. Raises LookupError, TimeoutError."""
        msg = self._message_index.get(message_id)
        if msg is None or msg.deleted or msg.channel_id != channel_id:
            raise LookupError(f"no message {message_id} in channel {channel_id}")
        component = next(
            (
                c
                for row in msg.components
                for c in row.get("components", [])
                if c.get("custom_id") == custom_id
            ),
            None,
        )
        if component is None:
            raise LookupError(f"message {message_id} has no component {custom_id!r}")
        data = {"custom_id": custom_id, "component_type": int(component["type"])}
        payload = self._interaction_payload(
            3,
            msg.guild_id,
            channel_id,
            user,
            data,
            member_roles=member_roles,
            permissions=permissions,
            locale=locale,
        )
        payload["message"] = msg.as_payload(with_guild=True)
        return await self._start_interaction(payload, wait=wait, within=within)

    # -- internals: world ------------------------------------------------------------------

    def _store_channel(self, guild: _Guild, data: Json) -> None:
        channel_id = int(data["id"])
        self._channels[channel_id] = data
        guild.channel_ids.append(channel_id)

    def _guild_create(self, guild: _Guild) -> Json:
        me = p.member(self.bot_user, roles=guild.bot_roles)
        return p.guild_create(
            guild.id,
            guild.name,
            owner_id=guild.owner_id,
            channels=[self._channels[c] for c in guild.channel_ids],
            roles=guild.roles.values(),
            members=[me],
        )

    def _channel_or_404(self, channel_id: int) -> Json:
        channel = self._channels.get(channel_id)
        if channel is None:
            raise ApiError(404, 10003, "Unknown Channel")
        return channel

    def _new_message(
        self, channel: Json, body: Json, *, extra: Json | None = None
    ) -> StoredMessage:
        guild_id = channel.get("guild_id")
        msg = StoredMessage(
            id=p.snowflake(),
            channel_id=int(channel["id"]),
            guild_id=None if guild_id is None else int(guild_id),
            author=self.bot_user,
            request=body,
            extra=dict(extra or {}),
        )
        msg.apply({k: v for k, v in body.items() if k != "flags"})
        msg.flags = int(body.get("flags") or 0)
        msg.attachments = [dict(a) for a in body.get("attachments") or []]
        return msg

    def _keep(self, msg: StoredMessage, *, visible: bool = True) -> None:
        self._message_index[msg.id] = msg
        if visible:
            self._messages.setdefault(msg.channel_id, []).append(msg)

    def _wants(self, session: _Session, event: str, data: Json) -> bool:
        if not event.startswith("MESSAGE_"):
            return True
        bit = _GUILD_MESSAGES if data.get("guild_id") is not None else _DIRECT_MESSAGES
        return bool(session.intents & bit)

    def _find_command(self, name: str, guild_id: int | None) -> Json:
        pools = (
            [*self._guild_commands.get(guild_id, [])] if guild_id else []
        ) + self._global_commands
        for cmd in pools:
            if cmd["name"] == name and int(cmd.get("type", 1)) == 1:
                return cmd
        raise LookupError(f"no command /{name} registered for guild {guild_id} or globally")

    def _option_value(self, opt_type: int, value: Any, resolved: Json) -> Any:
        if opt_type == 6:  # USER
            user = value if isinstance(value, dict) else p.user(int(value))
            resolved.setdefault("users", {})[user["id"]] = user
            return user["id"]
        if opt_type == 7:  # CHANNEL
            channel = self._channels[int(value)]
            resolved.setdefault("channels", {})[channel["id"]] = {
                **channel,
                "permissions": str(p.DEFAULT_MEMBER_PERMISSIONS),
            }
            return channel["id"]
        if opt_type == 8:  # ROLE
            for guild in self._guilds.values():
                if int(value) in guild.roles:
                    resolved.setdefault("roles", {})[str(value)] = guild.roles[int(value)]
            return str(value)
        return value

    def _interaction_payload(
        self,
        type_: int,
        guild_id: int | None,
        channel_id: int,
        user: int | Json,
        data: Json,
        *,
        member_roles: Iterable[int],
        permissions: int,
        locale: str,
    ) -> Json:
        user_payload = user if isinstance(user, dict) else p.user(int(user))
        channel = self._channels.get(channel_id) or p.text_channel(
            channel_id, "unknown", guild_id=guild_id
        )
        payload: Json = {
            "id": str(p.snowflake()),
            "application_id": str(self.application_id),
            "type": type_,
            "data": data,
            "token": "aW50ZXJhY3Rpb246" + secrets.token_urlsafe(48),
            "version": 1,
            "channel_id": str(channel_id),
            "channel": {**channel, "permissions": str(permissions)},
            "app_permissions": str(p.DEFAULT_MEMBER_PERMISSIONS),
            "locale": locale,
            "entitlements": [],
            "attachment_size_limit": p.DEFAULT_ATTACHMENT_SIZE_LIMIT,
        }
        if guild_id is not None:
            roles = [int(r) for r in member_roles]
            payload["guild_id"] = str(guild_id)
            payload["guild"] = {"id": str(guild_id), "locale": "en-US", "features": []}
            payload["guild_locale"] = "en-US"
            payload["member"] = p.member(user_payload, roles=roles, permissions=permissions)
            payload["authorizing_integration_owners"] = {"0": str(guild_id)}
            payload["context"] = 0  # GUILD
        else:
            payload["user"] = user_payload
            payload["authorizing_integration_owners"] = {"0": "0"}
            payload["context"] = 1  # BOT_DM
        return payload

    async def _start_interaction(
        self, payload: Json, *, wait: bool, within: float
    ) -> InteractionRecord:
        guild_id = payload.get("guild_id")
        record = InteractionRecord(
            id=int(payload["id"]),
            token=payload["token"],
            type=int(payload["type"]),
            channel_id=int(payload["channel_id"]),
            guild_id=None if guild_id is None else int(guild_id),
            payload=payload,
            created_at=self.clock(),
        )
        self.interactions.append(record)
        self._interactions_by_token[record.token] = record
        if not self._sessions or all(s.ended for s in self._sessions.values()):
            raise RuntimeError("no gateway session: connect the client before sending interactions")
        await self.dispatch("INTERACTION_CREATE", payload)
        if wait:
            await record.wait_for_callback(within=within)
        return record

    # -- internals: HTTP -------------------------------------------------------------------

    def _add_routes(self, app: web.Application) -> None:
        def add(
            method: str,
            path: str,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
            *,
            bucket: str | None = None,
            auth: bool = True,
        ) -> None:
            route = app.router.add_route(method, API_PREFIX + path, handler)
            self._meta[route] = _RouteMeta(path, bucket or f"{method} {path}", auth)

        add("GET", "/gateway", self._get_gateway, auth=False)
        add("GET", "/gateway/bot", self._get_gateway_bot)
        add("GET", "/users/@me", self._get_me)
        add("GET", "/oauth2/applications/@me", self._get_application)
        add("POST", "/users/@me/channels", self._create_dm)
        for path in (
            "/applications/{application_id}/commands",
            "/applications/{application_id}/guilds/{guild_id}/commands",
        ):
            add("GET", path, self._get_commands)
            add("PUT", path, self._put_commands)
        add("GET", "/channels/{channel_id}", self._get_channel)
        add("PATCH", "/channels/{channel_id}", self._modify_channel)
        add("POST", "/channels/{channel_id}/threads", self._create_thread)
        add("POST", "/channels/{channel_id}/messages/{message_id}/threads", self._thread_on_message)
        add("GET", "/guilds/{guild_id}/threads/active", self._active_threads)
        add("GET", "/channels/{channel_id}/threads/archived/public", self._archived_threads)
        add("GET", "/guilds/{guild_id}", self._get_guild)
        add("GET", "/guilds/{guild_id}/members/{user_id}", self._get_member)
        add(
            "POST", "/channels/{channel_id}/messages", self._create_message, bucket="message_create"
        )
        add("GET", "/channels/{channel_id}/messages/{message_id}", self._get_message)
        add("PATCH", "/channels/{channel_id}/messages/{message_id}", self._edit_message)
        add("DELETE", "/channels/{channel_id}/messages/{message_id}", self._delete_message)
        add("PUT", "/channels/{channel_id}/messages/pins/{message_id}", self._pin_message)
        add("DELETE", "/channels/{channel_id}/messages/pins/{message_id}", self._unpin_message)
        add(
            "POST",
            "/interactions/{interaction_id}/{token}/callback",
            self._interaction_callback,
            auth=False,
        )
        add("POST", "/webhooks/{application_id}/{token}", self._create_followup, auth=False)
        for method, handler in (
            ("GET", self._get_webhook_message),
            ("PATCH", self._edit_webhook_message),
            ("DELETE", self._delete_webhook_message),
        ):
            add(
                method,
                "/webhooks/{application_id}/{token}/messages/{message_id}",
                handler,
                auth=False,
            )
        route = app.router.add_route("GET", GATEWAY_PATH, self._gateway)
        self._meta[route] = _RouteMeta(GATEWAY_PATH, "gateway", False)
        # the CDN (cdn.discordapp.com on the real service): attachment downloads, no token
        route = app.router.add_route("GET", "/attachments/{path:.+}", self._get_attachment)
        self._meta[route] = _RouteMeta("/attachments", "cdn", False)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        meta = self._meta.get(request.match_info.route)
        if meta is None:
            return self._count(_json({"message": "404: Not Found", "code": 0}, 404))
        self.counters.requests[f"{request.method} {meta.template}"] += 1
        if meta.bucket in ("gateway", "cdn"):
            return await handler(request)
        if meta.auth and request.headers.get("Authorization") != f"Bot {self.token}":
            return self._count(_json({"message": "401: Unauthorized", "code": 0}, 401))
        if meta.auth and (limited := self._check_global()) is not None:
            return self._count(limited)
        fault = self._take_fault(self._major_channel(request))
        if fault is not None:
            if fault.kind == "slow":
                if not fault.commit:
                    await asyncio.sleep(fault.delay)
            else:
                return self._count(self._fault_response(fault))
        bucket = self._bucket_for(meta, request)
        now = self.clock()
        if now >= bucket.reset_at:
            bucket.count, bucket.reset_at = 0, now + bucket.window
        if bucket.count >= bucket.limit:
            self.counters.rate_limited["bucket"] += 1
            return self._count(
                self._too_many(bucket.reset_at - now, is_global=False, scope="user", bucket=bucket)
            )
        bucket.count += 1
        try:
            response = await handler(request)
        except ApiError as exc:
            response = _json(exc.body(), exc.status)
        response.headers.update(self._bucket_headers(bucket))
        if fault is not None and fault.commit:
            self._changed.set()  # done already; only the answer is late
            await asyncio.sleep(fault.delay)
        return self._count(response)

    def _count(self, response: web.StreamResponse) -> web.StreamResponse:
        response.headers["Date"] = email.utils.formatdate(
            time.time() + self.date_offset, usegmt=True
        )
        self.counters.statuses[response.status] += 1
        self._changed.set()
        return response

    def _check_global(self) -> web.Response | None:
        now = self.clock()
        window = self.global_rate.window * self.rate_scale
        if now >= self._global_reset_at:
            self._global_count, self._global_reset_at = 0, now + window
        if self._global_count >= self.global_rate.limit:
            self.counters.rate_limited["global"] += 1
            return self._too_many(self._global_reset_at - now, is_global=True, scope="global")
        self._global_count += 1
        return None

    def _major_channel(self, request: web.Request) -> int | None:
        info = request.match_info
        if "channel_id" in info:
            return int(info["channel_id"])
        record = self._interactions_by_token.get(info.get("token", ""))
        return None if record is None else record.channel_id

    def _take_fault(self, channel_id: int | None) -> _Fault | None:
        for key in (channel_id, None) if channel_id is not None else (None,):
            queue = self._faults.get(key)
            if queue:
                fault = queue[0]
                fault.times -= 1
                if fault.times <= 0:
                    queue.pop(0)
                return fault
        return None

    def _fault_response(self, fault: _Fault) -> web.Response:
        if fault.kind == "rate_limited":
            self.counters.rate_limited["injected"] += 1
            scope = "global" if fault.is_global else "user"
            return self._too_many(fault.retry_after, is_global=fault.is_global, scope=scope)
        if fault.kind == "bad_gateway":
            # Cloudflare answers 502 with an HTML page, not JSON.
            return web.Response(
                status=502,
                text="<html><body>502 Bad Gateway</body></html>",
                content_type="text/html",
            )
        status, code, message = _ERROR_FAULTS[fault.kind]
        return _json({"message": message, "code": code}, status)

    def _too_many(
        self, retry_after: float, *, is_global: bool, scope: str, bucket: _Bucket | None = None
    ) -> web.Response:
        retry_after = max(retry_after, 0.001)
        headers = {
            "Retry-After": str(math.ceil(retry_after)),
            # Without Via, discord.py takes a 429 for a Cloudflare ban and raises.
            "Via": "1.1 google",
            "X-RateLimit-Scope": scope,
        }
        if is_global:
            headers["X-RateLimit-Global"] = "true"
        elif bucket is not None:
            headers.update(self._bucket_headers(bucket))
        body = {
            "message": "You are being rate limited.",
            "retry_after": round(retry_after, 3),
            "global": is_global,
        }
        return _json(body, 429, headers)

    def _bucket_for(self, meta: _RouteMeta, request: web.Request) -> _Bucket:
        info = request.match_info
        major = (
            info.get("channel_id")
            or info.get("guild_id")
            or info.get("interaction_id")
            or info.get("token", "")
        )
        key = (meta.bucket, major)
        bucket = self._buckets.get(key)
        if bucket is None:
            rate = self.message_rate if meta.bucket == "message_create" else self.default_rate
            digest = hashlib.sha1(meta.bucket.encode()).hexdigest()[:32]
            bucket = self._buckets[key] = _Bucket(digest, rate.limit, rate.window * self.rate_scale)
        return bucket

    def _bucket_headers(self, bucket: _Bucket) -> dict[str, str]:
        # Rounded up so a client sleeping exactly Reset-After never arrives early.
        reset_after = math.ceil(max(bucket.reset_at - self.clock(), 0.0) * 1000) / 1000
        return {
            "X-RateLimit-Limit": str(bucket.limit),
            "X-RateLimit-Remaining": str(max(bucket.limit - bucket.count, 0)),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": bucket.hash,
        }

    async def _read_body(self, request: web.Request) -> Json:
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            body: Json = json.loads(str(form.get("payload_json") or "{}"))
            files = [
                v
                for k, v in form.items()
                if k.startswith("files[") and isinstance(v, web.FileField)
            ]
            body["attachments"] = [self._attachment(f) for f in files]
            return body
        if not request.can_read_body:
            return {}
        try:
            data = await request.json()
        except json.JSONDecodeError as exc:
            raise ApiError(400, 50109, "The request body contains invalid JSON.") from exc
        if not isinstance(data, dict):
            raise ApiError(400, 50035, "Invalid Form Body", {"_errors": [_TYPE_OBJECT]})
        return data

    def _attachment(self, upload: web.FileField) -> Json:
        attachment_id = p.snowflake()
        url = f"http://{self.host}:{self.port}/attachments/{attachment_id}/{upload.filename}"
        return {
            "id": str(attachment_id),
            "filename": upload.filename,
            "size": len(upload.file.read()),
            "content_type": upload.content_type,
            "url": url,
            "proxy_url": url,
        }

    # -- REST handlers ---------------------------------------------------------------------

    async def _get_attachment(self, request: web.Request) -> web.Response:
        path = request.path
        self.cdn_requests.append(path)
        data = self._cdn.get(path)
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _get_gateway(self, request: web.Request) -> web.Response:
        return _json({"url": self.gateway_url})

    async def _get_gateway_bot(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}
        return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _get_me(self, request: web.Request) -> web.Response:
        return _json(self.bot_user)

    async def _get_application(self, request: web.Request) -> web.Response:
        owner = p.user(p.snowflake(), "owner")
        app = p.application(
            self.application_id, str(self.bot_user["username"]), owner, flags=self.application_flags
        )
        app["interactions_endpoint_url"] = self.interactions_endpoint_url
        return _json(app)

    def _check_app(self, request: web.Request) -> None:
        if int(request.match_info["application_id"]) != self.application_id:
            raise ApiError(403, 50001, "Missing Access")

    async def _get_commands(self, request: web.Request) -> web.Response:
        self._check_app(request)
        guild_id = request.match_info.get("guild_id")
        return _json(self.commands(None if guild_id is None else int(guild_id)))

    async def _put_commands(self, request: web.Request) -> web.Response:
        self._check_app(request)
        raw_guild = request.match_info.get("guild_id")
        guild_id = None if raw_guild is None else int(raw_guild)
        if guild_id is not None and guild_id not in self._guilds:
            raise ApiError(403, 50001, "Missing Access")
        try:
            body = await request.json()
        except json.JSONDecodeError as exc:
            raise ApiError(400, 50109, "The request body contains invalid JSON.") from exc
        if not isinstance(body, list):
            raise ApiError(400, 50035, "Invalid Form Body", {"_errors": [_TYPE_ARRAY]})
        errors: Json = {}
        if len(body) > 100:
            _put_error(errors, [], "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
        for i, cmd in enumerate(body):
            if int(cmd.get("type", 1)) == 1 and not _COMMAND_NAME.match(cmd.get("name", "")):
                _put_error(
                    errors,
                    [i, "name"],
                    "APPLICATION_COMMAND_INVALID_NAME",
                    "Command name is invalid",
                )
            _max_len(errors, [i, "description"], cmd.get("description"), 100)
        if errors:
            raise ApiError(400, 50035, "Invalid Form Body", errors)
        old = {(c["name"], int(c.get("type", 1))): c for c in self.commands(guild_id)}
        stored = []
        for cmd in body:
            kind = int(cmd.get("type", 1))
            previous = old.get((cmd["name"], kind))
            stored.append(
                {
                    "id": previous["id"] if previous else str(p.snowflake()),
                    "application_id": str(self.application_id),
                    "version": str(p.snowflake()),
                    "type": kind,
                    "description": "",
                    "options": [],
                    "default_member_permissions": None,
                    "dm_permission": True,
                    "nsfw": False,
                    **cmd,
                    "guild_id": raw_guild,
                }
            )
        if guild_id is None:
            self._global_commands = stored
        else:
            self._guild_commands[guild_id] = stored
        return _json(stored)

    async def _get_channel(self, request: web.Request) -> web.Response:
        return _json(self._channel_or_404(int(request.match_info["channel_id"])))

    def _guild_or_404(self, request: web.Request) -> _Guild:
        guild = self._guilds.get(int(request.match_info["guild_id"]))
        if guild is None:
            raise ApiError(404, 10004, "Unknown Guild")
        return guild

    async def _get_guild(self, request: web.Request) -> web.Response:
        guild = self._guild_or_404(request)
        return _json(
            {
                "id": str(guild.id),
                "name": guild.name,
                "owner_id": str(guild.owner_id),
                "roles": list(guild.roles.values()),
                "features": [],
            }
        )

    async def _get_member(self, request: web.Request) -> web.Response:
        guild = self._guild_or_404(request)
        if int(request.match_info["user_id"]) != int(self.bot_user["id"]):
            raise ApiError(404, 10007, "Unknown Member")
        return _json(p.member(self.bot_user, roles=guild.bot_roles))

    async def _create_dm(self, request: web.Request) -> web.Response:
        body = await self._read_body(request)
        recipient = int(body.get("recipient_id") or 0)
        if not recipient:
            raise ApiError(
                400,
                50035,
                "Invalid Form Body",
                {
                    "recipient_id": {
                        "_errors": [
                            {"code": "BASE_TYPE_REQUIRED", "message": "This field is required"}
                        ]
                    }
                },
            )
        channel_id = self._dm_by_user.get(recipient)
        if channel_id is None:
            channel_id = self._dm_by_user[recipient] = p.snowflake()
            self._channels[channel_id] = p.dm_channel(channel_id, p.user(recipient))
        return _json(self._channels[channel_id])

    async def _create_message(self, request: web.Request) -> web.Response:
        channel = self._channel_or_404(int(request.match_info["channel_id"]))
        body = await self._read_body(request)
        validate_message(body)
        if int(channel.get("type", 0)) == t.FORUM:  # a forum takes posts (threads) only
            raise ApiError(400, 40058, "Cannot send a message in a forum channel")
        if channel.get("guild_id") is not None:
            perms = self.bot_permissions(int(channel["id"]))
            needed = SEND_MESSAGES_IN_THREADS if t.is_thread(channel) else SEND_MESSAGES
            if not perms & VIEW_CHANNEL:
                raise ApiError(403, 50001, "Missing Access")
            if not perms & needed:
                raise ApiError(403, 50013, "Missing Permissions")
            if not perms & EMBED_LINKS and body.get("embeds"):
                body = {**body, "embeds": []}  # Discord drops them silently
        if t.is_thread(channel):
            await self._send_into_thread(channel)
        nonce = _valid_nonce(body)
        # "If true and nonce is present, it will be checked for uniqueness in the past few
        # minutes. If another message was created by the same author with the same nonce, that
        # message will be returned and no new message will be created." The same author, in any
        # channel: a nonce is not scoped to the channel.
        key = (int(self.bot_user["id"]), str(nonce))
        if nonce is not None and body.get("enforce_nonce"):
            prior = self._nonces.get(key)
            if prior is not None and self.clock() - prior[1] <= self.nonce_window:
                self.counters.nonce_hits += 1
                return await self._answer_create(prior[0])
        msg = self._new_message(channel, body)
        msg.flags &= ~EPHEMERAL  # only interaction replies can be ephemeral
        self._keep(msg)
        self._counted(channel, msg)
        if nonce is not None:
            self._nonces[key] = (msg, self.clock())
        await self.dispatch("MESSAGE_CREATE", msg.as_payload(with_guild=True))
        return await self._answer_create(msg)

    async def _answer_create(self, msg: StoredMessage) -> web.Response:
        if self.create_latency > 0:
            self._changed.set()  # done already; only the answer is late
            await asyncio.sleep(self.create_latency)
        return _json(msg.as_payload())

    def _message_or_404(self, request: web.Request) -> StoredMessage:
        self._channel_or_404(int(request.match_info["channel_id"]))
        msg = self._message_index.get(int(request.match_info["message_id"]))
        if msg is None or msg.deleted or msg.channel_id != int(request.match_info["channel_id"]):
            raise ApiError(404, 10008, "Unknown Message")
        return msg

    async def _get_message(self, request: web.Request) -> web.Response:
        return _json(self._message_or_404(request).as_payload())

    async def _edit_message(self, request: web.Request) -> web.Response:
        msg = self._message_or_404(request)
        if int(msg.author["id"]) != self.application_id:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._thread_writable(msg.channel_id)
        body = await self._read_body(request)
        await self._edit(msg, body)
        return _json(msg.as_payload())

    async def _edit(self, msg: StoredMessage, body: Json) -> None:
        merged = {"content": msg.content, "embeds": msg.embeds, "components": msg.components}
        merged.update({k: v for k, v in body.items() if k in merged})
        validate_message(merged, edit=True)
        if not (merged["content"] or merged["embeds"] or merged["components"] or msg.attachments):
            raise ApiError(400, 50006, "Cannot send an empty message")
        msg.apply(body)
        msg.edits.append(body)
        if not msg.ephemeral:
            await self.dispatch("MESSAGE_UPDATE", msg.as_payload(with_guild=True))

    def _require(self, channel_id: int, *bits: int) -> None:
        """403 Missing Permissions (50013) unless the bot has one of ``bits`` in a guild
        channel (DMs have no permissions to lack)."""
        if self._channels[channel_id].get("guild_id") is None:
            return
        have = self._bot_permissions.get(channel_id, BOT_PERMISSIONS)
        if not any(have & bit for bit in bits):
            raise ApiError(403, 50013, "Missing Permissions")

    async def _pin_message(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        self._channel_or_404(channel_id)
        self._require(channel_id, PIN_MESSAGES, MANAGE_MESSAGES)
        msg = self._message_or_404(request)
        msg.pinned = True
        return web.Response(status=204)

    async def _unpin_message(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        self._channel_or_404(channel_id)
        self._require(channel_id, PIN_MESSAGES, MANAGE_MESSAGES)
        msg = self._message_or_404(request)
        msg.pinned = False
        return web.Response(status=204)

    async def _delete_message(self, request: web.Request) -> web.Response:
        msg = self._message_or_404(request)
        self._thread_writable(msg.channel_id)
        if int(msg.author["id"]) != self.application_id:
            self._require(msg.channel_id, MANAGE_MESSAGES)
        msg.pinned = False
        msg.deleted = True
        event = {"id": str(msg.id), "channel_id": str(msg.channel_id)}
        if msg.guild_id is not None:
            event["guild_id"] = str(msg.guild_id)
        await self.dispatch("MESSAGE_DELETE", event)
        return web.Response(status=204)

    # -- threads and forums ------------------------------------------------------------------

    async def _create_thread(self, request: web.Request) -> web.Response:
        """``POST /channels/{id}/threads``: a forum post (a thread with its first message) in
        a forum, a thread without a message in a text channel."""
        channel = self._channel_or_404(int(request.match_info["channel_id"]))
        body = await self._read_body(request)
        kind = int(channel.get("type", 0))
        if kind == t.FORUM:
            return await self._forum_post(channel, body)
        if kind not in (t.TEXT, t.ANNOUNCEMENT):
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        self._thread_rights(channel, CREATE_PUBLIC_THREADS)
        self._invalid(t.validate(body, "CreateTextThreadWithMessageRequest"))
        thread = self._new_thread(channel, body, kind=int(body.get("type") or t.PRIVATE_THREAD))
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return t.created(thread)

    async def _forum_post(self, forum: Json, body: Json) -> web.Response:
        self._thread_rights(forum, SEND_MESSAGES)  # a forum's "Create Posts"
        self._invalid(t.validate(body, "CreateForumThreadRequest"))
        message = body["message"]
        try:
            validate_message(message)
        except ApiError as exc:
            nested = {"message": exc.errors} if exc.errors else None
            raise ApiError(exc.status, exc.code, exc.message, nested) from None
        try:
            t.check_tags(forum, list(body.get("applied_tags") or []))
        except ThreadRefused as exc:
            raise ApiError(exc.status, exc.code, exc.message, exc.errors) from None
        thread = self._new_thread(forum, body)
        first = self._new_message(thread, message)
        first.id = int(thread["id"])  # a post's first message has the post's id
        first.flags &= ~EPHEMERAL
        self._keep(first)
        self._counted(thread, first)
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        await self.dispatch("MESSAGE_CREATE", first.as_payload(with_guild=True))
        return await self._created_late({**thread, "message": first.as_payload()})

    async def _thread_on_message(self, request: web.Request) -> web.Response:
        """``POST /channels/{c}/messages/{m}/threads``: a thread started from a message, with
        the message's id; one per message."""
        channel = self._channel_or_404(int(request.match_info["channel_id"]))
        if int(channel.get("type", 0)) not in (t.TEXT, t.ANNOUNCEMENT):
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        msg = self._message_or_404(request)
        body = await self._read_body(request)
        self._invalid(t.validate(body, "CreateTextThreadWithMessageRequest"))
        self._thread_rights(channel, CREATE_PUBLIC_THREADS)
        if msg.flags & HAS_THREAD:
            raise ApiError(400, 160004, "A thread has already been created for this message")
        thread = self._new_thread(channel, body, thread_id=msg.id)
        msg.flags |= HAS_THREAD
        msg.extra["thread"] = thread
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return await self._created_late(thread)

    async def _active_threads(self, request: web.Request) -> web.Response:
        guild = self._guild_or_404(request)
        threads = [
            c
            for c in self.threads()
            if int(c["guild_id"]) == guild.id and not c["thread_metadata"]["archived"]
        ]
        return _json({"threads": threads, "members": []})

    async def _archived_threads(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        self._channel_or_404(channel_id)
        threads = [
            c
            for c in reversed(self.threads(channel_id))
            if c["thread_metadata"]["archived"] and c["type"] == t.PUBLIC_THREAD
        ]
        return _json({"threads": threads, "members": [], "has_more": False})

    async def _modify_channel(self, request: web.Request) -> web.Response:
        """``PATCH /channels/{id}`` of a thread (the double models no other channel edit):
        unarchiving needs Send Messages unless the thread is locked; locking, flags and tags
        need Manage Threads; an archived thread takes no change but being unarchived."""
        channel = self._channel_or_404(int(request.match_info["channel_id"]))
        if not t.is_thread(channel):
            raise ApiError(403, 50013, "Missing Permissions")
        body = await self._read_body(request)
        self._invalid(t.validate(body, "UpdateThreadRequestPartial"))
        meta = channel["thread_metadata"]
        manage = bool(self.bot_permissions(int(channel["id"])) & MANAGE_THREADS)
        mine = str(channel["owner_id"]) == str(self.bot_user["id"])
        if (meta["locked"] or {"locked", "flags", "applied_tags"} & set(body)) and not manage:
            raise ApiError(403, 50013, "Missing Permissions")
        if not (mine or manage):
            raise ApiError(403, 50013, "Missing Permissions")
        if meta["archived"] and body.get("archived") is not False:
            raise ApiError(400, 50083, "Thread is archived")
        if "applied_tags" in body:
            parent = self._channels[int(channel["parent_id"])]
            try:
                t.check_tags(parent, list(body["applied_tags"] or []))
            except ThreadRefused as exc:
                raise ApiError(exc.status, exc.code, exc.message, exc.errors) from None
            channel["applied_tags"] = [str(x) for x in body["applied_tags"] or []]
        for key in ("archived", "locked", "auto_archive_duration"):
            if body.get(key) is not None:
                meta[key] = body[key]
        for key in ("name", "flags"):
            if body.get(key) is not None:
                channel[key] = body[key]
        await self.dispatch("THREAD_UPDATE", channel)
        return _json(channel)

    def _new_thread(
        self, parent: Json, body: Json, *, thread_id: int | None = None, kind: int = t.PUBLIC_THREAD
    ) -> Json:
        thread = t.thread_payload(
            thread_id or p.snowflake(),
            parent,
            str(body["name"]),
            str(self.bot_user["id"]),
            auto_archive=int(
                body.get("auto_archive_duration")
                or parent.get("default_auto_archive_duration")
                or 1440
            ),
            applied_tags=[str(x) for x in body.get("applied_tags") or []],
            kind=kind,
        )
        self._channels[int(thread["id"])] = thread
        return thread

    def _thread_rights(self, channel: Json, needed: int) -> None:
        perms = self.bot_permissions(int(channel["id"]))
        if not perms & VIEW_CHANNEL:
            raise ApiError(403, 50001, "Missing Access")
        if not perms & needed:
            raise ApiError(403, 50013, "Missing Permissions")

    @staticmethod
    def _invalid(errors: Json) -> None:
        if errors:
            raise ApiError(400, 50035, "Invalid Form Body", errors)

    async def _send_into_thread(self, thread: Json) -> None:
        """A message to a thread: refused in a locked one (without Manage Threads); an archived
        one is unarchived by it."""
        meta = thread["thread_metadata"]
        if meta["locked"] and not self.bot_permissions(int(thread["id"])) & MANAGE_THREADS:
            raise ApiError(400, 160005, "Thread is locked")
        if meta["archived"]:
            meta["archived"] = False
            meta["archive_timestamp"] = p.iso_now()
            await self.dispatch("THREAD_UPDATE", thread)

    def _thread_writable(self, channel_id: int) -> None:
        """Edits and deletes in a thread: 50083 while it is archived, 160005 while it is locked
        (without Manage Threads)."""
        channel = self._channels.get(channel_id)
        if channel is None or not t.is_thread(channel):
            return
        meta = channel["thread_metadata"]
        if meta["archived"]:
            raise ApiError(400, 50083, "Thread is archived")
        if meta["locked"] and not self.bot_permissions(channel_id) & MANAGE_THREADS:
            raise ApiError(400, 160005, "Thread is locked")

    def _counted(self, channel: Json, msg: StoredMessage) -> None:
        if t.is_thread(channel):
            channel["message_count"] += 1
            channel["total_message_sent"] += 1
            channel["last_message_id"] = str(msg.id)

    async def _created_late(self, data: Json) -> web.Response:
        """201 with ``data``, ``create_latency`` late (as message creates are)."""
        if self.create_latency > 0:
            self._changed.set()  # done already; only the answer is late
            await asyncio.sleep(self.create_latency)
        return t.created(data)

    # -- interaction handlers ----------------------------------------------------------------

    def _interaction_message(self, record: InteractionRecord, body: Json) -> StoredMessage:
        channel = self._channels.get(record.channel_id) or record.payload["channel"]
        invoker = record.payload.get("member", {}).get("user") or record.payload.get("user")
        name = (record.payload.get("data") or {}).get("name") or ""
        extra: Json = {
            "webhook_id": str(self.application_id),
            "application_id": str(self.application_id),
            # discord.py needs interaction.name and interaction.user on such messages.
            "interaction": {
                "id": str(record.id),
                "type": record.type,
                "name": name,
                "user": invoker,
            },
            "interaction_metadata": {
                "id": str(record.id),
                "type": record.type,
                "user": invoker,
                "authorizing_integration_owners": record.payload["authorizing_integration_owners"],
            },
        }
        return self._new_message(channel, body, extra=extra)

    async def _post_visible(self, msg: StoredMessage) -> None:
        self._keep(msg, visible=not msg.ephemeral)
        if not msg.ephemeral:
            await self.dispatch("MESSAGE_CREATE", msg.as_payload(with_guild=True))

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        record = self._interactions_by_token.get(request.match_info["token"])
        if record is None or str(record.id) != request.match_info["interaction_id"]:
            raise ApiError(404, 10062, "Unknown interaction")
        if record.callback is not None:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        if self.clock() - record.created_at > self.interaction_deadline:
            raise ApiError(404, 10062, "Unknown interaction")
        body = await self._read_body(request)
        kind = int(body.get("type", 0))
        data: Json = body.get("data") or {}
        # An autocomplete interaction (4) is answered with choices (8) and nothing else.
        autocomplete = record.type == 4
        if (
            kind not in (4, 5, 6, 7, 8, 9)
            or (kind in (6, 7) and record.type != 3)
            or (kind == 8) != autocomplete
        ):
            raise ApiError(
                400,
                50035,
                "Invalid Form Body",
                {
                    "type": {
                        "_errors": [
                            {
                                "code": "INTERACTION_RESPONSE_TYPE_INVALID",
                                "message": "Invalid interaction response type",
                            }
                        ]
                    }
                },
            )
        resource: Json = {"type": kind}
        if kind == 4:
            validate_message(data)
            record.original = self._interaction_message(record, data)
            await self._post_visible(record.original)
        elif kind == 5:
            flags = LOADING | (int(data.get("flags") or 0) & EPHEMERAL)
            record.original = self._interaction_message(record, {"flags": flags})
            await self._post_visible(record.original)
        elif kind == 7:
            pressed = self._message_index[int(record.payload["message"]["id"])]
            await self._edit(pressed, data)
        elif kind == 8:
            _validate_choices(data)
        record.callback = body
        record._notify()
        if kind in (4, 5) and record.original is not None:
            resource["message"] = record.original.as_payload()
        elif kind == 7:
            resource["message"] = self._message_index[
                int(record.payload["message"]["id"])
            ].as_payload()
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        interaction: Json = {
            "id": str(record.id),
            "type": record.type,
            "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(int(data.get("flags") or 0) & EPHEMERAL),
        }
        if "message" in resource:
            interaction["response_message_id"] = resource["message"]["id"]
        return _json({"interaction": interaction, "resource": resource})

    def _webhook_record(self, request: web.Request) -> InteractionRecord:
        record = self._interactions_by_token.get(request.match_info["token"])
        if record is None or int(request.match_info["application_id"]) != self.application_id:
            raise ApiError(404, 10015, "Unknown Webhook")
        if record.callback is None:
            # Follow-ups and edits exist only after the initial response.
            raise ApiError(404, 10015, "Unknown Webhook")
        return record

    def _webhook_message(self, record: InteractionRecord, message_id: str) -> StoredMessage:
        if message_id == "@original":
            msg = record.original
            if msg is None and record.type == 3 and record.callback_type in (6, 7):
                msg = self._message_index.get(int(record.payload["message"]["id"]))
        else:
            msg = next((m for m in record.followups if m.id == int(message_id)), None)
        if msg is None or msg.deleted:
            raise ApiError(404, 10008, "Unknown Message")
        return msg

    async def _create_followup(self, request: web.Request) -> web.Response:
        record = self._webhook_record(request)
        body = await self._read_body(request)
        validate_message(body)
        loading = record.original
        if (
            record.callback_type == 5
            and loading is not None
            and loading.flags & LOADING
            and not record.followups
        ):
            # The first follow-up after a defer replaces the "thinking" message and keeps the
            # defer's ephemeral state, whatever flags it asks for.
            loading.flags &= ~LOADING
            loading.apply({k: v for k, v in body.items() if k != "flags"})
            loading.request = body
            msg = loading
            if not msg.ephemeral:
                await self.dispatch("MESSAGE_UPDATE", msg.as_payload(with_guild=True))
        else:
            msg = self._interaction_message(record, body)
            await self._post_visible(msg)
        record.followups.append(msg)
        record._notify()
        if request.query.get("wait") in ("1", "true", "True"):
            return _json(msg.as_payload())
        return web.Response(status=204)

    async def _get_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_record(request)
        return _json(self._webhook_message(record, request.match_info["message_id"]).as_payload())

    async def _edit_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_record(request)
        msg = self._webhook_message(record, request.match_info["message_id"])
        body = await self._read_body(request)
        was_loading = bool(msg.flags & LOADING)
        msg.flags &= ~LOADING
        try:
            await self._edit(msg, body)
        except ApiError:
            msg.flags |= LOADING if was_loading else 0
            raise
        if request.match_info["message_id"] == "@original":
            record.original_edits.append(body)
        record._notify()
        return _json(msg.as_payload())

    async def _delete_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_record(request)
        msg = self._webhook_message(record, request.match_info["message_id"])
        msg.deleted = True
        record._notify()
        return web.Response(status=204)

    # -- gateway ---------------------------------------------------------------------------

    async def _send(self, conn: _Conn, frame: Json) -> None:
        if conn.ws.closed:
            return
        try:
            # JSON text frames: discord.py asks for zlib-stream but inflates binary frames only.
            await conn.ws.send_str(json.dumps(frame))
        except (ConnectionError, RuntimeError):
            log.debug("gateway send failed; the frame stays queued for RESUME")

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(timeout=2.0)
        await ws.prepare(request)
        conn = _Conn(ws, request)
        self._conns.add(conn)
        self.counters.gateway["connect"] += 1
        self.gateway_queries.append(dict(request.query))
        try:
            await asyncio.wait_for(self._gateway_open.wait(), timeout=30.0)
            hello = {
                "heartbeat_interval": int(self.heartbeat_interval * 1000),
                "_trace": ["fake-discord"],
            }
            await self._send(conn, {"op": 10, "d": hello, "s": None, "t": None})
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    await ws.close(code=4002, message=b"Error while decoding payload.")
                    break
                await self._on_frame(conn, json.loads(msg.data))
        finally:
            self._conns.discard(conn)
            session = conn.session
            if session is not None and session.conn is conn:
                session.conn = None
                if not conn.closed_by_us and ws.close_code in (1000, 1001):
                    session.ended = True  # a clean close by the client ends the session
        return ws

    async def _on_frame(self, conn: _Conn, frame: Json) -> None:
        self._changed.set()
        op = frame.get("op")
        data = frame.get("d")
        if op == 1:
            self.counters.gateway["heartbeat"] += 1
            await self._send(conn, {"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._identify(conn, data or {})
        elif op == 6:
            await self._resume(conn, data or {})
        elif op in (3, 4, 8):
            self.counters.gateway[f"op{op}"] += 1
        else:
            await conn.ws.close(code=4001, message=b"Unknown opcode.")

    async def _identify(self, conn: _Conn, data: Json) -> None:
        self.counters.gateway["identify"] += 1
        if data.get("token") != self.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        if conn.session is not None:
            await conn.ws.close(code=4005, message=b"Already authenticated.")
            return
        self.identify_payloads.append({k: v for k, v in data.items() if k != "token"})
        session = _Session(secrets.token_hex(16), int(data.get("intents") or 0), data.get("shard"))
        self._sessions[session.id] = session
        conn.session = session
        session.conn = conn
        ready: Json = {
            "v": 10,
            "user": self.bot_user,
            "guilds": [{"id": str(g), "unavailable": True} for g in self._guilds],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(self.application_id), "flags": self.application_flags},
            "private_channels": [],
            "presences": [],
            "relationships": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "_trace": ["fake-discord"],
        }
        if session.shard is not None:
            ready["shard"] = session.shard
        await self._session_dispatch(session, "READY", ready)
        for guild in list(self._guilds.values()):
            await self._session_dispatch(session, "GUILD_CREATE", self._guild_create(guild))

    async def _session_dispatch(self, session: _Session, event: str, data: Json) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.frames.append(frame)
        if session.conn is not None:
            await self._send(session.conn, frame)

    async def _resume(self, conn: _Conn, data: Json) -> None:
        self.counters.gateway["resume"] += 1
        session = self._sessions.get(str(data.get("session_id")))
        seq = data.get("seq") or 0
        oldest = session.frames[0]["s"] if session and session.frames else 1
        if session is None or session.ended or data.get("token") != self.token or seq < oldest - 1:
            self.counters.gateway["invalid_session"] += 1
            await self._send(conn, {"op": 9, "d": False, "s": None, "t": None})
            return
        if session.conn is not None and session.conn is not conn:
            session.conn.closed_by_us = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.conn.ws.close(code=4000), timeout=1.0)
        conn.session = session
        session.conn = conn
        missed = [f for f in session.frames if f["s"] > seq]
        self.counters.gateway["replayed"] += len(missed)
        for frame in missed:
            await self._send(conn, frame)
        await self._session_dispatch(session, "RESUMED", {"_trace": ["fake-discord"]})


@contextlib.asynccontextmanager
async def point_discord_py_at(api_base: str) -> AsyncIterator[yarl.URL]:
    """Point discord.py's REST and gateway at `api_base` (e.g. ``http://127.0.0.1:8080/api/v10``).

    discord.py has no setting for its host. ``discord.http.Route.BASE`` makes every REST,
    interaction-callback and webhook URL; ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` is
    what a plain ``Client`` dials (only ``AutoShardedClient`` asks ``GET /gateway/bot``). The
    gateway is discovered with ``GET {api_base}/gateway``, which needs no token, so one setting
    suffices. Both are class attributes, so this is process-wide: one target at a time. Restores
    the previous values on exit. Yields the gateway URL.

    Raises
    ------
    aiohttp.ClientError
        If ``GET /gateway`` fails.
    """
    from discord.gateway import DiscordWebSocket
    from discord.http import Route

    base = api_base.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"{base}/gateway") as resp,
    ):
        resp.raise_for_status()
        gateway = yarl.URL((await resp.json())["url"])
    saved = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = base, gateway
    try:
        yield gateway
    finally:
        Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = saved


async def _serve(args: argparse.Namespace) -> None:
    async with FakeDiscord(
        token=args.token,
        host=args.host,
        port=args.port,
        nonce_window=args.nonce_window,
        create_latency=args.create_latency,
    ) as dc:
        channels = [(args.channel + i, f"digest-{i}") for i in range(args.channels)]
        await dc.add_guild(args.guild, "Fake Guild", channels=channels)
        print(f"api_base={dc.api_base} gateway={dc.gateway_url} token={dc.token}", flush=True)
        print(
            f"application_id={dc.application_id} guild={args.guild} channels={args.channel}"
            f"..{args.channel + args.channels - 1}",
            flush=True,
        )
        await asyncio.sleep(args.seconds)


def main(argv: list[str] | None = None) -> None:
    """Run the double standalone: ``python -m tests.fakes.discord_api --port 8080``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=FAKE_TOKEN)
    parser.add_argument("--guild", type=int, default=100_000_000_000_000_001)
    parser.add_argument("--channel", type=int, default=100_000_000_000_000_002)
    parser.add_argument("--channels", type=int, default=1, help="text channels from --channel on")
    parser.add_argument(
        "--create-latency", type=float, default=0.0, help="answer message creates this late"
    )
    parser.add_argument(
        "--nonce-window", type=float, default=NONCE_WINDOW, help="enforce_nonce window, seconds"
    )
    parser.add_argument("--seconds", type=float, default=3600.0, help="stop after this long")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
