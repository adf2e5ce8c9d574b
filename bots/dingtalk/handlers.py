"""The app robot's answers: a message turned into a core Request, its Reply into markdown (or
an ActionCard whose buttons send the commands they name, as a reader would type them).

DingTalk delivers group messages to a robot only when it is @-mentioned; a private chat's
target is the reader's staff id (one-to-one messages), a group's its openConversationId.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.workchat.app.handlers import AppHandlers
from digest_core.port import Message, Reply
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
    PRIVATE_ONLY = "请私信机器人发送 /{name}。\nTo {name}, send /{name} to the robot privately."
    #: DingTalk has no callback buttons
    TYPED_CONFIRMATION = True

    def _drawn(self, reply: Reply, *, private: bool) -> list[Message]:
        """The reply's messages, the last an ActionCard of its choices (and, in a private
        chat, its issue buttons)."""
        messages = list(reply.messages)
        actions = choice_buttons(reply, navigation=private)
        if actions and messages:
            messages[-1] = dingtalk_render.action_card(messages[-1], actions)
        return messages
