"""The app robot's answers: a message turned into a core Request, its Reply into markdown (or
an ActionCard whose buttons send the commands they name, as a reader would type them).

DingTalk delivers group messages to a robot only when it is @-mentioned; a private chat's
target is the reader's staff id (one-to-one messages), a group's its openConversationId.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.dingtalk.receiving import RobotMessage
from bots.workchat.app.handlers import HELP_HINT, AppHandlers
from digest_core.port import (
    ADMIN,
    PRIVATE_COMMANDS,
    Reply,
    Request,
    Status,
    TargetKind,
    parse_command_line,
)
from digest_core.rendering import dingtalk as dingtalk_render

if TYPE_CHECKING:
    from bots.dingtalk.app import DingTalkAppAdapter


def choice_buttons(reply: Reply, *, navigation: bool = False) -> list[tuple[str, str]]:
    """A reply's choices (``/settings``) as ActionCard buttons sending their commands; with
    ``navigation`` (a private chat, where the sent command is the reader's own) its issue
    buttons after them (previous/next issue, ``/brief N DATE``; the ActionCard keeps the
    first :attr:`~digest_core.rendering.dingtalk.Limits.actions_per_card`)."""
    rows = (*reply.choices, *(reply.navigation if navigation else ()))
    return [(c.label, "/" + c.data.split(":", 1)[1]) for row in rows for c in row]


class DingTalkHandlers(AppHandlers):
    """Commands of one running app robot."""

    adapter: DingTalkAppAdapter

    async def on_message(self, message: RobotMessage) -> None:
        where = self._where(message)
        await self.adapter.in_flight.run(
            f"dingtalk message {message.message_id}",
            lambda: self._on_message(message),
            apologise=lambda: self.adapter.tell_restarting(*where),
        )

    @staticmethod
    def _where(message: RobotMessage) -> tuple[str, TargetKind]:
        if message.private:
            return message.sender, TargetKind.PRIVATE
        return message.conversation, TargetKind.GROUP

    async def _on_message(self, message: RobotMessage) -> None:
        if not message.private and not message.mentioned:
            return
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
            text = f"请私信机器人发送 /{name}。\nTo {name}, send /{name} to the robot privately."
            await self._send(*where, self.adapter.flavor.notice(text))
            return
        admin = user in self.adapter.admins
        request = Request(
            name,
            args,
            platform=self.adapter.name,
            flavor=self.adapter.flavor,
            user=user,
            chat=where[0],
            capabilities=ADMIN if admin else frozenset(),
            # DingTalk has no callback buttons: an admin confirms by sending the command again
            # with its answer typed (the console's way), so a request is taken as confirmed
            confirmed=admin,
        )
        reply = await self._handle(request)
        messages = list(reply.messages)
        actions = choice_buttons(reply, navigation=message.private)
        if actions and messages:
            messages[-1] = dingtalk_render.action_card(messages[-1], actions)
        if reply.private and not message.private and reply.status is not Status.REFUSED:
            await self._send(user, TargetKind.PRIVATE, messages)
        else:
            await self._send(*where, messages)
