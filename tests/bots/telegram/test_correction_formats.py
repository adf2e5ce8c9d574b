"""Corrections of private chats that got another format than the channels (the platform's
compact subscriber format, or a reader's own), end to end: the real service and PTB against
the double."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from digest_core.rendering import Part, render
from digest_core.rendering import telegram as tg_render
from tests.bots.telegram.harness import (
    ANN,
    BOB,
    CHANNEL,
    TODAY,
    Running,
    bot_with,
)
from tests.fakes.telegram_api import FakeTelegram, SentMessage

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BY_NAME = -1009999  # the channel configured as @ai_digest
CHANNELS = (CHANNEL, BY_NAME)
#: a brief's title: in the channels' second message and in the compact message
TITLE = "梯度累积与学习率：换了累积步数，别忘了重调预热"
NEW_TITLE = "梯度累积与学习率：改了累积步数，记得重调预热"
#: only in the full issue's first message (the headline's body)
FULL_ONLY = "大语言模型按自回归方式生成文本"
MARK = "已更正 / corrected 09:00"


@pytest.fixture
async def compact_bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    async with bot_with(fake, tmp_path, monkeypatch, subscriber_format="compact") as running:
        yield running


def _rendered(bot: Running, part: Part, *, mark: str | None = None) -> list[str]:
    """The HTML of the issue's messages in format ``part`` (with a correction ``mark``)."""
    issue = bot.service.archive.on(TODAY)
    messages = render(issue, tg_render, part, options=bot.adapter.post_options)
    if mark is not None:
        messages = [bot.adapter.corrected(m, mark) for m in messages]
    return [str(m.payload["text"]) for m in messages]


def _dms(fake: FakeTelegram, reader: int) -> list[SentMessage]:
    """The day's messages to ``reader`` (after their /subscribe answer)."""
    return fake.sent(reader)[1:]


def _edits(fake: FakeTelegram) -> int:
    return len([r for r in fake.requests if r.method.lower() == "editmessagetext"])


async def _correct_and_check(bot: Running, fake: FakeTelegram, formats: dict[int, Part]) -> None:
    """Post the day, change one brief's title, correct; every chat shows the new revision in
    the format it got, only changed messages edited, nothing sent; a second run is idle."""
    [report] = await bot.service.post(TODAY)
    assert report.ok
    compact_before = {r: _dms(fake, r) for r, p in formats.items() if p is Part.TOC}
    for reader, part in formats.items():  # as posted: each reader in their format
        assert [m.html for m in _dms(fake, reader)] == _rendered(bot, part)
    channel_parts = len(fake.sent(CHANNEL))
    assert channel_parts == 2
    sends = len(fake.sent())
    bot.rewrite_issue(TITLE, NEW_TITLE)

    [done] = await bot.service.correct(TODAY)

    assert done.ok and done.added == 0 and done.removed == 0
    assert len(fake.sent()) == sends  # nothing new was sent anywhere
    for chat in CHANNELS:
        first, second = fake.sent(chat)
        assert first.edits == []  # the headline did not change
        assert len(second.edits) == 1 and NEW_TITLE in second.text and MARK in second.text
    for reader, part in formats.items():
        dms = _dms(fake, reader)
        new = _rendered(bot, part)
        assert len(dms) == len(new)  # no part of another format was sent to them
        if part is Part.TOC:
            [dm] = dms
            assert dm.message_id == compact_before[reader][0].message_id
            assert len(dm.edits) == 1  # edited once, in place
            assert NEW_TITLE in dm.text and MARK in dm.text and FULL_ONLY not in dm.text
            assert dm.html == _rendered(bot, part, mark=MARK)[0]
            assert dm.reply_markup is not None  # the section buttons stay
        else:  # the headline alone: the brief is not in it, nothing to edit
            assert all(m.edits == [] and MARK not in m.text for m in dms)
            assert [m.html for m in dms] == new
    changed = 2 + sum(1 for p in formats.values() if p is Part.TOC)
    assert done.edited == changed
    edits = _edits(fake)

    [again] = await bot.service.correct(TODAY)

    assert again.ok and again.changed == 0
    assert _edits(fake) == edits and len(fake.sent()) == sends
    # a post of the corrected issue finds every chat served
    [post] = await bot.service.post(TODAY)
    assert post.sent == 0 and len(fake.sent()) == sends


async def test_compact_subscribers_are_corrected_in_their_format(
    compact_bot: Running, fake: FakeTelegram
) -> None:
    # ANN takes the platform's subscriber format (compact); BOB chose the headline alone
    await compact_bot.command("/subscribe")
    await compact_bot.command("/subscribe headline", user=BOB)

    await _correct_and_check(compact_bot, fake, {ANN: Part.TOC, BOB: Part.HEADLINE})


async def test_readers_own_formats_are_corrected_in_their_format(
    bot: Running, fake: FakeTelegram
) -> None:
    # the platform's subscriber format is the full issue; each reader chose another
    await bot.command("/subscribe compact")
    await bot.command("/subscribe headline", user=BOB)

    await _correct_and_check(bot, fake, {ANN: Part.TOC, BOB: Part.HEADLINE})
