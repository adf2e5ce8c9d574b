"""Telegram's `digest-bot doctor` checks: token, rights in each channel, topics, webhook, clock.

Plain Bot API calls (getMe, getChat, getChatMember, getWebhookInfo) over httpx, so the
``Date`` header can be read; nothing is sent to any chat. A forum topic is checked with
``sendChatAction`` in it (the Bot API has no call that reads a topic): members see the bot
"typing" there for a few seconds, and no message.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import httpx

from bots.doctor import TIMEOUT_SECONDS, Check, Status, clock_check, fail, ok, warn
from bots.network import tls_context
from bots.telegram.menus import RedactToken, sdk_loggers
from bots.telegram.settings import TelegramSettings
from bots.telegram.wire import chat_id, topic_of

log = logging.getLogger(__name__)

AREA = "telegram"
#: the fix for a token Telegram refuses
TOKEN_FIX = (
    "copy the token from @BotFather (/mybots, API Token) into DIGEST_BOT_TELEGRAM__TOKEN "
    "or telegram.token_file"
)


class _Api:
    """Bot API calls answering (ok, result or description, HTTP status)."""

    def __init__(self, client: httpx.AsyncClient, base: str) -> None:
        self.client = client
        self.base = base
        self.last_date: str | None = None

    async def call(self, method: str, **params: Any) -> tuple[bool, Any, int]:
        response = await self.client.post(f"{self.base}/{method}", json=params)
        self.last_date = response.headers.get("Date")
        try:
            body = response.json()
        except ValueError:
            return (
                False,
                f"HTTP {response.status_code} (not a Bot API answer)",
                response.status_code,
            )
        if body.get("ok"):
            return True, body.get("result"), response.status_code
        return False, str(body.get("description") or response.status_code), response.status_code


async def checks(settings: TelegramSettings, *, now: Callable[[], dt.datetime]) -> list[Check]:
    """Telegram's lines of the doctor's table; none when no token is configured."""
    token = settings.resolved_token()
    if token is None:
        return []
    base = settings.api_base_url + token.get_secret_value()
    # httpx logs each request's URL, and a Bot API URL holds the token
    redactor = RedactToken(token)
    loggers = sdk_loggers()
    for logger in loggers:
        logger.addFilter(redactor)
    try:
        return await _checks(settings, base, now)
    finally:
        for logger in loggers:
            logger.removeFilter(redactor)


async def _checks(
    settings: TelegramSettings, base: str, now: Callable[[], dt.datetime]
) -> list[Check]:
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, verify=tls_context()) as client:
        api = _Api(client, base)
        sent = now()
        good, me, status = await api.call("getMe")
        received = now()
        if not good:
            if status in (401, 404):
                return [fail(AREA, "token", f"Telegram refuses the token ({me})", TOKEN_FIX)]
            return [fail(AREA, "token", f"getMe failed: {me}", "check telegram.api_base_url")]
        out = [ok(AREA, "token", f"@{me['username']} (id {me['id']})")]
        out.append(clock_check(AREA, api.last_date, sent=sent, received=received))
        if not settings.channels:
            out.append(
                warn(
                    AREA,
                    "channels",
                    "no channels: only subscribers get the daily issue",
                    "list the channels in telegram.channels",
                )
            )
        for channel in settings.channels:
            rights, chat = await _channel_check(api, channel, int(me["id"]), str(me["username"]))
            out.append(rights)
            topic = topic_of(channel)
            if topic is not None and chat is not None:
                out.append(await _topic_check(api, channel, topic, chat))
        out.append(await _webhook_check(api, settings))
    return out


async def _channel_check(
    api: _Api, channel: str, bot_id: int, username: str
) -> tuple[Check, dict[str, Any] | None]:
    """Whether the bot may post in ``channel`` (the chat of a topic's entry): getChat, then
    its own getChatMember; and the chat, when the bot may."""
    good, chat, _ = await api.call("getChat", chat_id=chat_id(channel))
    if not good:
        return fail(
            AREA,
            f"rights {channel}",
            f"getChat: {chat}",
            f"add @{username} to the chat (an administrator of a channel), or fix the id",
        ), None
    check = await _rights_check(api, channel, chat, bot_id, username)
    return check, (chat if check.status is not Status.FAIL else None)


async def _rights_check(
    api: _Api, channel: str, chat: dict[str, Any], bot_id: int, username: str
) -> Check:
    """The bot's rights in ``chat`` (getChatMember)."""
    name = f"rights {channel}"
    kind = chat.get("type")
    title = chat.get("title") or chat.get("first_name") or channel
    if kind == "private":
        return ok(AREA, name, f"private chat with {title}")
    good, member, _ = await api.call("getChatMember", chat_id=chat_id(channel), user_id=bot_id)
    if not good:
        return fail(AREA, name, f"getChatMember: {member}", f"add @{username} to {title!r}")
    status = member.get("status")
    if status in ("left", "kicked"):
        return fail(
            AREA,
            name,
            f"the bot is not in {kind} {title!r} (status {status!r})",
            f"add @{username} to it again",
        )
    if kind == "channel":
        if status == "creator" or (status == "administrator" and member.get("can_post_messages")):
            return ok(AREA, name, f"may post in channel {title!r}")
        why = "an administrator without Post Messages" if status == "administrator" else status
        return fail(
            AREA,
            name,
            f"cannot post in channel {title!r}: the bot is {why}",
            f"channel settings → Administrators → @{username}: allow Post Messages",
        )
    if status == "restricted" and not member.get("can_send_messages"):
        return fail(
            AREA,
            name,
            f"cannot post in {kind} {title!r}: the bot is restricted from sending messages",
            f"group settings → Permissions → Exceptions → @{username}: allow Send Messages",
        )
    return ok(AREA, name, f"may post in {kind} {title!r} ({status})")


async def _topic_check(api: _Api, channel: str, topic: int, chat: dict[str, Any]) -> Check:
    """Whether forum topic ``topic`` of ``chat`` exists and is open (sendChatAction in it:
    "typing" for a few seconds, no message)."""
    name = f"topic {channel}"
    title = chat.get("title") or channel
    if not chat.get("is_forum"):
        return fail(
            AREA,
            name,
            f"{title!r} has no topics (not a forum supergroup)",
            "turn Topics on in the group's settings, or list the chat without ':topic'",
        )
    good, answer, _ = await api.call(
        "sendChatAction", chat_id=chat_id(channel), action="typing", message_thread_id=topic
    )
    if good:
        return ok(AREA, name, f"topic {topic} of {title!r} is open")
    detail = str(answer)
    if "TOPIC_CLOSED" in detail.upper():
        return fail(
            AREA,
            name,
            f"topic {topic} of {title!r} is closed: posts there are refused",
            "reopen the topic (its menu → Reopen), then /reactivate the target if it was "
            "deactivated",
        )
    if "not found" in detail.lower() or "TOPIC_DELETED" in detail.upper():
        return fail(
            AREA,
            name,
            f"{title!r} has no topic {topic} ({detail})",
            "open the topic in Telegram and copy its link (…/c/<chat>/<topic>): the number "
            "after the chat is its thread id",
        )
    return fail(AREA, name, f"sendChatAction in topic {topic}: {detail}", "check the topic id")


async def _webhook_check(api: _Api, settings: TelegramSettings) -> Check:
    good, info, _ = await api.call("getWebhookInfo")
    if not good:
        return warn(AREA, "webhook", f"getWebhookInfo: {info}", "none needed for polling")
    url = info.get("url") or ""
    error = info.get("last_error_message")
    pending = int(info.get("pending_update_count") or 0)
    if settings.mode == "polling":
        if url:
            return warn(
                AREA,
                "webhook",
                f"a webhook is set ({url}); polling deletes it at start",
                'if another instance serves it, stop it or set mode = "webhook" here too',
            )
        return ok(AREA, "webhook", f"none set (polling; {pending} updates waiting)")
    if error:
        return fail(
            AREA,
            "webhook",
            f"Telegram cannot deliver to {url or settings.webhook_url}: {error}",
            f"make {settings.webhook_url} reach {settings.webhook_listen}:"
            f"{settings.webhook_port} (proxy, TLS certificate, firewall)",
        )
    if url != settings.webhook_url:
        return warn(
            AREA,
            "webhook",
            f"set to {url or 'nothing'}, not {settings.webhook_url}",
            "none: digest-bot run sets it at start",
        )
    return ok(AREA, "webhook", f"{url} ({pending} updates waiting)")
