"""Corrections edited in place and pins, end to end: the real service and PTB against the double."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from digest_core.loading import load_issue
from digest_core.rendering import Part, render
from digest_core.rendering import telegram as tg_render
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    BOB,
    CHANNEL,
    TODAY,
    Running,
    bot_with,
)
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BY_NAME = -1009999  # the channel configured as @ai_digest
#: every chat the day's post reaches: two channels and a subscriber
CHATS = (CHANNEL, BY_NAME, ANN)
BRIEF = "单根“针”的检索测试已经很难拉开模型差距。"
MARK = "已更正 / corrected 09:00"


@pytest.fixture
async def bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    async with bot_with(fake, tmp_path, monkeypatch) as running:
        yield running


def _parts(bot: Running) -> int:
    issue = load_issue(bot.issue_file(), date=TODAY)
    return len(render(issue, tg_render, Part.ALL, options=bot.adapter.post_options))


async def _posted(bot: Running) -> None:
    await bot.service.ledger.subscribe("telegram", str(ANN))
    [report] = await bot.service.post(TODAY)
    assert report.ok and report.sent == 2 * len(CHATS)


def _edits(fake: FakeTelegram) -> int:
    return len([r for r in fake.requests if r.method.lower() == "editmessagetext"])


async def test_a_changed_brief_edits_only_its_messages_and_a_second_run_is_idle(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    before = {chat: [(m.message_id, m.html) for m in fake.sent(chat)] for chat in CHATS}
    sends = len(fake.sent())
    bot.rewrite_issue(BRIEF, "单根“针”的检索测试已经无法拉开模型之间的差距。")

    [report] = await bot.service.correct(TODAY)

    assert (report.edited, report.added, report.removed, report.unchanged) == (3, 0, 0, 3)
    assert len(fake.sent()) == sends  # nothing new was sent
    for chat in CHATS:
        first, second = fake.sent(chat)
        assert (first.message_id, first.html) == before[chat][0]  # never touched
        assert first.edits == []
        assert second.message_id == before[chat][1][0]
        assert len(second.edits) == 1
        assert "已经无法拉开模型之间的差距" in second.text and MARK in second.text
        assert second.reply_markup is not None  # the keyboard stays on the last message
    edits = _edits(fake)

    [again] = await bot.service.correct(TODAY)

    assert again.changed == 0 and again.ok
    assert _edits(fake) == edits and len(fake.sent()) == sends
    # a post of the corrected issue now finds every chat served
    [post] = await bot.service.post(TODAY)
    assert post.sent == 0 and len(fake.sent()) == sends


async def test_a_correction_that_adds_a_part_sends_it_after_the_last(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    # more briefs push the issue to a third message
    extra = "".join(
        f"新增简讯 {n}：补充说明\n{'这是一段用来把日报撑长的补充说明文字。' * 12}\n"
        f"https://example.org/more/{n}\n"
        for n in range(1, 7)
    )
    bot.rewrite_issue("经典回顾\n", f"{extra}经典回顾\n")
    assert _parts(bot) == 3

    [report] = await bot.service.correct(TODAY)

    assert report.added == len(CHATS) and report.removed == 0 and report.ok
    for chat in CHATS:
        sent = fake.sent(chat)
        assert len(sent) == 3
        first, second, third = sent
        assert first.edits == []  # the headline did not change
        assert len(second.edits) == 1 and second.reply_markup is None  # keyboard moved on
        assert third.reply_markup is not None and "新增简讯" in second.text + third.text
    edits, sends = _edits(fake), len(fake.sent())
    [again] = await bot.service.correct(TODAY)
    assert again.changed == 0 and (_edits(fake), len(fake.sent())) == (edits, sends)


async def test_a_correction_that_removes_a_part_deletes_it_or_leaves_a_note(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    fake.chats[BY_NAME].can_delete = False  # as for a channel post older than 48 hours
    text = bot.issue_file().read_text(encoding="utf-8")
    lines = text.split("\n")
    # the headline keeps its first paragraph only: the issue fits one message
    start = lines.index("重点") + 2
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("https://"))
    bot.issue_file().write_text("\n".join(lines[: start + 1] + lines[end:]), encoding="utf-8")
    bot.service.archive.refresh(full=True)
    assert _parts(bot) == 1

    [report] = await bot.service.correct(TODAY)

    assert report.removed == len(CHATS) and report.edited == len(CHATS) and report.ok
    for chat in (CHANNEL, ANN):
        first, second = fake.sent(chat)
        assert second.deleted and not first.deleted
        assert first.reply_markup is not None and MARK in first.text
    first, second = fake.sent(BY_NAME)
    assert not second.deleted and "removed by a correction" in second.text
    edits = _edits(fake)
    [again] = await bot.service.correct(TODAY)
    assert again.changed == 0 and _edits(fake) == edits


async def test_the_double_refuses_unknown_and_identical_edits(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    sent = fake.sent(CHANNEL)[0]
    api = bot.adapter.bot
    with pytest.raises(Exception, match=r"(?i)message to edit not found"):
        await api.edit_message_text("x", chat_id=CHANNEL, message_id=9999)
    with pytest.raises(Exception, match=r"(?i)message is not modified"):
        await api.edit_message_text(
            sent.html,
            chat_id=CHANNEL,
            message_id=sent.message_id,
            parse_mode="HTML",
            reply_markup=None,
        )


async def test_a_message_deleted_by_an_admin_is_left_alone(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    await bot.adapter.bot.delete_message(CHANNEL, fake.sent(CHANNEL)[1].message_id)
    bot.rewrite_issue(BRIEF, "改过的一句。")
    [report] = await bot.service.correct(TODAY)
    assert report.gone == 1 and report.edited == len(CHATS) - 1 and report.ok
    [again] = await bot.service.correct(TODAY)
    assert again.changed == 0 and again.gone == 0


async def test_an_admin_corrects_with_a_command_and_a_reader_is_refused(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    bot.rewrite_issue(BRIEF, "改过的一句。")
    [refused] = await bot.command(f"/correct {TODAY}", user=BOB)
    assert "admins only" in refused.text and _edits(fake) == 0

    [reply] = await bot.command(f"/correct {TODAY}", user=ADMIN, timeout=10)

    assert "edited 3" in reply.text and _edits(fake) == 3
    entries = [e for e in await bot.service.ledger.audit_log() if e.action == "correct"]
    assert {(e.user_id, e.allowed) for e in entries} == {(str(ADMIN), True), (str(BOB), False)}


async def test_auto_corrections_follow_a_changed_file_once(
    bot: Running, fake: FakeTelegram
) -> None:
    await _posted(bot)
    assert [r.changed for r in await bot.service.auto_correct()] == [0]  # yesterday unposted
    assert await bot.service.auto_correct() == []  # this revision was looked at
    bot.rewrite_issue(BRIEF, "改过的一句。")

    [report] = await bot.service.auto_correct()

    assert report.edited == len(CHATS) and _edits(fake) == len(CHATS)
    assert "corrected in place" in fake.sent(ADMIN)[-1].text
    assert await bot.service.auto_correct() == []


# ---------------------------------------------------------------- pins


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_pin_today_unpin_yesterday_and_a_missing_right_reported_once(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bot_with(fake, tmp_path, monkeypatch, pin=True) as bot:
        fake.chats[BY_NAME].can_pin = False
        alerts: list[str] = []
        bot.service.pins._alert = _collect(alerts)  # the admins' DM, as a list
        yesterday = TODAY - dt.timedelta(days=1)
        await bot.service.post(yesterday)
        old = fake.sent(CHANNEL)[0].message_id
        assert fake.chats[CHANNEL].pinned == [old]
        posted = len(fake.sent(CHANNEL))

        await bot.service.post(TODAY)

        today = fake.sent(CHANNEL)[posted].message_id
        assert fake.chats[CHANNEL].pinned == [today]  # yesterday's unpinned
        assert fake.chats[CHANNEL].pin_silent == [True, True]
        assert fake.chats[BY_NAME].pinned == []
        assert len(alerts) == 1 and "cannot pin" in alerts[0]
        pins = len([r for r in fake.requests if r.method.lower() == "pinchatmessage"])
        await bot.service.post(TODAY)  # nothing new; the refused channel is not asked again
        assert len(alerts) == 1
        tried = [r for r in fake.requests if r.method.lower() == "pinchatmessage"][pins:]
        assert all(r.chat_id == CHANNEL for r in tried)
        assert fake.chats[ANN].pinned == []  # private chats are not pinned


def _collect(into: list[str]):  # type: ignore[no-untyped-def]
    async def alert(text: str) -> None:
        into.append(text)

    return alert
