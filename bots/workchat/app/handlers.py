"""What the app bots' handlers share (Feishu's, DingTalk's): the per-user command limit
(admins exempt), a command answered through the core (a broken one answered with an
apology, never taking the bot down), and replies sent through the adapter (a failed one
logged). What a platform's messages, buttons and cards are is its own handlers' business.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bots.workchat.app.bot import AppBot
from digest_core.port import (
    DeliveryError,
    Message,
    Reply,
    Request,
    Status,
    TargetKind,
    UserRateLimiter,
    Verdict,
)

if TYPE_CHECKING:
    from digest_core.port import Port

HELP_HINT = "发送 /help 查看全部命令。\nSend /help to see what I can do."
FAILED = "出错了，请稍后再试。/ Something went wrong; please try again later."


class AppHandlers:
    """The handlers of one running app bot: ``adapter``'s, answering through ``port`` (a
    platform's handlers declare their own adapter's type)."""

    adapter: AppBot

    def __init__(self, adapter: AppBot, port: Port) -> None:
        self.adapter = adapter
        self.port = port
        s = adapter.settings
        self.limiter = UserRateLimiter(
            burst=s.command_burst, window=s.command_window_seconds, clock=port.clock
        )
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
