"""Discord's thread per issue: a forum channel's post, or a thread on the issue's first message.

The :class:`~digest_core.port.Threads` capability of
:class:`~bots.discord.adapter.DiscordAdapter` (a mixin: it uses the adapter's client, settings
and error translation). Which channels get threads is configuration (``[discord] channels``
tables, :class:`~bots.discord.settings.DiscordChannel`):

- a forum channel (``forum = true``): each issue is one forum post, ``POST
  /channels/{forum}/threads`` with the title (date and headline), the issue's first message and
  the configured tags; the later messages and every edit go into the post (a thread: its id is
  its first message's);
- a text channel (``thread_per_issue = true``): the issue is posted in the channel as before and
  a thread for discussion is opened on its first message (``POST
  /channels/{c}/messages/{m}/threads``; its id is the message's). Discord refuses a second
  thread on one message (160004): that answer means the thread is there.

Opening a forum post is not idempotent (its message takes no nonce): the core records its intent
first and, after a cut or a crash, asks :meth:`DiscordThreads.find_thread`, which looks among the
server's active threads (and the channel's archived ones) for this bot's thread of that title,
opened no earlier than the intent (less :data:`CLOCK_MARGIN`), that no other post recorded.

https://discord.com/developers/docs/resources/channel#start-thread-in-forum-or-media-channel,
https://discord.com/developers/docs/topics/threads
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import TYPE_CHECKING, Any

import discord
from discord.http import Route

from bots.discord.settings import DiscordChannel, DiscordSettings
from digest_core.port import (
    DeliveryError,
    Message,
    Opened,
    PartKey,
    Rejected,
    Target,
    TargetKind,
)
from digest_core.rendering.discord import ALLOWED_MENTIONS, Limits

if TYPE_CHECKING:
    from bots.discord.client import DigestClient

log = logging.getLogger(__name__)

#: JSON error codes (https://discord.com/developers/docs/topics/opcodes-and-status-codes)
UNKNOWN_CHANNEL = 10003
THREAD_ARCHIVED = 50083
THREAD_EXISTS = 160004
THREAD_LOCKED = 160005
#: a thread found may have been opened this long before the intent recorded on our clock
#: (the hosts' clocks differ; Discord's snowflakes carry its own time)
CLOCK_MARGIN = dt.timedelta(minutes=10)


def thread_name(title: str) -> str:
    """``title`` as a thread's name: one line, at most ``Limits.thread_name_maxlen``
    characters."""
    one_line = " ".join(title.split()) or "digest"
    if len(one_line) <= Limits.thread_name_maxlen:
        return one_line
    return one_line[: Limits.thread_name_maxlen - 1] + "…"


class DiscordThreads:
    """Forum posts and threads per issue (see the module docstring)."""

    name: str
    settings: DiscordSettings

    def _require_client(self) -> DigestClient:
        raise NotImplementedError  # the adapter's

    def _translate(self, exc: BaseException, target: Target) -> DeliveryError:
        raise NotImplementedError  # the adapter's

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        raise NotImplementedError  # the adapter's

    # ------------------------------------------------------------ Threads

    def threaded(self, target: Target) -> bool:
        """A configured forum channel, or a text channel with ``thread_per_issue``."""
        return target.kind is TargetKind.CHANNEL and self.settings.threads_of(target.id) is not None

    def is_forum(self, target: Target) -> bool:
        options = self.settings.threads_of(target.id)
        return options is not None and options.forum

    def channel_of(self, target: Target) -> int:
        """The channel a message of ``target`` goes to or is edited in: the post's thread in
        a forum (a text channel's thread is for discussion: the issue stays in the channel).

        Raises:
            Rejected: not a Discord channel id.
        """
        where = target.thread if target.thread and self.is_forum(target) else target.id
        try:
            return int(where)
        except ValueError:
            raise Rejected(
                f"not a Discord channel id: {where!r}", platform=self.name, target=target.id
            ) from None

    async def open_thread(
        self, target: Target, message: Message, *, title: str, key: PartKey
    ) -> Opened:
        """A forum post with ``message`` as its first message, or ``message`` sent to the
        channel and a thread opened on it.

        Raises:
            Rejected: the post is refused (a tag the forum requires, a bad body).
            the errors of :meth:`send` otherwise.
        """
        options = self.settings.threads_of(target.id)
        assert options is not None, f"{target} has no thread per issue"
        if options.forum:
            return await self._forum_post(target, message, thread_name(title), options)
        message_id = await self.send(target, message, key=key)
        thread_id = await self._thread_on(target, message_id, thread_name(title), options)
        return Opened(thread_id, message_id)

    async def find_thread(
        self, target: Target, *, title: str, since: dt.datetime, known: frozenset[str]
    ) -> Opened | None:
        """This bot's thread named ``title`` on ``target`` opened since ``since`` (less
        :data:`CLOCK_MARGIN`) and not in ``known``: among the server's active threads, then
        the channel's archived ones; the oldest of them.

        Raises:
            the errors of :meth:`send`.
        """
        client = self._require_client()
        assert client.user is not None, "logged in"
        name, bot_id = thread_name(title), str(client.user.id)
        earliest = since - CLOCK_MARGIN
        channel = await self._get(target, "/channels/{channel_id}", channel_id=int(target.id))
        guild_id = int(channel["guild_id"])
        active = await self._get(target, "/guilds/{guild_id}/threads/active", guild_id=guild_id)
        archived = await self._get(
            target, "/channels/{channel_id}/threads/archived/public", channel_id=int(target.id)
        )
        threads = [*(active.get("threads") or []), *(archived.get("threads") or [])]
        for thread in sorted(threads, key=lambda t: int(t["id"])):
            if (
                str(thread.get("parent_id")) == target.id
                and str(thread.get("owner_id")) == bot_id
                and thread.get("name") == name
                and str(thread["id"]) not in known
                and discord.utils.snowflake_time(int(thread["id"])) >= earliest
            ):
                # a forum post's first message and a message's thread share the thread's id
                return Opened(str(thread["id"]), str(thread["id"]))
        return None

    # ------------------------------------------------------------ internals

    async def _forum_post(
        self, target: Target, message: Message, name: str, options: DiscordChannel
    ) -> Opened:
        body: dict[str, Any] = {
            "name": name,
            "auto_archive_duration": options.auto_archive_minutes,
            "message": {**message.payload, "allowed_mentions": dict(ALLOWED_MENTIONS)},
        }
        tags = await self._tag_ids(target, options)
        if tags:
            body["applied_tags"] = tags
        route = Route("POST", "/channels/{channel_id}/threads", channel_id=int(target.id))
        data = await self._call(target, route, json=body)
        first = data.get("message") or {}
        return Opened(str(data["id"]), str(first.get("id") or data["id"]))

    async def _thread_on(
        self, target: Target, message_id: str, name: str, options: DiscordChannel
    ) -> str:
        """The discussion thread on message ``message_id`` ("" when Discord does not let the
        bot open one: the issue is posted all the same, and the log says why)."""
        client = self._require_client()
        route = Route(
            "POST",
            "/channels/{channel_id}/messages/{message_id}/threads",
            channel_id=int(target.id),
            message_id=int(message_id),
        )
        body = {"name": name, "auto_archive_duration": options.auto_archive_minutes}
        try:
            async with asyncio.timeout(self.settings.request_timeout_seconds):
                data = await client.http.request(route, json=body)
        except discord.HTTPException as exc:
            if exc.code == THREAD_EXISTS:  # opened by an earlier attempt: its id is the message's
                return message_id
            if isinstance(exc, discord.Forbidden):
                log.warning(
                    "discord: no thread opened on the post in %s (%s): give the bot Create "
                    "Public Threads there",
                    target.id,
                    exc.text,
                )
                return ""
            raise self._translate(exc, target) from exc
        except Exception as exc:
            raise self._translate(exc, target) from exc
        return str(data["id"])

    async def _tag_ids(self, target: Target, options: DiscordChannel) -> list[str]:
        """The configured tags' ids, as the forum lists them (a name it lacks is left out and
        logged: the post goes out without it)."""
        if not options.tags:
            return []
        forum = await self._get(target, "/channels/{channel_id}", channel_id=int(target.id))
        by_name = {t["name"]: str(t["id"]) for t in forum.get("available_tags") or []}
        missing = [t for t in options.tags if t not in by_name]
        if missing:
            log.warning(
                "discord: forum %s has no tag %s (it has %s); posting without",
                target.id,
                ", ".join(map(repr, missing)),
                ", ".join(map(repr, by_name)) or "none",
            )
        return [by_name[t] for t in options.tags if t in by_name]

    async def _get(self, target: Target, path: str, **ids: Any) -> Any:
        return await self._call(target, Route("GET", path, **ids))

    async def _call(self, target: Target, route: Route, *, json: Any = None) -> Any:
        """One request, its errors translated as a send's."""
        client = self._require_client()
        try:
            async with asyncio.timeout(self.settings.request_timeout_seconds):
                return await client.http.request(route, json=json)
        except Exception as exc:
            raise self._translate(exc, target) from exc
