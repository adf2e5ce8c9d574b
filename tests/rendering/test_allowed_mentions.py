"""One definition of "ping nobody": the Discord renderer's ALLOWED_MENTIONS, which the bot's
discord.py objects and its raw posts follow."""

from __future__ import annotations

from bots.discord.views import message_kwargs, no_mentions
from digest_core.rendering.discord import ALLOWED_MENTIONS, notice


def test_discord_py_form_is_the_renderer_constant() -> None:
    assert ALLOWED_MENTIONS == {"parse": []}
    assert no_mentions().to_dict() == ALLOWED_MENTIONS


def test_notices_and_view_replies_carry_it() -> None:
    messages = notice("hi @everyone\n" * 200)
    assert len(messages) > 1
    for message in messages:
        assert message.payload["allowed_mentions"] == ALLOWED_MENTIONS
        # a copy: a caller changing one payload cannot change the constant
        assert message.payload["allowed_mentions"] is not ALLOWED_MENTIONS
        assert message_kwargs(message)["allowed_mentions"].to_dict() == ALLOWED_MENTIONS
