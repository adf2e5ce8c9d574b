"""What the app bots' handlers share (Feishu's, DingTalk's): a text message read as a command
(in a group only when it @-mentions the bot), the per-user command limit (admins exempt), a
command answered through the core (a broken one answered with an apology, never taking the
bot down), and replies sent through the adapter (a failed one logged). What a platform's
requests, buttons and cards are is its own handlers' business.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from bots.workchat.app.bot import AppBot
from digest_core.port import (
    ADMIN,
    PRIVATE_COMMANDS,
    DeliveryError,
    Message,
    Reply,
    Request,
    Status,
    TargetKind,
    UserRateLimiter,
    Verdict,
    parse_command_line,
)

if TYPE_CHECKING:
    from digest_core.port import Port

HELP_HINT = "发送 /help 查看全部命令。\nSend /help to see what I can do."
FAILED = "出错了，请稍后再试。/ Something went wrong; please try again later."


@dataclass(frozen=True)
class TextMessage:
    """A text message to the app bot, as its platform's receiver reads it."""

    message_id: str
    #: the group chat it was sent in (Feishu's chat_id, DingTalk's openConversationId)
    chat: str
    private: bool
    #: the sender's id, their private chat's target (Feishu's open_id, DingTalk's staff id)
    sender: str
    #: the text (Feishu's without the mentions' ``@_user_N`` keys)
    text: str
    #: the message @-mentions the bot
    mentioned: bool


class AppHandlers:
    """The handlers of one running app bot: ``adapter``'s, answering through ``port`` (a
    platform's handlers declare their own adapter's type)."""

    adapter: AppBot
    #: the platform has no buttons to confirm with: an admin confirms by sending the command
    #: again with its answer typed (the console's way), so an admin's request is confirmed
    TYPED_CONFIRMATION: ClassVar[bool] = False
    #: the answer to a private command sent in a group
    PRIVATE_ONLY: ClassVar[str] = (
        "请私信机器人发送 /{name}。\nTo {name}, send /{name} to the bot in a private chat."
    )

    def __init__(self, adapter: AppBot, port: Port) -> None:
        self.adapter = adapter
        self.port = port
        self.limiter = UserRateLimiter.of(adapter.settings, port.clock)
        # the platform's handlers module names the log lines
        self._log = logging.getLogger(type(self).__module__)

    async def _allowed(self, user: str, where: tuple[str, TargetKind]) -> bool:
        """Whether ``user`` may run a command now (admins always); the first refusal in a
        window tells them, in ``where``, to slow down."""
        if user in self.adapter.admins:
            return True
        verdict = self.limiter.check(user)
        if verdict is Verdict.WARN:
            await self._send(*where, self.adapter.flavor.notice(self.limiter.slow_down()))
        return verdict is Verdict.ALLOW

    async def _handle(self, request: Request) -> Reply:
        try:
            return await self.port.handle(request)
        except Exception:  # a broken command must not take the bot down
            self._log.exception("%s: /%s failed", self.adapter.name, request.command)
            return Reply(self.adapter.flavor.notice(FAILED), status=Status.ERROR)

    async def _send(self, chat: str, kind: TargetKind, messages: Sequence[Message]) -> None:
        try:
            await self.adapter.reply(chat, kind, messages)
        except DeliveryError as exc:
            self._log.warning("%s: reply to %s not sent: %s", self.adapter.name, chat, exc)

    # ------------------------------------------------------------ messages

    async def on_message(self, message: TextMessage) -> None:
        await self.adapter.in_flight.run(
            f"{self.adapter.name} message {message.message_id}",
            lambda: self._on_message(message),
            apologise=lambda: self.adapter.tell_restarting(*self._where(message)),
        )

    @staticmethod
    def _where(message: TextMessage) -> tuple[str, TargetKind]:
        if message.private:
            return message.sender, TargetKind.PRIVATE
        return message.chat, TargetKind.GROUP

    async def _on_message(self, message: TextMessage) -> None:
        if not message.private and not message.mentioned:
            return  # not addressed to us (groups deliver only @-mentions to the bot anyway)
        where = self._where(message)
        user = message.sender
        parsed = parse_command_line(message.text)
        if parsed is None:
            if message.private and await self._allowed(user, where):
                await self._send(*where, self.adapter.flavor.notice(HELP_HINT))
            return
        name, args = parsed
        if not message.private and name not in self.port.command_names:
            return
        if not await self._allowed(user, where):
            return
        if name in PRIVATE_COMMANDS and not message.private:
            text = self.PRIVATE_ONLY.format(name=name)
            await self._send(*where, self.adapter.flavor.notice(text))
            return
        reply = await self._handle(self._request(name, args, user, where[0]))
        messages = self._drawn(reply, private=message.private)
        if reply.private and not message.private and reply.status is not Status.REFUSED:
            await self._send(user, TargetKind.PRIVATE, messages)
        else:
            await self._send(*where, messages)

    def _request(self, name: str, args: tuple[str, ...], user: str, chat: str) -> Request:
        """``/name args`` as ``user`` sends it in ``chat`` (an admin's with the admin's
        capabilities, taken as confirmed where :attr:`TYPED_CONFIRMATION`)."""
        admin = user in self.adapter.admins
        return Request(
            name,
            args,
            platform=self.adapter.name,
            flavor=self.adapter.flavor,
            user=user,
            chat=chat,
            capabilities=ADMIN if admin else frozenset(),
            confirmed=admin and self.TYPED_CONFIRMATION,
        )

    def _drawn(self, reply: Reply, *, private: bool) -> list[Message]:
        """The reply's messages with the platform's buttons (``private``: in a private chat)."""
        raise NotImplementedError
