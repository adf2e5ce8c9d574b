"""The Bot API at the wire: chat ids and kinds, sendMessage payloads, PTB errors as the core's."""

from __future__ import annotations

import datetime as dt
import inspect
import json
import warnings
from typing import Any

import aiohttp
import httpx
from telegram import Bot, InlineKeyboardMarkup, LinkPreviewOptions
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from bots.outcome import answer_lost
from bots.telegram.request import encode_json
from digest_core.port import (
    DeliveryError,
    Message,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    Target,
    TargetGone,
    TargetKind,
    TargetMoved,
    TransientError,
)

#: BadRequest descriptions (PTB strips "Bad Request: ") that mean we can never post there:
#: https://core.telegram.org/bots/api#making-requests and the error texts Telegram returns.
GONE_DESCRIPTIONS = (
    "chat not found",
    "user not found",
    "peer_id_invalid",
    "chat_write_forbidden",
    "have no rights to send",
    "not enough rights to send",
    "need administrator rights",
    "bot is not a member",
    "group chat was deactivated",
    # a forum topic: closed by its admins (reopened, the target is /reactivate'd), deleted, or
    # never there (https://core.telegram.org/bots/api#closeforumtopic)
    "topic_closed",
    "topic_deleted",
    "message thread not found",
)

#: sendMessage parameters PTB's ``Bot.send_message`` takes by name; anything else in a payload
#: travels as ``api_kwargs`` so the request carries the payload exactly.
_SEND_PARAMS = frozenset(inspect.signature(Bot.send_message).parameters) - {
    "self", "chat_id", "api_kwargs", "reply_markup", "link_preview_options",
}  # fmt: skip


def chat_id(target_id: str) -> int | str:
    """Telegram's chat_id of a target: an integer id, or an ``@channelusername`` as is (a
    forum topic's target, ``-100…:42``, is in that chat)."""
    chat = target_id.partition(":")[0]
    return chat if chat.startswith("@") else int(chat)


def topic_of(target_id: str) -> int | None:
    """The forum topic (``message_thread_id``) a target names after ``:``, if any."""
    _, _, topic = target_id.partition(":")
    return int(topic) if topic else None


def place(chat: int | str, topic: int | None) -> str:
    """The target id of a chat, or of topic ``topic`` of a forum supergroup (``chat:topic``)."""
    return f"{chat}:{topic}" if topic else str(chat)


def target_kind(target_id: str) -> TargetKind:
    """CHANNEL for @usernames and -100… ids, GROUP for other negative ids, else PRIVATE."""
    if target_id.startswith(("@", "-100")):
        return TargetKind.CHANNEL
    if target_id.startswith("-"):
        return TargetKind.GROUP
    return TargetKind.PRIVATE


def split_payload(payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A rendered sendMessage payload as ``send_message`` keyword arguments plus ``api_kwargs``.

    Objects PTB wants typed (keyboard, preview options) are built from their JSON; the
    request PTB sends then carries exactly the payload's fields.
    """
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "reply_markup" and isinstance(value, dict) and "inline_keyboard" in value:
            kwargs[key] = InlineKeyboardMarkup.de_json(value, None)
        elif key == "link_preview_options" and isinstance(value, dict):
            kwargs[key] = LinkPreviewOptions.de_json(value, None)
        elif key in _SEND_PARAMS:
            kwargs[key] = value
        else:
            extra[key] = value
    return kwargs, extra


class SendBodies:
    """sendMessage bodies, JSON: a message's fields encoded once, each chat's id (and forum
    topic) put around them per send.

    A delivery sends the same few messages to every target; encoding a part's 4 kB of text
    for each of them, as PTB's request building did (``Bot._post``: its defaults, a
    ``RequestParameter`` per field, each object to JSON text, then the whole), cost more than
    the rest of the adapter's send. The body holds the fields PTB made of the same
    ``{"chat_id": ..., **payload, **extra, "message_thread_id": ...}``, in that order and form
    (each value a string, objects as JSON text, ``None`` left out: what the Bot API reads from
    a form), so the Bot API gets the same request (``test_wire.py`` compares them).

    ``extra``: fields every send carries after the payload's (``allow_paid_broadcast``);
    ``size``: how many messages are kept encoded (a delivery's parts, a subscriber's form of
    them, a reply), each held, so that one is never taken for another by its ``id``. A
    message's payload is not changed once it is sent (``Message`` is frozen; renderers and
    ``with_actions`` make new ones).
    """

    __slots__ = ("_encoded", "_extra", "_size")

    def __init__(self, extra: dict[str, Any] | None = None, *, size: int = 8) -> None:
        self._extra = dict(extra or {})
        self._size = size
        #: id(message) -> (message, its fields' JSON between the braces)
        self._encoded: dict[int, tuple[Message, bytes]] = {}

    def body(self, chat: int | str, topic: int | None, message: Message) -> bytes:
        """The body of one sendMessage of ``message`` to ``chat`` (into ``topic``)."""
        payload = message.payload
        if "chat_id" in payload or "message_thread_id" in payload:  # (none of ours does)
            fields = {"chat_id": chat, **payload, **self._extra}
            if topic is not None:
                fields["message_thread_id"] = topic
            return encode_json(form_fields(fields))
        known = self._encoded.get(id(message))
        if known is None or known[0] is not message:
            known = (message, encode_json(form_fields({**payload, **self._extra}))[1:-1])
            if len(self._encoded) >= self._size:
                del self._encoded[next(iter(self._encoded))]
            self._encoded[id(message)] = known
        head = (
            b'{"chat_id":"%d"' % chat
            if isinstance(chat, int)
            else b'{"chat_id":' + encode_json(chat)
        )
        parts = [head]
        if known[1]:
            parts.append(known[1])
        if topic is not None:
            parts.append(b'"message_thread_id":"%d"' % topic)
        return b",".join(parts) + b"}"


def form_fields(fields: dict[str, Any]) -> dict[str, str]:
    """A call's fields as PTB sends them (``RequestData.json_parameters``, for JSON values):
    ``None`` left out (of lists too), strings as they are, anything else as JSON text."""
    out: dict[str, str] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            value = [v for v in value if v is not None]
        out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def excerpt(message: Message, width: int = 40) -> str:
    """The start of a message's first line, to tell the parts of a post apart in logs."""
    text = str(message.payload.get("text", ""))
    first = text.strip().split("\n", 1)[0]
    return repr(first[:width] + ("…" if len(first) > width else ""))


def retry_seconds(value: float | dt.timedelta) -> float:
    """RetryAfter.retry_after as float seconds: PTB 22 gives an int, a float or a timedelta."""
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)


def translate(exc: TelegramError, target: Target) -> DeliveryError:
    """The core's DeliveryError for a PTB error (subclasses before their bases)."""
    where = {"platform": target.platform, "target": target.id}
    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PTBDeprecationWarning)  # int → timedelta migration
            wait = retry_seconds(exc.retry_after)
        return RateLimited(str(exc), retry_after=wait, **where)
    if isinstance(exc, ChatMigrated):
        return TargetMoved(str(exc), new_target=str(exc.new_chat_id), **where)
    if isinstance(exc, Forbidden):
        return TargetGone(str(exc), **where)
    if isinstance(exc, BadRequest):  # before NetworkError, its base
        if any(d in exc.message.lower() for d in GONE_DESCRIPTIONS):
            return TargetGone(str(exc), **where)
        return Rejected(str(exc), **where)
    if isinstance(exc, TimedOut) and may_have_arrived(exc):
        return OutcomeUnknown(f"{type(exc).__name__}: {exc} (it may have arrived)", **where)
    if isinstance(exc, NetworkError) and not isinstance(exc, TimedOut) and answer_lost(exc):
        # the request was written and the connection cut while waiting for the answer:
        # Telegram may have sent the message (a resend is flagged "possibly twice")
        return OutcomeUnknown(
            f"{type(exc).__name__}: {exc} (the answer was cut: it may have arrived)", **where
        )
    if isinstance(exc, TimedOut | NetworkError):  # connecting failed: it never left
        return TransientError(f"{type(exc).__name__}: {exc}", **where)
    return Rejected(f"{type(exc).__name__}: {exc}", **where)


def may_have_arrived(exc: TimedOut) -> bool:
    """False for a timeout before the request left (connecting, or waiting for a pooled
    connection); True for a read or write timeout, which Telegram may have acted on."""
    return not (
        isinstance(
            exc.__cause__,
            httpx.ConnectTimeout | httpx.PoolTimeout | aiohttp.ConnectionTimeoutError,
        )
        or "pool timeout" in exc.message.lower()
    )
