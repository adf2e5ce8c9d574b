"""The Discord adapter: a discord.py client that posts issues and answers commands and buttons."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route
from pydantic import SecretStr

from bots.discord.client import DigestClient, ShardedDigestClient
from bots.discord.settings import DiscordSettings
from bots.discord.threads import THREAD_ARCHIVED, THREAD_LOCKED, UNKNOWN_CHANNEL, DiscordThreads
from bots.discord.views import action_row
from bots.inflight import InFlight
from bots.network import network_reason
from bots.outcome import answer_lost
from digest_core.port import (
    Clock,
    CommandButton,
    ConfigError,
    DeliveryError,
    Message,
    MessageGone,
    NotPermitted,
    OutcomeUnknown,
    PartKey,
    PlatformLimits,
    RateLimited,
    Rejected,
    RenderOptions,
    Target,
    TargetGone,
    TargetKind,
    TransientError,
    UserRateLimiter,
    notice,
)
from digest_core.rendering import discord as discord_render
from digest_core.rendering.discord import ALLOWED_MENTIONS, corrected

if TYPE_CHECKING:
    from digest_core.port import Port, Renderer

log = logging.getLogger(__name__)

#: Discord's own API; another base (a rate-limit proxy, a test double) is pointed at explicitly.
DEFAULT_API_BASE = "https://discord.com/api/v10"
#: the authenticated requests of discord.py's login (``GET /users/@me`` and
#: ``GET /oauth2/applications/@me``); with the gateway, ``GET /gateway/bot`` too
LOGIN_REQUESTS = 2
#: JSON error codes: https://discord.com/developers/docs/topics/opcodes-and-status-codes
UNKNOWN_MESSAGE = 10008
MISSING_PERMISSIONS = 50013
#: aiohttp's own timeouts for the adapter's requests: none. Each of them runs inside
#: ``asyncio.timeout(request_timeout_seconds)``, which also covers discord.py's waits and
#: retries; aiohttp's default (5 minutes in all, for each attempt) armed and cancelled a timer
#: per request. discord.py hands its ``request``'s other keywords to aiohttp as they are.
NO_AIOHTTP_TIMEOUT = aiohttp.ClientTimeout()


# --------------------------------------------------------------------------- pointing discord.py


class ApiPointer:
    """discord.py's REST base and gateway, swapped for another host and restored later.

    discord.py has no setting for its host: ``discord.http.Route.BASE`` makes every REST,
    interaction-callback and webhook URL, ``DiscordWebSocket.DEFAULT_GATEWAY`` is what a plain
    ``Client`` dials. Both are class attributes, so this is process-wide (one Discord target per
    process, which is what a bot is).
    """

    def __init__(self) -> None:
        self._saved: tuple[str, yarl.URL] | None = None

    #: seconds to wait for ``GET /gateway``
    GATEWAY_QUERY_SECONDS = 10.0

    async def point(self, api_base: str) -> None:
        """Point discord.py at ``api_base``; a no-op for Discord's own API.

        The gateway is asked from ``GET {api_base}/gateway`` (it needs no token), so one setting
        suffices.

        Raises:
            TransientError: ``GET /gateway`` could not reach the server (``run`` retries).
            ConfigError: ``GET /gateway`` answered something that is not a gateway.
        """
        base = api_base.rstrip("/")
        if base == DEFAULT_API_BASE:
            return
        timeout = aiohttp.ClientTimeout(total=self.GATEWAY_QUERY_SECONDS)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(f"{base}/gateway") as resp,
            ):
                resp.raise_for_status()
                gateway = yarl.URL(str((await resp.json(content_type=None))["url"]))
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, KeyError, TypeError) as exc:
            reason = network_reason(exc)
            if reason is not None:  # the network's trouble, not the setting's
                raise TransientError(
                    f"cannot reach Discord at {base}: {reason}; check the network or "
                    "[discord] api_base_url",
                    platform="discord",
                ) from exc
            detail = (
                f"{base}/gateway did not answer with a gateway address ({exc!r}); is "
                "this Discord's API (or a proxy of it)?"
            )
            raise ConfigError(detail, key="discord.api_base_url") from exc
        if self._saved is None:
            self._saved = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
        Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = base, gateway
        log.info("discord.py pointed at %s (gateway %s)", base, gateway)

    def restore(self) -> None:
        """Put back what :meth:`point` replaced (idempotent)."""
        if self._saved is not None:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = self._saved
            self._saved = None


@contextlib.asynccontextmanager
async def point_discord_py_at(api_base: str) -> AsyncIterator[None]:
    """:class:`ApiPointer` as a context manager (the CLI's ``discord sync`` uses it)."""
    pointer = ApiPointer()
    await pointer.point(api_base)
    try:
        yield
    finally:
        pointer.restore()


# --------------------------------------------------------------------------- the adapter


class DiscordAdapter(DiscordThreads):
    """The Discord Platform and Adapter: posts to channels, answers commands and buttons.

    :meth:`send` posts the rendered create-message JSON as it is (discord.py paces it by the
    ``X-RateLimit-*`` headers); mentions are always disabled. Errors are translated to the
    core's tree; nothing is retried here beyond discord.py's own in-request retries, which are
    cut off after ``request_timeout_seconds`` so the core's backoff stays in charge. Forum
    channels get a post per issue, text channels may get a thread on each issue's first
    message (:class:`~bots.discord.threads.DiscordThreads`).
    """

    name = "discord"
    flavor: Renderer = discord_render
    #: readers can subscribe to get the daily issue by DM
    subscriptions = True

    #: On :meth:`stop`, interactions being answered get this long to finish before they are
    #: cancelled and told to try again (``digest-bot run`` has done this already, within its
    #: shutdown budget), and the notices this long to go out.
    STOP_GRACE_SECONDS = 3.0
    APOLOGY_SECONDS = 1.5

    def __init__(
        self,
        settings: DiscordSettings,
        *,
        token: SecretStr,
        clock: Clock,
        limits: PlatformLimits,
        in_flight: InFlight | None = None,
    ) -> None:
        """``limits``: Discord's rate limits, as :mod:`bots.discord.spec` states them (50
        requests/s per bot, 5 messages per 5 s per channel)."""
        self.settings = settings
        self.limits = limits
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self.clock = clock
        self.post_options = RenderOptions(buttons=True, embeds=settings.embeds)
        self.client: DigestClient | None = None
        self._token = token
        self._pointer = ApiPointer()
        self._gateway: asyncio.Task[None] | None = None
        self._bodies = CreateBodies()
        self._edits = EditBodies()
        self._routes = CreateRoutes()

    # ------------------------------------------------------------ Platform

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """POST ``message.payload`` to the channel (or DM channel) ``target.id``.

        Returns the new message's id. The create carries ``enforce_nonce`` with a nonce derived
        from ``key`` (see :func:`part_nonce`), so a part resent within Discord's nonce window,
        by a retry or by a process restarted after a crash, returns the message already
        created instead of posting it twice. A send without ``key`` gets a random nonce.

        Raises:
            RateLimited: a 429 discord.py did not absorb (``retry_after`` from Discord).
            TransientError: 5xx, a connection error, or no answer within the request timeout.
            TargetGone: 403 (no access or permission, DMs closed) or 404 (channel deleted).
            Rejected: any other 4xx (the payload or the request is wrong); a bad channel id.
        """
        client = self._require_client()
        channel_id = self.channel_of(target)  # a forum post's thread, for its later parts
        nonce = secrets.token_hex(12) if key is None else part_nonce(key)
        body = _json_payload(self._bodies.body(message, nonce))
        route = self._routes.route(channel_id)
        try:
            async with asyncio.timeout(self.settings.request_timeout_seconds):
                data = await client.http.request(route, data=body, timeout=NO_AIOHTTP_TIMEOUT)
        except Exception as exc:
            raise self._translate(exc, target) from exc
        return str(data["id"])

    def _translate(self, exc: BaseException, target: Target) -> DeliveryError:
        """:func:`translate_error`; in a forum post's thread, a thread deleted or locked is
        that post's trouble (the part is refused), not the forum's (not gone)."""
        if (
            target.thread
            and self.is_forum(target)
            and isinstance(exc, discord.HTTPException)
            and exc.code in (UNKNOWN_CHANNEL, THREAD_LOCKED, THREAD_ARCHIVED)
        ):
            return Rejected(
                f"the post's thread {target.thread}: {exc.status} (code {exc.code}): {exc.text}",
                platform=self.name,
                target=target.id,
            )
        return translate_error(exc, platform=self.name, target=target.id)

    # ------------------------------------------------------------ Editor, Pinner

    @property
    def pin_posts(self) -> bool:
        """``[discord] pin``: pin the first message of each day's post in the channels."""
        return self.settings.pin

    def corrected(self, message: Message, note: str) -> Message:
        """The message with the correction mark as a last line of small text."""
        return corrected(message, note)

    async def edit(self, target: Target, message_id: str, message: Message) -> None:
        """``PATCH /channels/{c}/messages/{m}`` with the payload's content, embeds and
        components (absent ones are cleared, so the edited message is exactly the payload),
        mentions off; the JSON encoded once per message (:class:`EditBodies`).

        Raises:
            MessageGone: 404 Unknown Message (10008).
            the errors of :meth:`send` otherwise.
        """
        await self._message_call(
            target,
            "PATCH",
            "/channels/{channel_id}/messages/{message_id}",
            message_id,
            body=self._edits.body(message),
        )

    async def delete(self, target: Target, message_id: str) -> bool:
        """``DELETE /channels/{c}/messages/{m}`` (always allowed for the bot's own messages);
        a message already gone counts as deleted; False if Discord refuses (403)."""
        try:
            await self._message_call(
                target, "DELETE", "/channels/{channel_id}/messages/{message_id}", message_id
            )
        except MessageGone:
            return True
        except NotPermitted:
            return False
        return True

    async def pin(self, target: Target, message_id: str) -> None:
        """``PUT /channels/{c}/messages/pins/{m}`` (pins never notify on Discord). A forum
        lists its newest post first and keeps one pinned post for its moderators: its posts
        are not pinned.

        Raises:
            NotPermitted: 403 (no Pin Messages / Manage Messages permission there).
            MessageGone: 404 Unknown Message.
        """
        if self.is_forum(target):
            log.debug("discord: %s is a forum: its posts are not pinned", target.id)
            return
        await self._message_call(
            target, "PUT", "/channels/{channel_id}/messages/pins/{message_id}", message_id
        )

    async def unpin(self, target: Target, message_id: str) -> None:
        """``DELETE /channels/{c}/messages/pins/{m}``; a message gone or not pinned is fine.

        Raises:
            NotPermitted: 403.
        """
        if self.is_forum(target):
            return
        try:
            await self._message_call(
                target, "DELETE", "/channels/{channel_id}/messages/pins/{message_id}", message_id
            )
        except MessageGone:
            return

    async def _message_call(
        self,
        target: Target,
        method: str,
        path: str,
        message_id: str,
        *,
        json: Any = None,
        body: bytes | None = None,
    ) -> None:
        """One request about message ``message_id`` in channel ``target`` (in a forum, in
        the post's thread: an archived one is unarchived first, as Discord requires): 404
        Unknown Message is :class:`MessageGone`, 403 :class:`NotPermitted`, the rest as for
        sends."""
        client = self._require_client()
        channel_id = self.channel_of(target)
        try:
            route = Route(method, path, channel_id=channel_id, message_id=int(message_id))
        except ValueError:
            raise Rejected(
                f"not a Discord message id: {message_id!r}", platform=self.name, target=target.id
            ) from None

        def sent() -> dict[str, Any]:
            """The request's body: ``body`` as it is (a new aiohttp payload each time), else
            ``json`` for discord.py to encode."""
            return {"data": _json_payload(body)} if body is not None else {"json": json}

        try:
            async with asyncio.timeout(self.settings.request_timeout_seconds):
                try:
                    await client.http.request(route, **sent(), timeout=NO_AIOHTTP_TIMEOUT)
                except discord.HTTPException as exc:
                    if exc.code != THREAD_ARCHIVED or channel_id == int(target.id):
                        raise
                    # "Thread is archived": edits and deletes need it open (a send opens it)
                    await client.http.request(
                        Route("PATCH", "/channels/{channel_id}", channel_id=channel_id),
                        json={"archived": False},
                        timeout=NO_AIOHTTP_TIMEOUT,
                    )
                    await client.http.request(route, **sent(), timeout=NO_AIOHTTP_TIMEOUT)
        except (discord.NotFound, discord.Forbidden) as exc:
            # a message gone (404 "Unknown Message"), or no right to do it (403 "Missing
            # Permissions"); any other 404 or 403 as a send's
            gone = isinstance(exc, discord.NotFound)
            if exc.code == (UNKNOWN_MESSAGE if gone else MISSING_PERMISSIONS):
                refusal = MessageGone if gone else NotPermitted
                detail = f"{exc.status} (code {exc.code}): {exc.text}"
                raise refusal(detail, platform=self.name, target=target.id) from exc
            raise self._translate(exc, target) from exc
        except Exception as exc:
            raise self._translate(exc, target) from exc

    # ------------------------------------------------------------ Adapter

    def channel_targets(self) -> list[Target]:
        return [Target(self.name, c, TargetKind.CHANNEL) for c in self.settings.channels]

    async def alert_admins(self, text: str) -> None:
        """Log ``text`` and DM it to ``admin_users`` (best effort).

        Raises:
            TransientError: no admin got it and Discord could not be reached: the service
                queues it and sends it again.
        """
        log.warning("discord alert: %s", text)
        client = self.client
        if client is None or client.is_closed() or not self.settings.admin_users:
            return
        messages = notice(text, self.flavor)
        reached, unreachable = 0, ""
        for user_id in self.settings.admin_users:
            try:
                async with asyncio.timeout(self.settings.request_timeout_seconds):
                    channel = await client.http.start_private_message(user_id)
                for m in messages:
                    await self.send(Target(self.name, str(channel["id"]), TargetKind.PRIVATE), m)
                reached += 1
            except Exception as exc:  # an alert must never take anything down
                error = translate_error(exc, platform=self.name, target=str(user_id))
                if isinstance(error, TransientError):  # said once, by whoever queues it
                    unreachable = str(error)
                    log.debug("could not DM the alert to Discord user %s: %s", user_id, exc)
                else:
                    log.warning("could not DM the alert to Discord user %s: %s", user_id, exc)
        if not reached and unreachable:
            raise TransientError(f"no admin got the alert: {unreachable}", platform=self.name)

    @property
    def connected(self) -> bool:
        """Logged in to the gateway and ready (for /readyz)."""
        client = self.client
        return client is not None and not client.is_closed() and client.is_ready()

    async def message_admins(
        self, messages: Sequence[Message], *, actions: Sequence[CommandButton] = ()
    ) -> int:
        """DM ``messages`` to every ``admin_users`` member, ``actions`` as buttons on the last
        (best effort, never raises); how many got them. Not a delivery."""
        client = self.client
        if client is None or client.is_closed() or not messages:
            return 0
        out = list(messages)
        if actions:
            out[-1] = Message({**out[-1].payload, "components": [action_row(actions)]})
        reached = 0
        for user_id in self.settings.admin_users:
            try:
                async with asyncio.timeout(self.settings.request_timeout_seconds):
                    channel = await client.http.start_private_message(user_id)
                target = Target(self.name, str(channel["id"]), TargetKind.PRIVATE)
                for m in out:
                    await self.send(target, m)
                reached += 1
            except Exception as exc:  # a message to admins must never take anything down
                log.warning("could not DM Discord admin %s: %s", user_id, exc)
        return reached

    async def start(self, port: Port, *, receive: bool = True) -> None:
        """Log in; with ``receive``, also connect the gateway (as a task) and wait until ready
        (at most ``ready_timeout_seconds``; after that the client keeps connecting meanwhile).

        Raises:
            ConfigError: the token is refused, or ``api_base_url`` answers as no Discord does.
            TransientError: Discord could not be reached to log in.
        """
        try:
            await self._pointer.point(self.settings.api_base_url)
            token = self._token.get_secret_value()
            client = await self._login(DigestClient(self.settings), token)
            if receive:
                client = await self._maybe_shard(client, token)
        except BaseException:
            self._pointer.restore()
            raise
        # Discord's global limit counts them with the posts that may follow at once
        port.counted(self, LOGIN_REQUESTS + int(receive and self.settings.shard_count is None))
        client.port = port
        client.limiter = UserRateLimiter.of(self.settings, port.clock)
        client.in_flight = self.in_flight
        self.client = client
        if not receive:
            return
        self._gateway = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
        self._gateway.add_done_callback(self._gateway_ended)
        ready = asyncio.ensure_future(client.wait_until_ready())
        try:
            await asyncio.wait(
                (ready, self._gateway),
                timeout=self.settings.ready_timeout_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            ready.cancel()
        if self._gateway.done() and not self._gateway.cancelled():
            exc = self._gateway.exception()
            await self.stop()
            if isinstance(exc, discord.PrivilegedIntentsRequired):
                raise ConfigError(f"Discord refused the gateway: {exc}") from exc
            raise TransientError(
                f"the Discord gateway closed: {exc!r}", platform=self.name
            ) from exc
        if client.is_ready():
            guilds = len(client.guilds)
            log.info("discord: connected as %s to %d server(s)", client.user, guilds)
        else:
            log.warning(
                "discord: gateway not ready after %.0f s; still connecting (posts go out anyway)",
                self.settings.ready_timeout_seconds,
            )

    async def stop(self) -> None:
        """Close the client (finishes the gateway task) and restore discord.py's host.

        Interactions still being answered get :attr:`STOP_GRACE_SECONDS`, then are cancelled
        and told to try again (a deferred one gets a follow-up instead of "thinking…" forever);
        interactions arriving meanwhile are told at once.
        """
        client, self.client = self.client, None
        try:
            if client is not None:
                if client.in_flight is not None:
                    client.in_flight.close()
                    if not await client.in_flight.idle(self.STOP_GRACE_SECONDS):
                        await client.in_flight.cancel(within=1.0)
                    await client.in_flight.apologise(within=self.APOLOGY_SECONDS)
                await client.close()
            if self._gateway is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(self._gateway, timeout=10)
                self._gateway = None
        finally:
            self._pointer.restore()

    # ------------------------------------------------------------ internals

    async def _login(self, client: DigestClient, token: str) -> DigestClient:
        try:
            await client.login(token)
        except discord.LoginFailure as exc:
            await client.close()
            raise ConfigError(
                "Discord refused the token (401); check DIGEST_BOT_DISCORD__TOKEN",
                key="discord.token",
            ) from exc
        except Exception as exc:
            await client.close()
            reason = network_reason(exc)
            if reason is not None:  # as Telegram's: where, why in a few words, what to check
                raise TransientError(
                    f"cannot reach Discord at {Route.BASE}: {reason}; check "
                    "the network or [discord] api_base_url",
                    platform=self.name,
                    target="login",
                ) from exc
            raise translate_error(exc, platform=self.name, target="login") from exc
        return client

    async def _maybe_shard(self, client: DigestClient, token: str) -> DigestClient:
        """Swap in an AutoShardedClient when configured, or when ``GET /gateway/bot`` asks for
        more than one shard."""
        count = self.settings.shard_count
        if count is None:
            try:
                recommended, _, _ = await client.http.get_bot_gateway()
            except discord.GatewayNotFound:
                log.warning("discord: GET /gateway/bot failed; running one shard")
                return client
            if recommended <= 1:
                return client
            log.info("discord: Discord recommends %d shards", recommended)
        await client.close()
        sharded = ShardedDigestClient(self.settings, shard_count=count)
        return await self._login(sharded, token)

    def _gateway_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("discord: the gateway connection ended: %r", exc)

    def _require_client(self) -> DigestClient:
        if self.client is None or self.client.is_closed():
            raise TransientError("the Discord client is not running", platform=self.name)
        return self.client


#: the keys :meth:`DiscordAdapter.send` sets in every create-message body, whatever the
#: payload has: mentions ping nobody, whatever the text, and the part's nonce is enforced
_SEND_KEYS = frozenset({"allowed_mentions", "nonce", "enforce_nonce"})
_ALLOWED_MENTIONS_JSON = json.dumps(ALLOWED_MENTIONS, separators=(",", ":"))


def _json_payload(body: bytes) -> aiohttp.BytesPayload:
    """``body`` (JSON) for aiohttp, sent as discord.py sends its own JSON."""
    return aiohttp.BytesPayload(body, content_type="application/json")


class _EncodedOnce:
    """Bytes made from a message's payload once per message: a post sends (or a correction
    edits) the same few messages in every channel, and encoding each anew cost about 0.13 ms
    of CPU a message (benchmarks/discord_fanout.py).

    A message is known by identity while its payload keeps its keys and their values'
    identities; a payload whose values are changed inside (an embed's field edited in place)
    after it was sent is not noticed: messages are values, built anew for new content (the
    renderers, ``corrected`` and ``message_admins`` make new ones). The last :attr:`SIZE`
    messages are kept.

    JSON is written compact and in UTF-8, not escaped to ASCII as discord.py's own encoder
    does it (with its ``speed`` extra, orjson, discord.py sends UTF-8 too; JSON's encoding,
    RFC 8259): a Chinese character is 3 bytes instead of a 6-byte ``\\uXXXX``, and a post's
    message half the bytes to hand to aiohttp and the socket (about 15 µs of CPU a send at
    22 kB). A payload that cannot be UTF-8 (a lone surrogate) is escaped to ASCII instead.
    """

    SIZE = 16

    def __init__(self) -> None:
        self._known: OrderedDict[int, tuple[Message, tuple[tuple[str, int], ...], bytes]] = (
            OrderedDict()
        )

    def _encoded(self, message: Message) -> bytes:
        """What :meth:`_encode` made of ``message``'s payload, made now if not kept."""
        payload = message.payload
        shape = tuple((k, id(v)) for k, v in payload.items())
        known = self._known.get(id(message))
        if known is None or known[0] is not message or known[1] != shape:
            known = (message, shape, self._encode(payload))
            self._known[id(message)] = known
            if len(self._known) > self.SIZE:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(id(message))
        return known[2]

    def _encode(self, payload: dict[str, Any]) -> bytes:
        """The bytes of one payload (each kind of body its own)."""
        raise NotImplementedError

    @staticmethod
    def _utf8(text_of: Callable[[bool], str]) -> bytes:
        """``text_of(False)`` (JSON not escaped to ASCII) in UTF-8; where that cannot be, the
        ASCII of ``text_of(True)``."""
        try:
            return text_of(False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped, as discord.py would send it
            return text_of(True).encode("ascii")


class CreateBodies(_EncodedOnce):
    """The JSON of create-message bodies: each message's encoded once, its nonce added per
    send (see :class:`_EncodedOnce`)."""

    #: what follows a message's own keys: mentions off, the nonce's key (its value per send)
    _MIDDLE = f'"allowed_mentions":{_ALLOWED_MENTIONS_JSON},"nonce":'
    _END = b',"enforce_nonce":true}'

    def body(self, message: Message, nonce: str) -> bytes:
        """``message.payload`` with ``allowed_mentions``, ``nonce`` and ``enforce_nonce``."""
        return b"".join((self._encoded(message), json.dumps(nonce).encode("ascii"), self._END))

    def _encode(self, payload: dict[str, Any]) -> bytes:
        """The body up to the nonce's value: the payload's keys (but :data:`_SEND_KEYS`),
        then :attr:`_MIDDLE`."""
        rest = {k: v for k, v in payload.items() if k not in _SEND_KEYS}
        comma = "," if rest else ""

        def text(escaped: bool) -> str:
            return json.dumps(rest, separators=(",", ":"), ensure_ascii=escaped)[:-1] + comma

        return self._utf8(lambda escaped: text(escaped) + self._MIDDLE)


class EditBodies(_EncodedOnce):
    """The JSON of edit-message bodies (``PATCH``), each message's encoded once (see
    :class:`_EncodedOnce`): the payload's content, embeds and components, absent ones
    cleared (so the edited message is exactly the payload), mentions off."""

    def body(self, message: Message) -> bytes:
        return self._encoded(message)

    def _encode(self, payload: dict[str, Any]) -> bytes:
        edit = {
            "content": payload.get("content") or "",
            "embeds": payload.get("embeds") or [],
            "components": payload.get("components") or [],
            "allowed_mentions": ALLOWED_MENTIONS,
        }
        return self._utf8(
            lambda escaped: json.dumps(edit, separators=(",", ":"), ensure_ascii=escaped)
        )


class CreateRoutes:
    """discord.py's ``Route`` of ``POST /channels/{id}/messages`` for each channel, made once,
    its URL parsed once.

    discord.py hands ``route.url`` to aiohttp as it is, and aiohttp parses a ``str`` into a
    ``yarl.URL`` on every request, then works out its parts again (host, port, path, origin:
    yarl caches each on the URL object, so a new object computes them anew; yarl's own cache
    of parsed strings holds fewer URLs than a post has channels). Here a route keeps one
    ``yarl.URL`` built exactly as aiohttp builds it from the string, so the request is the
    same: about 10 µs of CPU a send, more on a machine whose caches went cold between sends
    (benchmarks/discord_fanout.py). A route is a value (discord.py reads its method, path,
    URL and major parameters), so one serves every send to its channel; the routes are made
    again when ``Route.BASE`` changes (:class:`ApiPointer`), and at most :attr:`SIZE`
    channels are kept (direct messages to many readers), the oldest dropped first.

    A discord.py whose ``Route`` has no ``url`` string is given its routes as they are made.
    """

    SIZE = 4096
    PATH = "/channels/{channel_id}/messages"

    def __init__(self) -> None:
        self._base = ""
        self._routes: dict[int, Route] = {}

    def route(self, channel_id: int) -> Route:
        """The create route of ``channel_id``, under the current ``Route.BASE``."""
        if self._base != Route.BASE:
            self._routes.clear()
            self._base = Route.BASE
        route = self._routes.get(channel_id)
        if route is None:
            route = Route("POST", self.PATH, channel_id=channel_id)
            url = getattr(route, "url", None)
            if isinstance(url, str):
                # aiohttp takes a str or a yarl.URL (``URL(url)`` is what it does with a str)
                route.url = yarl.URL(url)  # type: ignore[assignment]
            if len(self._routes) >= self.SIZE:
                del self._routes[next(iter(self._routes))]
            self._routes[channel_id] = route
        return route


def part_nonce(key: PartKey) -> str:
    """The create-message ``nonce`` of one part: stable, ≤ 25 characters, unique in practice.

    It is the SHA-256 of the key's fields, base64url, cut to 24 characters (144 bits; Discord
    takes strings of at most 25): the same on every retry and after a restart, another for
    another issue, revision, generation (a forced repost posts anew), target or part. Discord
    matches nonces per author across all channels, so two different parts are confused only if
    their truncated digests collide: for n parts sent within one window the chance is about
    n² / 2¹⁴⁵, some 2·10⁻³² for a million parts. A collision would make Discord return the
    other part's message, i.e. that part would be silently not posted.

    The window is Discord's ("the past few minutes", undocumented beyond that): a part a killed
    process left in flight and a restart resends after the window has passed is posted again
    if the first create had gone through. That is at most one message per target (the ledger
    claims part k+1 of a target only after part k is sent), so an outage longer than the window
    can duplicate at most one part per target; a shorter one duplicates nothing.

    https://discord.com/developers/docs/resources/message#create-message (nonce, enforce_nonce)
    """
    fields = (
        key.target.platform,
        key.target.id,
        key.issue_date.isoformat(),
        key.revision,
        str(key.generation),
        str(key.part),
    )
    digest = hashlib.sha256("\x1f".join(fields).encode()).digest()
    return base64.urlsafe_b64encode(digest[:18]).decode("ascii")


def translate_error(exc: BaseException, *, platform: str, target: str) -> DeliveryError:
    """The core's error for a discord.py / aiohttp failure of one request to ``target``."""
    where = {"platform": platform, "target": target}
    if isinstance(exc, discord.RateLimited):
        return RateLimited(f"rate limited: {exc}", retry_after=exc.retry_after, **where)
    if isinstance(exc, discord.HTTPException):
        detail = f"{exc.status} (code {exc.code}): {exc.text}"
        if exc.status == 429:
            return RateLimited(detail, retry_after=_retry_after(exc), **where)
        if isinstance(exc, discord.Forbidden | discord.NotFound):
            return TargetGone(detail, **where)
        if isinstance(exc, discord.DiscordServerError) or exc.status >= 500:
            return TransientError(detail, **where)
        return Rejected(detail, **where)
    if isinstance(exc, TimeoutError):
        return TransientError("no answer within the request timeout", **where)
    if answer_lost(exc):
        # the request was written and the connection cut before the answer: it may have
        # arrived (the part's nonce keeps a resend within Discord's window from repeating it)
        return OutcomeUnknown(f"connection cut before the answer: {exc!r}", **where)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return TransientError(f"connection error: {exc!r}", **where)
    if isinstance(exc, DeliveryError):
        return exc
    return Rejected(f"unexpected {type(exc).__name__}: {exc}", **where)


def _retry_after(exc: discord.HTTPException) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        try:
            return max(0.0, float(headers[name]))
        except (KeyError, ValueError):
            continue
    return 1.0
