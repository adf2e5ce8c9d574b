"""Loopback double of the Telegram Bot API (aiohttp on 127.0.0.1) for end-to-end tests."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import itertools
import json
import logging
import math
import re
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from aiohttp import web

from tests.fakes.tg_html import HtmlParseError, parse_html, utf16_len

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "123456789:AAFakeTelegramTokenForLoopbackTests0"
ChatType = Literal["private", "group", "supergroup", "channel"]
FaultKind = Literal["blocked", "kicked", "migrated", "server_error", "slow", "flood"]
FAULT_KINDS: frozenset[str] = frozenset(
    {"blocked", "kicked", "migrated", "server_error", "slow", "flood"}
)
Params = dict[str, Any]

# Telegram's limits (https://core.telegram.org/bots/api#sendmessage, /bots/faq#broadcasting).
MAX_TEXT_UTF16 = 4096
MAX_CALLBACK_DATA_BYTES = 64
#: getFile refuses larger files ("file is too big")
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
MAX_COMMANDS = 100
#: answerInlineQuery: results per answer, bytes of a result id and of next_offset
MAX_INLINE_RESULTS = 50
MAX_INLINE_ID_BYTES = 64
#: characters of an inline query's text
MAX_INLINE_QUERY = 256
# Update types delivered when allowed_updates is [] or was never set.
DEFAULT_EXCLUDED_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
#: a ChatMemberAdministrator's rights (https://core.telegram.org/bots/api#chatmemberadministrator)
ADMIN_RIGHTS: Params = {
    "status": "administrator",
    "can_be_edited": False,
    "is_anonymous": False,
    "can_manage_chat": True,
    "can_delete_messages": True,
    "can_manage_video_chats": False,
    "can_restrict_members": False,
    "can_promote_members": False,
    "can_change_info": False,
    "can_invite_users": True,
    "can_post_stories": False,
    "can_edit_stories": False,
    "can_delete_stories": False,
    "can_post_messages": True,
    "can_edit_messages": True,
    "can_pin_messages": True,
    "can_manage_topics": True,
}
#: forum topics (https://core.telegram.org/bots/api#createforumtopic): name length, the
#: colours a topic icon may have, and the General topic's id (which no method takes)
MAX_TOPIC_NAME = 128
TOPIC_COLORS = (0x6FB9F0, 0xFFD67E, 0xCB86DB, 0x8EEE98, 0xFF93B2, 0xFB6F5F)
GENERAL_TOPIC = 1
_COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_BOT_COMMAND_IN_TEXT = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")
_BUTTON_ACTIONS = (
    "url", "callback_data", "web_app", "login_url", "switch_inline_query",
    "switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text",
    "callback_game", "pay",
)  # fmt: skip
_NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n"
    "</body>\r\n</html>\r\n"
)


@dataclass(frozen=True)
class FloodLimits:
    """Sliding-window send limits in unscaled seconds (Telegram's documented defaults)."""

    global_count: int = 30  # messages per bot ...
    global_window: float = 1.0  # ... per second
    private_count: int = 3  # 1 message/s per private chat with bursts of 3
    private_window: float = 3.0
    group_count: int = 20  # 20 messages per minute per group, supergroup or channel
    group_window: float = 60.0
    #: with ``allow_paid_broadcast`` a bot may send up to 1000 messages per second (each one
    #: past the free 30/s costs Stars): https://core.telegram.org/bots/api#sendmessage
    paid_global_count: int = 1000


class ApiError(Exception):
    """An error answer of the Bot API: HTTP status, description and optional parameters."""

    def __init__(self, status: int, description: str, parameters: Params | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


@dataclass
class FakeTopic:
    """A topic of a forum supergroup: its ``message_thread_id`` is the id of the service
    message that created it, as on Telegram."""

    id: int
    name: str
    icon_color: int = TOPIC_COLORS[0]
    closed: bool = False
    deleted: bool = False

    def as_dict(self) -> Params:
        """The ForumTopic object."""
        return {"message_thread_id": self.id, "name": self.name, "icon_color": self.icon_color}


@dataclass
class FakeChat:
    """A chat known to the double."""

    id: int
    type: ChatType
    title: str | None = None
    username: str | None = None
    first_name: str | None = None
    blocked: bool = False
    migrated_to: int | None = None
    rate: tuple[int, float] | None = None  # per-chat (count, unscaled window) override
    pinned: list[int] = field(default_factory=list)
    #: whether pins of each pinChatMessage were silent (disable_notification), in order
    pin_silent: list[bool] = field(default_factory=list)
    #: the bot may pin and unpin here (an admin right in groups and channels)
    can_pin: bool = True
    #: the bot may delete its messages here (False: as for channel posts older than 48 h)
    can_delete: bool = True
    messages: dict[int, Params] = field(default_factory=dict)
    next_message_id: int = 1
    #: the bot's ChatMember in this chat (getChatMember), by default an administrator who
    #: may post; sendMessage is refused as Telegram refuses it when these rights are missing
    bot_member: Params = field(default_factory=lambda: dict(ADMIN_RIGHTS))
    #: a supergroup with topics on (a forum): messages go to a topic (message_thread_id) or,
    #: without one, to its General topic
    is_forum: bool = False
    topics: dict[int, FakeTopic] = field(default_factory=dict)

    def as_dict(self) -> Params:
        """The Chat object as Telegram serialises it."""
        out: Params = {"id": self.id, "type": self.type}
        if self.type == "private":
            out["first_name"] = self.first_name or f"User {self.id}"
        else:
            out["title"] = self.title or f"Chat {self.id}"
        if self.username:
            out["username"] = self.username
        if self.is_forum:
            out["is_forum"] = True
        return out


@dataclass
class SentMessage:
    """A message the bot sent, with the request as received and the message as answered."""

    chat_id: int
    message_id: int
    text: str  # visible text after entity parsing
    entities: list[Params]
    html: str  # the text parameter exactly as received
    parse_mode: str | None
    reply_markup: Params | None
    link_preview_options: Params | None
    params: Params  # every parameter, JSON values decoded
    date: int
    edits: list[Params] = field(default_factory=list)  # earlier versions, oldest first
    deleted: bool = False  # by deleteMessage
    #: the forum topic it was sent in (None: the chat itself, or a forum's General topic)
    message_thread_id: int | None = None


@dataclass
class InlineResult:
    """One article of an inline answer, as a reader would share it."""

    id: str
    title: str
    description: str | None
    url: str | None
    #: the visible text of the message it sends, its entities and raw (HTML) text
    text: str
    html: str
    entities: list[Params]


@dataclass
class InlineAnswer:
    """One accepted answerInlineQuery."""

    query_id: str
    results: list[InlineResult]
    cache_time: int | None
    is_personal: bool
    next_offset: str


@dataclass
class RequestRecord:
    """One Bot API call as the double answered it."""

    method: str
    params: Params
    at: float  # injected clock
    status: int
    chat_id: int | None
    description: str | None = None


@dataclass
class _Fault:
    chat_id: int | str | None
    kind: str
    times: int
    method: str | None
    retry_after: float
    delay: float
    status: int


async def _until(
    check: Callable[[], bool],
    timeout: float,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    event: Callable[[], asyncio.Event],
) -> None:
    """Wait until ``check()`` holds, asking again each time ``event()`` is set."""
    async with asyncio.timeout(timeout):
        while not check():
            await event().wait()


class FakeTelegram:
    """A loopback Telegram Bot API server behaving like the real one, for PTB end-to-end tests.

    Use ``async with FakeTelegram() as tg:`` and pass ``tg.base_url`` to PTB as ``base_url``.
    ``scale`` compresses time: flood windows are divided by it and retry_after values reported
    accordingly (scale=100 turns "1 message/s" into "100 messages/s, retry after 0.01").
    ``clock`` (monotonic seconds) drives flood windows and request timestamps; inject a fake one
    to test limits without waiting.
    """

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_username: str = "digest_test_bot",
        bot_name: str = "Digest Test Bot",
        limits: FloodLimits | None = None,
        flood_control: bool = True,
        scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        host: str = "127.0.0.1",
        port: int = 0,
        max_poll_timeout: float = 50.0,
    ) -> None:
        if scale <= 0:
            raise ValueError("scale must be positive")
        self.token = token
        self.bot_id = int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 1
        self.bot_username = bot_username
        self.bot_name = bot_name
        self.limits = limits or FloodLimits()
        self.flood_control = flood_control
        self.scale = scale
        self.clock = clock
        self.wall_clock = wall_clock
        self.host = host
        self.port = port
        self.max_poll_timeout = max_poll_timeout

        self.chats: dict[int, FakeChat] = {}
        self.requests: list[RequestRecord] = []
        #: requests received and not answered yet (see :meth:`wait_until_answered`)
        self.unanswered = 0
        self._activity = asyncio.Event()  # set (and replaced) as each request comes and goes
        self.answered_callbacks: list[Params] = []
        self.all_commands: dict[tuple[str, str], list[Params]] = {}
        self.webhook: Params | None = None
        #: what getWebhookInfo reports as the last delivery error (text, unix time)
        self.webhook_error: tuple[str, int] | None = None
        self.flood_429s = 0
        #: sendMessage calls that carried allow_paid_broadcast
        self.paid_broadcasts = 0
        #: seconds added to the wall clock in the ``Date`` header of every answer (a server
        #: whose clock differs from the client's, for clock-skew checks)
        self.date_offset = 0.0

        self._sent: list[SentMessage] = []
        #: files users sent (documents): file_id -> (file_unique_id, bytes); and what getFile
        #: handed out: file_path -> bytes (the download URL's last part)
        self._files: dict[str, tuple[str, bytes]] = {}
        self._file_paths: dict[str, bytes] = {}
        self.downloads: list[str] = []
        self._faults: list[_Fault] = []
        #: methods held by :meth:`hold` (lower case) -> what releases them
        self._held: dict[str, asyncio.Event] = {}
        #: requests waiting in a hold right now
        self.held = 0
        self._updates: list[Params] = []
        self._update_ids = itertools.count(10_000)
        self._callback_ids = itertools.count(1)
        self._pending_callbacks: set[str] = set()
        self._inline_ids = itertools.count(1)
        #: inline query id -> the query, until it is answered
        self._pending_inline: dict[str, Params] = {}
        #: every accepted answerInlineQuery, in order
        self.inline_answers: list[InlineAnswer] = []
        self._inline_answered = asyncio.Event()
        self._allowed_updates: list[str] | None = None
        self._global_window: deque[float] = deque()
        self._chat_windows: dict[int, deque[float]] = {}
        self._updates_changed = asyncio.Event()
        self._sent_changed = asyncio.Event()
        self._closing = asyncio.Event()
        self._poll_generation = 0
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, Callable[[Params], Awaitable[Any]]] = {
            name.lower(): handler
            for name, handler in {
                "getMe": self._get_me,
                "getUpdates": self._get_updates,
                "deleteWebhook": self._delete_webhook,
                "setWebhook": self._set_webhook,
                "getWebhookInfo": self._get_webhook_info,
                "sendMessage": self._send_message,
                "editMessageText": self._edit_message_text,
                "deleteMessage": self._delete_message,
                "answerCallbackQuery": self._answer_callback_query,
                "answerInlineQuery": self._answer_inline_query,
                "setMyCommands": self._set_my_commands,
                "getMyCommands": self._get_my_commands,
                "deleteMyCommands": self._delete_my_commands,
                "pinChatMessage": self._pin_chat_message,
                "sendChatAction": self._send_chat_action,
                "createForumTopic": self._create_forum_topic,
                "closeForumTopic": self._close_forum_topic,
                "reopenForumTopic": self._reopen_forum_topic,
                "deleteForumTopic": self._delete_forum_topic,
                "unpinChatMessage": self._unpin_chat_message,
                "getChat": self._get_chat,
                "getChatMember": self._get_chat_member,
                "getFile": self._get_file,
                "close": self._close,
                "logOut": self._close,
            }.items()
        }

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Bind 127.0.0.1 (a random port unless one was given) and serve."""
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("*", "/_fake/{action}", self._control)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        log.debug("fake Telegram listening on %s", self.base_url)

    async def stop(self) -> None:
        """Release pending long polls and slow answers, then shut the server down."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        """Root URL of the server, e.g. http://127.0.0.1:PORT."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What PTB takes as ``base_url``; PTB appends the token and the method."""
        return f"{self.url}/bot"

    # ----------------------------------------------------------------- test-side API

    def add_chat(
        self,
        chat_id: int,
        type: ChatType = "private",
        *,
        title: str | None = None,
        username: str | None = None,
        first_name: str | None = None,
        rate: tuple[int, float] | None = None,
        forum: bool = False,
    ) -> FakeChat:
        """Register a chat the bot can write to; ``rate`` overrides its flood limit; ``forum``
        turns topics on (supergroups only, as on Telegram)."""
        if type not in ("private", "group", "supergroup", "channel"):
            raise ValueError(f"unknown chat type {type!r}")
        if forum and type != "supergroup":
            raise ValueError("only supergroups can have topics")
        chat = FakeChat(
            chat_id,
            type,
            title=title,
            username=username.lstrip("@") if username else None,
            first_name=first_name,
            rate=rate,
            is_forum=forum,
        )
        if forum:  # message 1 made the group: no topic can have General's id (1)
            chat.next_message_id = GENERAL_TOPIC + 1
        self.chats[chat_id] = chat
        return chat

    def add_topic(self, chat_id: int, name: str) -> FakeTopic:
        """Create a topic in a forum supergroup, as an admin of it would (createForumTopic)."""
        chat = self.chats[chat_id]
        if not chat.is_forum:
            raise ValueError(f"chat {chat_id} is not a forum")
        return self._new_topic(chat, name, TOPIC_COLORS[len(chat.topics) % len(TOPIC_COLORS)])

    def close_topic(self, chat_id: int, topic: int, *, closed: bool = True) -> None:
        """Close (or reopen) a topic: sends to it are refused with TOPIC_CLOSED."""
        self.chats[chat_id].topics[topic].closed = closed

    def delete_topic(self, chat_id: int, topic: int) -> None:
        """Delete a topic with its messages: sends to it are refused with TOPIC_DELETED."""
        chat = self.chats[chat_id]
        chat.topics[topic].deleted = True
        for sent in self._sent:
            if sent.chat_id == chat_id and sent.message_thread_id == topic:
                sent.deleted = True
                chat.messages.pop(sent.message_id, None)

    def set_rate(self, chat_id: int, count: int, window: float) -> None:
        """Override the flood limit of one chat: ``count`` messages per ``window`` seconds."""
        self.chats[chat_id].rate = (count, window)

    def block(self, chat_id: int) -> None:
        """Permanently refuse the chat: blocked by the user, or the bot kicked from it."""
        self.chats[chat_id].blocked = True

    def set_bot_member(self, chat_id: int, status: str, **rights: bool) -> None:
        """The bot's membership in a chat as getChatMember reports it, e.g.
        ``("administrator", can_post_messages=False)``, ``("member")``, ``("left")`` or
        ``("restricted", can_send_messages=False)``; sendMessage obeys it."""
        member: Params = {"status": status}
        if status == "administrator":
            member = {**ADMIN_RIGHTS, **rights}
        elif status == "restricted":
            member.update({"is_member": True, "can_send_messages": True, **rights})
        self.chats[chat_id].bot_member = member

    def unblock(self, chat_id: int) -> None:
        """Undo :meth:`block`."""
        self.chats[chat_id].blocked = False

    def migrate(self, chat_id: int, new_chat_id: int | None = None) -> FakeChat:
        """Upgrade a group to a supergroup (permanent, as on Telegram) and return the new chat."""
        old = self.chats[chat_id]
        new_id = new_chat_id if new_chat_id is not None else -(10**12 + abs(chat_id))
        old.migrated_to = new_id
        return self.chats.get(new_id) or self.add_chat(
            new_id, "supergroup", title=old.title, username=old.username
        )

    def fail_next(
        self,
        chat_id: int | str | None,
        kind: FaultKind,
        times: int = 1,
        *,
        method: str | None = None,
        retry_after: float = 5,
        delay: float = 2.0,
        status: int = 500,
    ) -> None:
        """Make the next ``times`` matching requests fail the way Telegram would.

        A request matches when it targets ``chat_id`` (None: any chat) and, if given, calls
        ``method``. With neither, getUpdates is never matched (polling would eat the fault).
        Kinds: blocked and kicked (403), migrated (400 with migrate_to_chat_id; the upgrade is
        permanent, as on Telegram, and the new supergroup exists afterwards), server_error
        (``status`` 500 with a JSON body, or 502 with nginx's HTML page), slow (answer after
        ``delay`` real seconds; the request still takes effect, like a real timeout), flood (429
        with ``retry_after`` reported as given).
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}")
        self._faults.append(_Fault(chat_id, kind, times, method, retry_after, delay, status))

    def hold(self, method: str) -> None:
        """Hold every later ``method`` request, before it takes effect, until :meth:`release`:
        a Bot API that stalls with the requests in flight (:attr:`held` counts them)."""
        self._held.setdefault(method.lower(), asyncio.Event())

    def release(self, method: str) -> None:
        """Let the requests :meth:`hold` keeps, and later ones, go on as usual."""
        gate = self._held.pop(method.lower(), None)
        if gate is not None:
            gate.set()

    def inject_message(
        self,
        chat_id: int,
        from_user: int | Params,
        text: str,
        *,
        reply_to_message_id: int | None = None,
        message_thread_id: int | None = None,
    ) -> Params:
        """Queue an incoming message (a channel_post in channels) and return the Update.

        ``/command`` and ``/command@botname`` get bot_command entities as Telegram adds them.
        Unknown positive chat ids become private chats with that user. ``message_thread_id``
        sends it in that topic of a forum (as Telegram shows it: ``is_topic_message``, and a
        reply to the topic's creation message).
        """
        user = self._user_dict(from_user)
        chat = self.chats.get(chat_id)
        if chat is None:
            if chat_id <= 0:
                raise KeyError(f"chat {chat_id} is not registered; call add_chat first")
            chat = self.add_chat(chat_id, "private", first_name=user.get("first_name"))
        message: Params = {
            "message_id": self._next_message_id(chat),
            "date": self._now(),
            "chat": chat.as_dict(),
            "text": text,
        }
        if chat.type == "channel":
            message["sender_chat"] = chat.as_dict()
        else:
            message["from"] = user
        entities = [
            {
                "type": "bot_command",
                "offset": utf16_len(text[: m.start()]),
                "length": utf16_len(m.group()),
            }
            for m in _BOT_COMMAND_IN_TEXT.finditer(text)
        ]
        if entities:
            message["entities"] = entities
        if reply_to_message_id is not None and reply_to_message_id in chat.messages:
            message["reply_to_message"] = chat.messages[reply_to_message_id]
        if message_thread_id is not None:
            topic = self._topic_or_error(chat, message_thread_id)
            message["message_thread_id"] = topic.id
            message["is_topic_message"] = True
            message.setdefault("reply_to_message", chat.messages[topic.id])
        chat.messages[message["message_id"]] = message
        kind = "channel_post" if chat.type == "channel" else "message"
        return self._push_update({kind: message})

    def inject_document(
        self,
        chat_id: int,
        from_user: int | Params,
        file_name: str,
        data: bytes,
        *,
        caption: str | None = None,
        mime_type: str = "text/plain",
    ) -> Params:
        """Queue a message carrying a document (a file the user sent) and return the Update.

        As Telegram does, the message holds the file's ``file_id``, ``file_unique_id``, name,
        MIME type and size, not its bytes: the bot gets a ``file_path`` from ``getFile`` and
        downloads ``/file/bot<token>/<file_path>``.
        """
        user = self._user_dict(from_user)
        chat = self.chats.get(chat_id)
        if chat is None:
            if chat_id <= 0:
                raise KeyError(f"chat {chat_id} is not registered; call add_chat first")
            chat = self.add_chat(chat_id, "private", first_name=user.get("first_name"))
        unique = f"AgAD{len(self._files):04d}"
        file_id = f"BQACAgIAAxkBAA{len(self._files):06d}{unique}"
        self._files[file_id] = (unique, data)
        message: Params = {
            "message_id": self._next_message_id(chat),
            "date": self._now(),
            "chat": chat.as_dict(),
            "from": user,
            "document": {
                "file_id": file_id,
                "file_unique_id": unique,
                "file_name": file_name,
                "mime_type": mime_type,
                "file_size": len(data),
            },
        }
        if caption is not None:
            message["caption"] = caption
        chat.messages[message["message_id"]] = message
        return self._push_update({"message": message})

    def inject_callback(
        self, chat_id: int, from_user: int | Params, message_id: int, data: str
    ) -> Params:
        """Queue a callback_query Update for a button press on a message in the chat."""
        chat = self.chats[chat_id]
        if message_id not in chat.messages:
            raise KeyError(f"message {message_id} not found in chat {chat_id}")
        query_id = str(next(self._callback_ids) * 1_000_003)
        self._pending_callbacks.add(query_id)
        query = {
            "id": query_id,
            "from": self._user_dict(from_user),
            "message": chat.messages[message_id],
            "chat_instance": str(abs(hash((self.bot_id, chat_id)))),
            "data": data,
        }
        return self._push_update({"callback_query": query})

    def inject_inline_query(
        self, from_user: int | Params, query: str, *, offset: str = "", chat_type: str = "sender"
    ) -> str:
        """Queue an inline_query Update (``@bot query`` typed in a chat of ``chat_type``) and
        return its id; the bot may answer it once (answerInlineQuery)."""
        if len(query) > MAX_INLINE_QUERY:
            raise ValueError(f"an inline query holds at most {MAX_INLINE_QUERY} characters")
        query_id = str(next(self._inline_ids) * 7_000_003)
        inline = {
            "id": query_id,
            "from": self._user_dict(from_user),
            "query": query,
            "offset": offset,
            "chat_type": chat_type,
        }
        self._pending_inline[query_id] = inline
        self._push_update({"inline_query": inline})
        return query_id

    async def wait_for_inline_answer(
        self,
        query_id: str,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded test helper
    ) -> InlineAnswer:
        """The answer to inline query ``query_id``, once the bot sent it."""

        async def answered() -> InlineAnswer:
            while True:
                for answer in self.inline_answers:
                    if answer.query_id == query_id:
                        return answer
                self._inline_answered.clear()
                await self._inline_answered.wait()

        return await asyncio.wait_for(answered(), timeout)

    def sent(self, chat_id: int | None = None) -> list[SentMessage]:
        """Messages the bot sent, in order, optionally for one chat."""
        return [m for m in self._sent if chat_id is None or m.chat_id == chat_id]

    @property
    def commands(self) -> dict[str, list[Params]]:
        """Commands set for the default scope, by language code ("" for all languages)."""
        return {
            lang: cmds
            for (scope, lang), cmds in self.all_commands.items()
            if scope == _scope_key(None)
        }

    @property
    def pending_updates(self) -> int:
        """Updates not yet confirmed by an offset."""
        return len(self._updates)

    def calls(self, method: str) -> list[RequestRecord]:
        """Requests of one method (case-insensitive), in order."""
        return [r for r in self.requests if r.method.lower() == method.lower()]

    async def wait_for_messages(
        self,
        chat_id: int | None,
        n: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    ) -> list[SentMessage]:
        """Wait until at least ``n`` messages were sent to the chat, then return them.

        Raises:
            TimeoutError: when fewer arrived within ``timeout`` real seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(messages := self.sent(chat_id)) < n:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"{len(messages)} of {n} messages to chat {chat_id} after {timeout} s"
                )
            changed = self._sent_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)
        return messages

    async def wait_until(
        self,
        check: Callable[[], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    ) -> None:
        """Wait until ``check()`` (asked again after each message sent) holds.

        Raises:
            TimeoutError: when it did not within ``timeout`` real seconds.
        """
        await _until(check, timeout, lambda: self._sent_changed)

    # ----------------------------------------------------------------- HTTP plumbing

    async def wait_until_answered(
        self,
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    ) -> None:
        """Wait until every request but open long polls (``getUpdates``) has been answered:
        a slow or delayed request of the bot has landed, or was given up by its client.

        Raises:
            TimeoutError: when some were not within ``timeout`` real seconds.
        """
        await self.wait_for(lambda: not self.unanswered, timeout)

    async def wait_for(
        self,
        check: Callable[[], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    ) -> None:
        """Wait until ``check()`` (asked again as each request comes and is answered) holds;
        raises TimeoutError when it did not within ``timeout`` real seconds."""
        await _until(check, timeout, lambda: self._activity)

    @property
    def open_connections(self) -> int:
        """Client connections to the double still open (keep-alive ones included)."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    async def wait_disconnected(
        self,
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    ) -> None:
        """Wait until no client holds a connection to the double (so none has a request, a
        long poll included, under way): a bot that stopped has let go of the API.

        Raises:
            TimeoutError: when some connection was still open after ``timeout`` real seconds.
        """
        for _ in range(int(timeout / 0.01)):  # (aiohttp tells of a closed one no other way)
            if not self.open_connections:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError(f"{self.open_connections} connections still open after {timeout} s")

    def _active(self) -> None:
        self._activity.set()
        self._activity = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.Response:
        polling = request.match_info["method"].lower() == "getupdates"
        self.unanswered += not polling
        try:
            return await self._answer(request)
        finally:
            self.unanswered -= not polling
            self._active()

    async def _answer(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        method = request.match_info["method"]
        if ":" not in token:  # Telegram answers 404 to malformed tokens
            return _error_response(ApiError(404, "Not Found"))
        if token != self.token:
            return _error_response(ApiError(401, "Unauthorized"))
        try:
            params = await _read_params(request)
        except ApiError as exc:
            return _error_response(exc)
        handler = self._methods.get(method.lower())
        chat_id = self._chat_of(params)
        record = RequestRecord(method, params, self.clock(), 200, chat_id)
        self.requests.append(record)
        self._active()
        if handler is None:
            record.status, record.description = 404, "Not Found"
            return _error_response(ApiError(404, "Not Found"))
        gate = self._held.get(method.lower())
        if gate is not None:
            self.held += 1
            try:
                await _first(gate.wait(), self._closing.wait())
            finally:
                self.held -= 1
        try:
            await self._apply_fault(method, params, chat_id)
            result = await handler(params)
        except ApiError as exc:
            record.status, record.description = exc.status, exc.description
            if exc.status == 429:
                self.flood_429s += 1
            if exc.status == 502:
                return web.Response(status=502, text=_NGINX_502, content_type="text/html")
            return self._dated(_error_response(exc))
        return self._dated(web.json_response({"ok": True, "result": result}))

    def _dated(self, response: web.Response) -> web.Response:
        """The ``Date`` header from the double's wall clock (plus ``date_offset``)."""
        response.headers["Date"] = email.utils.formatdate(
            self.wall_clock() + self.date_offset, usegmt=True
        )
        return response

    def _chat_of(self, params: Params) -> int | None:
        raw = params.get("chat_id")
        if raw is None:
            return None
        chat = self._lookup_chat(raw)
        if chat is not None:
            return chat.id
        with contextlib.suppress(ValueError, TypeError):
            return int(raw)
        return None

    async def _apply_fault(self, method: str, params: Params, chat_id: int | None) -> None:
        for fault in self._faults:
            if fault.method is not None and fault.method.lower() != method.lower():
                continue
            if fault.method is None and method.lower() == "getupdates":
                continue
            if fault.chat_id is not None:
                wanted = self._lookup_chat(fault.chat_id)
                wanted_id = wanted.id if wanted else fault.chat_id
                if chat_id is None or wanted_id != chat_id:
                    continue
            fault.times -= 1
            if fault.times <= 0:
                self._faults.remove(fault)
            await self._raise_fault(fault, chat_id)
            return

    async def _raise_fault(self, fault: _Fault, chat_id: int | None) -> None:
        chat = self.chats.get(chat_id) if chat_id is not None else None
        if fault.kind == "blocked":
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        if fault.kind == "kicked":
            where = chat.type if chat is not None and chat.type != "private" else "group"
            raise ApiError(403, f"Forbidden: bot was kicked from the {where} chat")
        if fault.kind == "migrated":
            if chat is None:
                raise ApiError(400, "Bad Request: chat not found")
            self.migrate(chat.id)
            self._check_writable(chat)
        if fault.kind == "server_error":
            description = "Internal Server Error" if fault.status == 500 else "Bad Gateway"
            raise ApiError(fault.status, description)
        if fault.kind == "flood":
            raise _flood_error(fault.retry_after)
        if fault.kind == "slow":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), fault.delay)

    async def _control(self, request: web.Request) -> web.Response:
        """A JSON control API so a subprocess under test can be driven from outside."""
        action = request.match_info["action"]
        body: Params = dict(request.query)
        if request.can_read_body:
            body.update(await request.json())
        try:
            result = self._control_action(action, body)
        except (KeyError, ValueError, TypeError) as exc:
            return web.json_response({"ok": False, "description": repr(exc)}, status=400)
        return web.json_response({"ok": True, "result": result})

    def _control_action(self, action: str, body: Params) -> Any:
        if action == "sent":
            chat = body.get("chat_id")
            return [_fields(m) for m in self.sent(int(chat) if chat is not None else None)]
        if action == "requests":
            return [_fields(r) for r in self.requests]
        if action == "state":
            return {
                "answered_callbacks": self.answered_callbacks,
                "commands": self.commands,
                "webhook": self.webhook,
                "flood_429s": self.flood_429s,
                "pending_updates": self.pending_updates,
                "unanswered": self.unanswered,
                "held": self.held,
            }
        if action == "add_chat":
            chat = self.add_chat(
                int(body["id"]),
                body.get("type", "private"),
                title=body.get("title"),
                username=body.get("username"),
                first_name=body.get("first_name"),
            )
            return chat.as_dict()
        if action == "inject_message":
            return self.inject_message(int(body["chat_id"]), body["from_user"], body["text"])
        if action == "inject_callback":
            return self.inject_callback(
                int(body["chat_id"]), body["from_user"], int(body["message_id"]), body["data"]
            )
        if action == "fail_next":
            extra = {k: body[k] for k in ("method", "retry_after", "delay", "status") if k in body}
            self.fail_next(body.get("chat_id"), body["kind"], int(body.get("times", 1)), **extra)
            return True
        if action == "block":
            self.block(int(body["chat_id"]))
            return True
        if action == "hold":
            self.hold(body["method"])
            return True
        if action == "release":
            self.release(body["method"])
            return True
        raise KeyError(action)

    # ----------------------------------------------------------------- helpers

    def _now(self) -> int:
        return int(self.wall_clock())

    def _bot_user(self) -> Params:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.bot_name,
            "username": self.bot_username,
        }

    @staticmethod
    def _user_dict(user: int | Params) -> Params:
        if isinstance(user, dict):
            return {"is_bot": False, "first_name": f"User {user['id']}", **user}
        return {
            "id": user,
            "is_bot": False,
            "first_name": f"User {user}",
            "username": f"user{user}",
            "language_code": "en",
        }

    def _next_message_id(self, chat: FakeChat) -> int:
        message_id = chat.next_message_id
        chat.next_message_id += 1
        return message_id

    def _push_update(self, payload: Params) -> Params:
        update = {"update_id": next(self._update_ids), **payload}
        self._updates.append(update)
        self._wake_pollers()
        return update

    def _wake_pollers(self) -> None:
        self._updates_changed.set()
        self._updates_changed = asyncio.Event()

    def _lookup_chat(self, raw: Any) -> FakeChat | None:
        if isinstance(raw, str) and raw.startswith("@"):
            name = raw[1:].lower()
            return next(
                (c for c in self.chats.values() if c.username and c.username.lower() == name),
                None,
            )
        try:
            return self.chats.get(int(raw))
        except (TypeError, ValueError):
            return None

    def _resolve_chat(self, params: Params, name: str = "chat_id") -> FakeChat:
        raw = params.get(name)
        if raw is None or raw == "":
            raise ApiError(400, f"Bad Request: {name} is empty")
        chat = self._lookup_chat(raw)
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
        return chat

    def _check_writable(self, chat: FakeChat) -> None:
        if chat.migrated_to is not None:
            raise ApiError(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                {"migrate_to_chat_id": chat.migrated_to},
            )
        if chat.blocked:
            if chat.type == "private":
                raise ApiError(403, "Forbidden: bot was blocked by the user")
            raise ApiError(403, f"Forbidden: bot was kicked from the {chat.type} chat")
        member = chat.bot_member
        if chat.type == "private":
            return
        status = member.get("status")
        if status in ("left", "kicked"):
            raise ApiError(403, f"Forbidden: bot is not a member of the {chat.type} chat")
        if chat.type == "channel" and not (
            status == "creator" or (status == "administrator" and member.get("can_post_messages"))
        ):
            raise ApiError(400, "Bad Request: need administrator rights in the channel chat")
        if status == "restricted" and not member.get("can_send_messages"):
            raise ApiError(400, "Bad Request: not enough rights to send text messages to the chat")

    def _check_flood(self, chat: FakeChat, *, paid: bool = False) -> None:
        if not self.flood_control:
            return
        now = self.clock()
        limits = self.limits
        if chat.rate is not None:
            count, window = chat.rate
        elif chat.type == "private":
            count, window = limits.private_count, limits.private_window
        else:
            count, window = limits.group_count, limits.group_window
        chat_window = self._chat_windows.setdefault(chat.id, deque())
        wait = max(
            _window_wait(
                self._global_window,
                limits.paid_global_count if paid else limits.global_count,
                limits.global_window / self.scale,
                now,
            ),
            _window_wait(chat_window, count, window / self.scale, now),
        )
        if wait > 0:
            # Telegram reports whole seconds; scaled runs report the scaled equivalent.
            whole = max(1, math.ceil(wait * self.scale - 1e-9))
            raise _flood_error(whole if self.scale == 1 else whole / self.scale)
        self._global_window.append(now)
        chat_window.append(now)

    def _parse_text(self, params: Params) -> tuple[str, list[Params], str]:
        """Visible text, entities and the raw text of a text-bearing request."""
        raw = params.get("text")
        if raw is None or raw == "":
            raise ApiError(400, "Bad Request: message text is empty")
        raw = str(raw)
        parse_mode = params.get("parse_mode") or ""
        mode = str(parse_mode).lower()
        if mode == "html":
            try:
                text, entities = parse_html(raw)
            except HtmlParseError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
            if not text:
                raise ApiError(400, "Bad Request: text must be non-empty")
        elif mode in ("", "markdown", "markdownv2"):
            if mode:
                log.warning("fake Telegram does not parse %s; treating text as plain", parse_mode)
            text = raw.strip()
            entities = _decode_json(params, "entities") or []
            if not text:
                raise ApiError(400, "Bad Request: message text is empty")
        else:
            raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
        if utf16_len(text) > MAX_TEXT_UTF16:
            raise ApiError(400, "Bad Request: message is too long")
        return text, entities, raw

    def _message_dict(
        self,
        chat: FakeChat,
        message_id: int,
        text: str,
        entities: list[Params],
        reply_markup: Params | None,
        link_preview_options: Params | None,
    ) -> Params:
        message: Params = {"message_id": message_id, "date": self._now(), "chat": chat.as_dict()}
        if chat.type == "channel":
            message["sender_chat"] = chat.as_dict()
        else:
            message["from"] = self._bot_user()
        message["text"] = text
        if entities:
            message["entities"] = entities
        if link_preview_options:
            message["link_preview_options"] = link_preview_options
        if reply_markup and "inline_keyboard" in reply_markup:
            message["reply_markup"] = reply_markup
        return message

    def _notify_sent(self) -> None:
        self._sent_changed.set()
        self._sent_changed = asyncio.Event()

    # ----------------------------------------------------------------- methods

    async def _get_me(self, params: Params) -> Params:
        return {
            **self._bot_user(),
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    async def _get_updates(self, params: Params) -> list[Params]:
        if self.webhook is not None:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = _int(params, "offset")
        limit = min(max(_int(params, "limit") or 100, 1), 100)
        timeout = min(max(_float(params, "timeout") or 0.0, 0.0), self.max_poll_timeout)
        allowed = _decode_json(params, "allowed_updates")
        if allowed is not None:
            self._allowed_updates = list(allowed) or None
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake_pollers()  # an older long poll still waiting now answers 409
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if generation != self._poll_generation:
                raise ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; "
                    "make sure that only one bot instance is running",
                )
            self._confirm(offset)
            ready = [u for u in self._updates if self._is_allowed(u)]
            self._updates = ready
            remaining = deadline - loop.time()
            if ready or remaining <= 0 or self._closing.is_set():
                return ready[:limit]
            changed = self._updates_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(changed.wait(), self._closing.wait()), remaining)

    def _confirm(self, offset: int | None) -> None:
        if offset is None:
            return
        if offset < 0:
            self._updates = self._updates[offset:]
        else:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]

    def _is_allowed(self, update: Params) -> bool:
        kind = next(k for k in update if k != "update_id")
        if self._allowed_updates is None:
            return kind not in DEFAULT_EXCLUDED_UPDATES
        return kind in self._allowed_updates

    async def _delete_webhook(self, params: Params) -> bool:
        self.webhook = None
        if _bool(params, "drop_pending_updates"):
            self._updates.clear()
        return True

    async def _set_webhook(self, params: Params) -> bool:
        url = str(params.get("url") or "")
        if not url:
            self.webhook = None
            return True
        if not url.startswith("https://"):
            raise ApiError(
                400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
            )
        self.webhook = {
            "url": url,
            "secret_token": params.get("secret_token"),
            "allowed_updates": _decode_json(params, "allowed_updates"),
            "max_connections": _int(params, "max_connections") or 40,
        }
        if _bool(params, "drop_pending_updates"):
            self._updates.clear()
        return True

    async def _get_webhook_info(self, params: Params) -> Params:
        info: Params = {
            "url": "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self.webhook_error is not None:
            info["last_error_message"], info["last_error_date"] = self.webhook_error
        if self.webhook is not None:
            info["url"] = self.webhook["url"]
            info["max_connections"] = self.webhook["max_connections"]
            if self.webhook["allowed_updates"]:
                info["allowed_updates"] = self.webhook["allowed_updates"]
        return info

    async def _send_message(self, params: Params) -> Params:
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        topic = self._send_topic(chat, params)
        text, entities, raw = self._parse_text(params)
        reply_markup = _decode_json(params, "reply_markup")
        _validate_markup(reply_markup)
        link_preview = _decode_json(params, "link_preview_options")
        paid = _bool(params, "allow_paid_broadcast")
        self._check_flood(chat, paid=paid)
        if paid:
            self.paid_broadcasts += 1
        message_id = self._next_message_id(chat)
        message = self._message_dict(chat, message_id, text, entities, reply_markup, link_preview)
        if topic is not None:
            message["message_thread_id"] = topic.id
            message["is_topic_message"] = True
        chat.messages[message_id] = message
        self._sent.append(
            SentMessage(
                chat_id=chat.id,
                message_id=message_id,
                text=text,
                entities=entities,
                html=raw,
                parse_mode=params.get("parse_mode"),
                reply_markup=reply_markup,
                link_preview_options=link_preview,
                params=_decoded(params),
                date=message["date"],
                message_thread_id=topic.id if topic is not None else None,
            )
        )
        self._notify_sent()
        return message

    def _send_topic(self, chat: FakeChat, params: Params) -> FakeTopic | None:
        """The topic a send names (``message_thread_id``), refused as Telegram refuses it."""
        thread = _int(params, "message_thread_id")
        if thread is None:
            return None
        if not chat.is_forum:
            # outside forums a message_thread_id names a reply thread; the double has none
            raise ApiError(400, "Bad Request: message thread not found")
        return self._topic_or_error(chat, thread)

    def _topic_or_error(self, chat: FakeChat, thread: int, *, writing: bool = True) -> FakeTopic:
        """Topic ``thread`` of a forum: "message thread not found" for none (the General
        topic takes no id: tdlib/telegram-bot-api#798), TOPIC_DELETED for a deleted one and,
        when ``writing``, TOPIC_CLOSED for a closed one."""
        topic = chat.topics.get(thread)
        if topic is None or thread == GENERAL_TOPIC:
            raise ApiError(400, "Bad Request: message thread not found")
        if topic.deleted:
            raise ApiError(400, "Bad Request: TOPIC_DELETED")
        if writing and topic.closed:
            raise ApiError(400, "Bad Request: TOPIC_CLOSED")
        return topic

    def _new_topic(self, chat: FakeChat, name: str, color: int) -> FakeTopic:
        """A topic and the service message that opens it (whose id the topic's is)."""
        message_id = self._next_message_id(chat)
        topic = FakeTopic(message_id, name, color)
        chat.topics[message_id] = topic
        chat.messages[message_id] = {
            "message_id": message_id,
            "date": self._now(),
            "chat": chat.as_dict(),
            "from": self._bot_user(),
            "message_thread_id": message_id,
            "forum_topic_created": {"name": name, "icon_color": color},
            "is_topic_message": True,
        }
        return topic

    def _check_topic_rights(self, chat: FakeChat) -> None:
        if not chat.is_forum:
            raise ApiError(400, "Bad Request: the chat is not a forum")
        member = chat.bot_member
        status = member.get("status")
        if status != "creator" and not (
            status == "administrator" and member.get("can_manage_topics")
        ):
            raise ApiError(400, "Bad Request: not enough rights to manage forum topics")

    async def _send_chat_action(self, params: Params) -> bool:
        """``sendChatAction``: checked like a send (rights, the topic), then nothing shown
        to the test but the request record."""
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        self._send_topic(chat, params)
        if not str(params.get("action") or ""):
            raise ApiError(400, "Bad Request: action is empty")
        return True

    async def _create_forum_topic(self, params: Params) -> Params:
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        self._check_topic_rights(chat)
        name = str(params.get("name") or "")
        # (the wording of these two refusals is the double's: Telegram documents the limits)
        if not 1 <= len(name) <= MAX_TOPIC_NAME:
            raise ApiError(400, f"Bad Request: topic name must be 1-{MAX_TOPIC_NAME} characters")
        color = _int(params, "icon_color")
        if color is not None and color not in TOPIC_COLORS:
            raise ApiError(400, "Bad Request: invalid icon_color")
        return self._new_topic(chat, name, TOPIC_COLORS[0] if color is None else color).as_dict()

    async def _close_forum_topic(self, params: Params) -> bool:
        return self._topic_closed(params, closed=True)

    async def _reopen_forum_topic(self, params: Params) -> bool:
        return self._topic_closed(params, closed=False)

    def _topic_closed(self, params: Params, *, closed: bool) -> bool:
        chat = self._resolve_chat(params)
        self._check_topic_rights(chat)
        topic = self._topic_or_error(chat, _int(params, "message_thread_id") or 0, writing=False)
        if topic.closed == closed:
            raise ApiError(400, "Bad Request: TOPIC_NOT_MODIFIED")
        topic.closed = closed
        return True

    async def _delete_forum_topic(self, params: Params) -> bool:
        chat = self._resolve_chat(params)
        self._check_topic_rights(chat)
        topic = self._topic_or_error(chat, _int(params, "message_thread_id") or 0, writing=False)
        self.delete_topic(chat.id, topic.id)
        return True

    async def _edit_message_text(self, params: Params) -> Params:
        if params.get("inline_message_id"):
            raise ApiError(400, "Bad Request: inline messages are not supported by the double")
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        message_id = _int(params, "message_id") or 0
        message = chat.messages.get(message_id)
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_id and "sender_chat" not in message:
            raise ApiError(400, "Bad Request: message can't be edited")
        text, entities, raw = self._parse_text(params)
        reply_markup = _decode_json(params, "reply_markup")
        _validate_markup(reply_markup)
        link_preview = _decode_json(params, "link_preview_options")
        if (
            text == message["text"]
            and entities == message.get("entities", [])
            and reply_markup == message.get("reply_markup")
        ):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        edited = self._message_dict(chat, message_id, text, entities, reply_markup, link_preview)
        edited["date"] = message["date"]
        edited["edit_date"] = self._now()
        for kept in ("message_thread_id", "is_topic_message"):  # an edit stays in its topic
            if kept in message:
                edited[kept] = message[kept]
        chat.messages[message_id] = edited
        for sent in self._sent:
            if sent.chat_id == chat.id and sent.message_id == message_id:
                sent.edits.append({"text": sent.text, "html": sent.html, "entities": sent.entities})
                sent.text, sent.entities, sent.html = text, entities, raw
                sent.reply_markup = reply_markup
                sent.parse_mode = params.get("parse_mode")
        return edited

    async def _answer_callback_query(self, params: Params) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        if query_id not in self._pending_callbacks:
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        self._pending_callbacks.discard(query_id)
        self.answered_callbacks.append(
            {
                "callback_query_id": query_id,
                "text": params.get("text"),
                "show_alert": _bool(params, "show_alert"),
                "url": params.get("url"),
                "cache_time": _int(params, "cache_time"),
            }
        )
        return True

    async def _answer_inline_query(self, params: Params) -> bool:
        """answerInlineQuery as Telegram checks it: a pending query answered once, at most 50
        results with unique ids of 1-64 bytes, articles with a title and a message (its text
        parsed like sendMessage's), a next_offset of at most 64 bytes."""
        query_id = str(params.get("inline_query_id") or "")
        if query_id not in self._pending_inline:
            raise ApiError(
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        results = _decode_json(params, "results")
        if not isinstance(results, list):
            raise ApiError(400, "Bad Request: results must be an array")
        if len(results) > MAX_INLINE_RESULTS:
            raise ApiError(400, "Bad Request: RESULTS_TOO_MUCH")
        seen: set[str] = set()
        articles: list[InlineResult] = []
        for result in results:
            articles.append(self._inline_result(result, seen))
        next_offset = str(params.get("next_offset") or "")
        if len(next_offset.encode("utf-8")) > MAX_INLINE_ID_BYTES:
            raise ApiError(400, "Bad Request: NEXT_OFFSET_INVALID")
        cache_time = _int(params, "cache_time")
        if cache_time is not None and cache_time < 0:
            raise ApiError(400, "Bad Request: cache_time must be non-negative")
        del self._pending_inline[query_id]
        self.inline_answers.append(
            InlineAnswer(
                query_id=query_id,
                results=articles,
                cache_time=cache_time,
                is_personal=_bool(params, "is_personal"),
                next_offset=next_offset,
            )
        )
        self._inline_answered.set()
        return True

    def _inline_result(self, result: Any, seen: set[str]) -> InlineResult:
        if not isinstance(result, dict):
            raise ApiError(400, "Bad Request: an inline query result must be an object")
        kind = result.get("type")
        if kind != "article":
            raise ApiError(400, f"Bad Request: result type {kind!r} is not supported by the double")
        result_id = result.get("id")
        if not isinstance(result_id, str) or not result_id:
            raise ApiError(400, "Bad Request: RESULT_ID_EMPTY")
        if len(result_id.encode("utf-8")) > MAX_INLINE_ID_BYTES:
            raise ApiError(400, "Bad Request: RESULT_ID_INVALID")
        if result_id in seen:
            raise ApiError(400, "Bad Request: RESULT_ID_DUPLICATE")
        seen.add(result_id)
        title = result.get("title")
        if not isinstance(title, str) or not title.strip():
            raise ApiError(400, "Bad Request: ARTICLE_TITLE_EMPTY")
        content = result.get("input_message_content")
        if not isinstance(content, dict) or "message_text" not in content:
            raise ApiError(400, "Bad Request: MESSAGE_EMPTY")
        text, entities, raw = self._parse_text(
            {"text": content.get("message_text"), "parse_mode": content.get("parse_mode")}
        )
        url = result.get("url")
        if url is not None and not str(url).startswith(("http://", "https://")):
            raise ApiError(400, "Bad Request: URL_INVALID")
        _validate_markup(result.get("reply_markup"))
        return InlineResult(
            id=result_id,
            title=title,
            description=result.get("description"),
            url=url,
            text=text,
            html=raw,
            entities=entities,
        )

    async def _set_my_commands(self, params: Params) -> bool:
        commands = _decode_json(params, "commands")
        if not isinstance(commands, list):
            raise ApiError(400, 'Bad Request: parameter "commands" is required')
        if len(commands) > MAX_COMMANDS:
            raise ApiError(400, "Bad Request: BOT_COMMANDS_TOO_MUCH")
        for command in commands:
            if not _COMMAND_RE.match(str(command.get("command", ""))):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise ApiError(400, "Bad Request: command description is empty")
        key = self._commands_key(params)
        if commands:
            self.all_commands[key] = [
                {"command": c["command"], "description": c["description"]} for c in commands
            ]
        else:
            self.all_commands.pop(key, None)
        return True

    async def _get_my_commands(self, params: Params) -> list[Params]:
        return self.all_commands.get(self._commands_key(params), [])

    async def _delete_my_commands(self, params: Params) -> bool:
        self.all_commands.pop(self._commands_key(params), None)
        return True

    def _commands_key(self, params: Params) -> tuple[str, str]:
        language = str(params.get("language_code") or "")
        if language and not re.fullmatch(r"[a-z]{2}", language):
            raise ApiError(400, "Bad Request: invalid language code specified")
        scope = _decode_json(params, "scope")
        if scope and "chat_id" in scope:
            scope = {**scope, "chat_id": self._resolve_chat(scope).id}
        return _scope_key(scope), language

    async def _delete_message(self, params: Params) -> bool:
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        message_id = _int(params, "message_id") or 0
        if message_id not in chat.messages:
            raise ApiError(400, "Bad Request: message to delete not found")
        if not chat.can_delete:
            raise ApiError(400, "Bad Request: message can't be deleted")
        del chat.messages[message_id]
        if message_id in chat.pinned:
            chat.pinned.remove(message_id)
        for sent in self._sent:
            if sent.chat_id == chat.id and sent.message_id == message_id:
                sent.deleted = True
        return True

    def _check_pin_rights(self, chat: FakeChat) -> None:
        if not chat.can_pin:
            raise ApiError(
                400, "Bad Request: not enough rights to manage pinned messages in the chat"
            )

    async def _pin_chat_message(self, params: Params) -> bool:
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        self._check_pin_rights(chat)
        message_id = _int(params, "message_id")
        if message_id is None or message_id not in chat.messages:
            raise ApiError(400, "Bad Request: message to pin not found")
        if message_id in chat.pinned:
            chat.pinned.remove(message_id)
        chat.pinned.append(message_id)
        chat.pin_silent.append(_bool(params, "disable_notification"))
        return True

    async def _unpin_chat_message(self, params: Params) -> bool:
        chat = self._resolve_chat(params)
        self._check_writable(chat)
        self._check_pin_rights(chat)
        message_id = _int(params, "message_id")
        if message_id is None:
            if chat.pinned:
                chat.pinned.pop()
        elif message_id in chat.pinned:
            chat.pinned.remove(message_id)
        else:
            raise ApiError(400, "Bad Request: message to unpin not found")
        return True

    async def _get_chat(self, params: Params) -> Params:
        chat = self._resolve_chat(params)
        info: Params = {
            **chat.as_dict(),
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }
        if chat.pinned:
            info["pinned_message"] = chat.messages[chat.pinned[-1]]
        return info

    async def _get_chat_member(self, params: Params) -> Params:
        chat = self._resolve_chat(params)
        user_id = _int(params, "user_id")
        if user_id is None:
            raise ApiError(400, "Bad Request: user_id is empty")
        if user_id == self.bot_id:
            return {**chat.bot_member, "user": self._bot_user()}
        if chat.type == "private" and user_id == chat.id:
            return {"status": "member", "user": self._user_dict(user_id)}
        raise ApiError(400, "Bad Request: user not found")

    async def _get_file(self, params: Params) -> Params:
        """``getFile``: a ``file_path`` to download the file from (Bot API: at most 20 MB)."""
        file_id = str(params.get("file_id") or "")
        if file_id not in self._files:
            raise ApiError(400, "Bad Request: invalid file_id")
        unique, data = self._files[file_id]
        if len(data) > MAX_DOWNLOAD_BYTES:
            raise ApiError(400, "Bad Request: file is too big")
        path = f"documents/file_{len(self._file_paths)}.txt"
        self._file_paths[path] = data
        return {
            "file_id": file_id,
            "file_unique_id": unique,
            "file_size": len(data),
            "file_path": path,
        }

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """``GET /file/bot<token>/<file_path>``: the bytes of a file ``getFile`` announced."""
        if request.match_info["token"] != self.token:
            return web.Response(status=401, text="Unauthorized")
        path = request.match_info["path"]
        self.downloads.append(path)
        data = self._file_paths.get(path)
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _close(self, params: Params) -> bool:
        return True


# --------------------------------------------------------------------- module helpers


async def _first(*aws: Awaitable[Any]) -> None:
    """Return when the first awaitable finishes; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _fields(record: SentMessage | RequestRecord) -> Params:
    """A record's fields for the control API's JSON, as ``asdict`` gives them but without its
    deep copy of every parameter (the answer is serialised at once; tests poll ``sent`` while
    they wait, and the copies were most of the double's CPU)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _window_wait(window: deque[float], count: int, length: float, now: float) -> float:
    """Seconds until a sliding window of ``length`` holding ``count`` sends has room."""
    while window and window[0] <= now - length:
        window.popleft()
    if len(window) < count:
        return 0.0
    return window[-count] + length - now


def _flood_error(retry_after: float) -> ApiError:
    value: float | int = int(retry_after) if float(retry_after).is_integer() else retry_after
    return ApiError(429, f"Too Many Requests: retry after {value}", {"retry_after": value})


def _error_response(exc: ApiError) -> web.Response:
    body: Params = {"ok": False, "error_code": exc.status, "description": exc.description}
    if exc.parameters:
        body["parameters"] = exc.parameters
    return web.json_response(body, status=exc.status)


async def _read_params(request: web.Request) -> Params:
    """Parameters from the query string and a JSON, urlencoded or multipart body."""
    params: Params = dict(request.query)
    if not request.can_read_body:
        return params
    ctype = request.content_type
    if ctype == "application/json":
        try:
            body = await request.json()
        except json.JSONDecodeError:
            raise ApiError(400, "Bad Request: can't parse JSON object") from None
        if not isinstance(body, dict):
            raise ApiError(400, "Bad Request: JSON object expected")
        params.update(body)
    elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, str):
                params[key] = value
            elif isinstance(value, web.FileField):
                params[key] = {"file": value.filename}
    return params


def _decode_json(params: Params, name: str) -> Any:
    """A JSON-typed parameter: native in JSON bodies, a JSON string in form bodies."""
    value = params.get(name)
    if not isinstance(value, str):
        return value
    if value == "":
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        what = "reply keyboard markup" if name == "reply_markup" else name
        raise ApiError(400, f"Bad Request: can't parse {what} JSON object") from None


def _decoded(params: Params) -> Params:
    """All parameters with JSON strings decoded where they hold objects or arrays."""
    out: Params = {}
    for key, value in params.items():
        if isinstance(value, str) and value[:1] in "[{":
            with contextlib.suppress(json.JSONDecodeError):
                out[key] = json.loads(value)
                continue
        out[key] = value
    return out


def _int(params: Params, name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"Bad Request: invalid {name} specified") from None


def _float(params: Params, name: str) -> float | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"Bad Request: invalid {name} specified") from None


def _bool(params: Params, name: str) -> bool:
    value = params.get(name)
    if isinstance(value, str):
        return value.lower() in ("true", "1")
    return bool(value)


def _scope_key(scope: Params | None) -> str:
    return json.dumps(scope or {"type": "default"}, sort_keys=True)


def _validate_markup(markup: Any) -> None:
    """Reject inline keyboards the way Telegram does."""
    if markup is None:
        return
    if not isinstance(markup, dict):
        raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if rows is None:
        return
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise ApiError(400, 'Bad Request: field "inline_keyboard" must be an Array of Array')
    for button in itertools.chain.from_iterable(rows):
        if not str(button.get("text", "")):
            raise ApiError(400, "Bad Request: BUTTON_TEXT_EMPTY")
        if not any(k in button for k in _BUTTON_ACTIONS):
            raise ApiError(
                400,
                "Bad Request: can't parse inline keyboard button: "
                "Text buttons are unallowed in the inline keyboard",
            )
        if "callback_data" in button:
            size = len(str(button["callback_data"]).encode("utf-8"))
            if not 1 <= size <= MAX_CALLBACK_DATA_BYTES:
                raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
        if "url" in button and not re.match(r"^(https?|tg)://\S+$", str(button["url"])):
            raise ApiError(400, "Bad Request: BUTTON_URL_INVALID")


# --------------------------------------------------------------------- standalone


def _parse_chat_spec(spec: str) -> tuple[int, ChatType, str | None]:
    """Parse "ID:TYPE[:TITLE]" (TYPE private, group, supergroup or channel)."""
    parts = spec.split(":", 2)
    chat_type: Any = parts[1] if len(parts) > 1 else "private"
    return int(parts[0]), chat_type, parts[2] if len(parts) > 2 else None


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeTelegram(
        args.token, scale=args.scale, flood_control=not args.no_flood, port=args.port
    )
    for spec in args.chat:
        chat_id, chat_type, title = _parse_chat_spec(spec)
        fake.add_chat(chat_id, chat_type, title=title)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with fake:
        print(fake.base_url, flush=True)
        await stop.wait()


@contextlib.contextmanager
def running_process(
    chats: Mapping[int, ChatType] | None = None, *, args: Sequence[str] = ()
) -> Iterator[str]:
    """The double as its own process (real flood limits; ``args``: :func:`main`'s options),
    with ``chats`` (id -> type) added; its root URL (the Bot API's base is ``root + "/bot"``).
    Stopped with SIGTERM on exit."""
    from tests import forkserver  # (not imported when the double itself runs as a process)

    proc = forkserver.Popen(
        [sys.executable, "-m", "tests.fakes.telegram_api", *args],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), base_url
        root = base_url.removesuffix("/bot")
        import httpx  # (the double itself serves with aiohttp; only this client uses httpx)

        with httpx.Client(base_url=root) as client:
            for chat, kind in (chats or {}).items():
                client.post("/_fake/add_chat", json={"id": chat, "type": kind})
        yield root
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def main(argv: Iterable[str] | None = None) -> None:
    """Run the double until SIGINT/SIGTERM; print its base_url on the first line of stdout."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--no-flood", action="store_true", help="disable flood limits")
    parser.add_argument(
        "--chat", action="append", default=[], metavar="ID:TYPE[:TITLE]", help="register a chat"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO)
    asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
