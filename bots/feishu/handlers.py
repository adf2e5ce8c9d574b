"""The app bot's answers: a message, a card press or a menu choice turned into core Requests,
and their Replies into cards (buttons as in Telegram's inline keyboards).

What is Feishu's is decided here: a group message counts when it @-mentions the bot; a private
chat's target is the reader's open_id (``ou_…``), a group's its chat id (``oc_…``); a section
button's answer goes to the presser privately (Feishu lets an app's bot write to anyone within
its availability, so no "start the bot first" step), and the press shows a toast. An issue's
reply also gets its issue buttons (:attr:`Reply.navigation`: previous/next issue, one per
brief), as many as the card's limits leave room for.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from bots.feishu.receiving import CardPress, MenuChoice, Receivers
from bots.workchat.app.handlers import AppHandlers
from digest_core.port import (
    Action,
    Choice,
    DeliveryError,
    Message,
    Reply,
    Section,
    Status,
    TargetGone,
    TargetKind,
    Verdict,
    parse_action_data,
    parse_button_data,
    parse_choice,
    plain_renderer,
    preview,
    spec,
)
from digest_core.rendering import feishu as feishu_render

if TYPE_CHECKING:
    from bots.feishu.app import FeishuAppAdapter

    pass

log = logging.getLogger(__name__)

SENT_PRIVATELY = "已私信发送 / sent to you in private"


def menu_command(key: str) -> str | None:
    """The command a bot-menu item runs: its event_key names a listed command of the
    catalogue that needs no argument (``today``, ``headline``, …), else None."""
    try:
        declared = spec(key)
    except KeyError:
        return None
    if not declared.menu or any(a.required for a in declared.args):
        return None
    return declared.name


def with_choices(messages: Sequence[Message], rows: Sequence[Sequence[Choice]]) -> list[Message]:
    """``messages`` with the reply's choice buttons on the last card."""
    out = list(messages)
    if out and rows:
        out[-1] = feishu_render.with_buttons(
            out[-1], [[(c.label, c.data) for c in r] for r in rows]
        )
    return out


def with_reply_buttons(reply: Reply) -> list[Message]:
    """``reply``'s messages with its choices, then its issue buttons (previous/next issue,
    one per brief), on the last card: as many of the issue buttons as the card's limits
    leave room for (the last ones are dropped first; the choices always stay)."""
    rows = [list(r) for r in (*reply.choices, *reply.navigation) if r]
    keep = len(reply.choices)
    while True:
        try:
            return with_choices(reply.messages, [r for r in rows if r])
        except ValueError:
            if len(rows) <= keep or not any(rows[keep:]):
                raise
            last = max(i for i in range(keep, len(rows)) if rows[i])
            rows[last].pop()


class FeishuHandlers(AppHandlers):
    """Commands, buttons and menu choices of one running app bot."""

    adapter: FeishuAppAdapter

    @property
    def receivers(self) -> Receivers:
        """The coroutines the receiver hands events to (once the bot's open_id is known)."""
        return Receivers(
            message=self.on_message,
            press=self.on_press,
            menu=self.on_menu,
            bot_open_id=self.adapter.bot_open_id,
        )

    # ------------------------------------------------------------ messages

    def _drawn(self, reply: Reply, *, private: bool) -> list[Message]:
        """The reply's messages with its buttons: a confirmation's, or its choices."""
        if reply.confirm is not None:
            prompt = self.port.confirmations.prompt(
                reply, limit=feishu_render.CardLimits.button_data_maxlen
            )
            messages = list(prompt.messages)
            if prompt.buttons and messages:
                row = [(b.label, b.data) for b in prompt.buttons]
                messages[-1] = feishu_render.with_buttons(messages[-1], [row])
            return messages
        return with_reply_buttons(reply)

    # ------------------------------------------------------------ buttons and menu

    async def on_press(self, press: CardPress) -> str | None:
        """A card button: the toast to show (the answer itself comes as messages)."""
        return await self.adapter.in_flight.run(
            f"feishu press {press.message_id}",
            lambda: self._on_press(press),
            apologise=lambda: self.adapter.tell_restarting(press.operator, TargetKind.PRIVATE),
        )

    async def _on_press(self, press: CardPress) -> str | None:
        data, user = press.data, press.operator
        if self.port.confirmations.is_ours(data):
            return await self._on_confirm(press)
        if user not in self.adapter.admins:
            verdict = self.limiter.check(user)
            if verdict is not Verdict.ALLOW:
                return self.limiter.slow_down() if verdict is Verdict.WARN else None
        action = parse_action_data(data)
        if action is not None:
            return await self._on_action(user, *action)
        choice = parse_choice(data)
        if choice is not None:
            reply = await self._handle(self._request(*choice, user, user))
            await self._send(user, TargetKind.PRIVATE, with_reply_buttons(reply))
            return "✓" if reply.status is Status.OK else None
        parsed = parse_button_data(data)
        if parsed is None:
            return None  # not ours (or from an older version)
        return await self._on_section(user, *parsed)

    async def _on_section(self, user: str, date: dt.date, section: Section) -> str | None:
        request = self._request(section.value, (), user, user)
        reply = await self.port.section(request, date, section)
        if reply.status is Status.NOT_FOUND:
            return str(reply.extra.get("problem", ""))[:200] or None
        try:
            await self.adapter.reply(user, TargetKind.PRIVATE, with_reply_buttons(reply))
        except TargetGone:
            return "无法私信你：请联系管理员把你加入应用的可用范围。/ The bot cannot message you."
        except DeliveryError as exc:
            log.warning("feishu: section %s for %s failed: %s", section, user, exc)
            return "发送失败，请稍后再试。/ Could not send; try again later."
        return f"{section.label}：{SENT_PRIVATELY}"

    async def _on_action(self, user: str, command: str, args: tuple[str, ...]) -> str | None:
        request = replace(self._request(command, args, user, user), confirmed=True)
        if user not in self.adapter.admins:
            plain = plain_renderer()
            refused = await self._handle(replace(request, flavor=plain))
            return preview(refused.messages[0], plain)[:200] if refused.messages else None
        reply = await self._handle(request)
        await self._send(user, TargetKind.PRIVATE, reply.messages)
        return "✓"

    async def _on_confirm(self, press: CardPress) -> str | None:
        """A confirmation button (on a prompt sent to an admin privately): the core decides;
        the outcome goes to the presser's private chat, the decision's text to the toast."""
        user = press.operator
        by = self._request("", (), user, user)
        confirmations = self.port.confirmations
        prompt = (press.chat_id, press.message_id)
        async with confirmations.press(press.data, by=by, prompt=prompt) as d:
            if d.action is Action.IGNORE:
                return None
            if d.action is Action.RUN:
                reply = await confirmations.run(d)
                await self._send(user, TargetKind.PRIVATE, reply.messages)
            return d.text or d.note or None

    async def on_menu(self, choice: MenuChoice) -> None:
        """A bot-menu item: the command its event_key names, answered privately."""
        name = menu_command(choice.key)
        user = choice.operator
        if name is None:
            log.info("feishu: a menu item with event_key %r names no command", choice.key[:30])
            return

        async def run() -> None:
            if not await self._allowed(user, (user, TargetKind.PRIVATE)):
                return
            reply = await self._handle(self._request(name, (), user, user))
            await self._send(user, TargetKind.PRIVATE, self._drawn(reply, private=True))

        await self.adapter.in_flight.run(
            f"feishu menu {name}",
            run,
            apologise=lambda: self.adapter.tell_restarting(user, TargetKind.PRIVATE),
        )


__all__ = ["FeishuHandlers", "menu_command", "with_choices", "with_reply_buttons"]
