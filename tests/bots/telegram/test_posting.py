"""The daily post, its buttons, subscribers and reposts end to end against the Bot API double."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from bots.runtime import run
from digest_core.delivery import PartState
from digest_core.models import Section
from digest_core.publishing.schedule import Outcome
from digest_core.rendering import button_data
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    BOB,
    CHANNEL,
    GROUP,
    TODAY,
    PinnedClock,
    Running,
    local,
    running_bot,
    settings_for,
    visible,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram, SentMessage

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BY_NAME = -1009999  # the channel configured as @ai_digest
CHANNELS = (CHANNEL, BY_NAME)
PARTS = 2  # the issue of TODAY is two messages on Telegram


def _keyboard(message: SentMessage) -> list[tuple[str, str]]:
    assert message.reply_markup is not None
    return [
        (b["text"], b["callback_data"])
        for row in message.reply_markup["inline_keyboard"]
        for b in row
    ]


def _html(chat: int, fake: FakeTelegram) -> list[str]:
    return [m.html for m in fake.sent(chat)]


# ---------------------------------------------------------------- the daily post


async def test_daily_post_reaches_every_channel_once_with_its_keyboard(
    bot: Running, fake: FakeTelegram
) -> None:
    assert await bot.service.poster.run_due(TODAY) is Outcome.POSTED
    for chat in CHANNELS:
        sent = fake.sent(chat)
        assert len(sent) == PARTS
        assert "2026年11月27日" in sent[0].text
        assert sent[0].link_preview_options == {
            "is_disabled": False, "url": "https://arxiv.org/abs/2309.06180"
        }  # fmt: skip
        assert all(m.reply_markup is None for m in sent[:-1])
        assert _keyboard(sent[-1]) == [
            ("重点", "dg:2026-11-27:headline"),
            ("简讯", "dg:2026-11-27:briefs"),
            ("经典回顾", "dg:2026-11-27:classic"),
        ]
    assert _html(CHANNEL, fake) == _html(BY_NAME, fake)
    # a second trigger (a restart, a double cron) sends nothing
    assert await bot.service.poster.run_due(TODAY) is Outcome.ALREADY
    assert [len(fake.sent(c)) for c in CHANNELS] == [PARTS, PARTS]


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_digest_bot_run_posts_the_missed_issue_at_start(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, base_url=fake.base_url, schedule=True, post_time="08:00")
    settings = settings_for(config, fake, monkeypatch)
    stop = asyncio.Event()
    # 09:00 local: the 08:00 post was missed an hour ago, within the catch-up window
    clock = PinnedClock(local(TODAY, 9))
    task = asyncio.create_task(run(settings, only="telegram", clock=clock, stop=stop))
    try:
        for chat in CHANNELS:
            sent = await fake.wait_for_messages(chat, PARTS)
            assert _keyboard(sent[-1])[0] == ("重点", "dg:2026-11-27:headline")
        fake.inject_message(ADMIN, ADMIN, "/status")
        status = await fake.wait_for_messages(ADMIN, 1)
        assert f"{CHANNEL}: 最近 / last 2026-11-27 (#2" in status[0].text
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert [len(fake.sent(c)) for c in CHANNELS] == [PARTS, PARTS]


# ---------------------------------------------------------------- section buttons


async def test_a_section_button_sends_that_part_of_that_issue_privately(
    bot: Running, fake: FakeTelegram
) -> None:
    await bot.service.poster.run_due(TODAY)
    post = fake.sent(CHANNEL)[-1]
    fake.inject_callback(CHANNEL, ANN, post.message_id, button_data(TODAY, Section.BRIEFS))
    sent = await fake.wait_for_messages(ANN, 1)
    assert "【简讯】" in sent[0].text and "2026年11月27日" in sent[0].text
    assert sent[0].reply_markup is None
    await _until(lambda: len(fake.answered_callbacks) == 1)
    assert "简讯" in fake.answered_callbacks[0]["text"]
    assert not fake.answered_callbacks[0]["show_alert"]
    # an old post's button names its own issue, not today's
    fake.inject_callback(CHANNEL, ANN, post.message_id, "dg:2026-11-26:classic")
    sent = await fake.wait_for_messages(ANN, 2)
    assert "2026年11月26日" in sent[1].text and "【经典回顾】" in sent[1].text
    assert len(fake.sent(CHANNEL)) == PARTS  # nothing is posted in the channel


async def test_a_reader_who_never_started_the_bot_is_asked_to(
    bot: Running, fake: FakeTelegram
) -> None:
    await bot.service.poster.run_due(TODAY)
    post = fake.sent(CHANNEL)[-1]
    stranger = 777  # no private chat with the bot: Telegram refuses to write first
    fake.inject_callback(CHANNEL, stranger, post.message_id, "dg:2026-11-27:headline")
    await _until(lambda: len(fake.answered_callbacks) == 1)
    answer = fake.answered_callbacks[0]
    assert answer["show_alert"] and "/start" in answer["text"]
    assert "@digest_test_bot" in answer["text"]
    # and a button of an issue that is not in the archive says so
    fake.inject_callback(CHANNEL, ANN, post.message_id, "dg:2020-01-01:headline")
    await _until(lambda: len(fake.answered_callbacks) == 2)
    missing = fake.answered_callbacks[1]
    assert missing["show_alert"] and "2020-01-01" in missing["text"]


# ---------------------------------------------------------------- subscribers


async def test_subscribe_daily_dm_blocked_then_unsubscribed(
    bot: Running, fake: FakeTelegram
) -> None:
    await bot.command("/subscribe", user=ANN)
    await bot.service.poster.run_due(TODAY)
    dms = fake.sent(ANN)[1:]
    assert len(dms) == PARTS and "2026年11月27日" in dms[0].text
    assert _keyboard(dms[-1])[1] == ("简讯", "dg:2026-11-27:briefs")

    fake.block(ANN)  # the reader blocks the bot
    next_day = TODAY + dt.timedelta(days=1)
    reports = await bot.service.post(next_day)
    assert [t.id for t in reports[0].gone] == [str(ANN)]
    assert await bot.service.ledger.subscribers("telegram") == []
    assert [len(fake.sent(c)) for c in CHANNELS] == [PARTS + 1, PARTS + 1]  # others unaffected

    # unblocking and subscribing again brings the DMs back
    fake.unblock(ANN)
    assert "已订阅" in (await bot.command("/subscribe", user=ANN))[0].text
    reports = await bot.service.post(next_day + dt.timedelta(days=1))
    assert reports[0].ok and "2026年11月29日" in fake.sent(ANN)[-1].text


# ---------------------------------------------------------------- reposts


async def test_admin_repost_asks_then_reports_per_target(bot: Running, fake: FakeTelegram) -> None:
    await bot.service.poster.run_due(TODAY)
    prompt = (await bot.command("/repost 2026-11-27 force", user=ADMIN))[0]
    assert "2026-11-27" in prompt.text
    buttons = _keyboard(prompt)
    assert buttons == [("确认 / Confirm", "cf:repost:2026-11-27 force"), ("取消 / Cancel", "cx")]
    assert [len(fake.sent(c)) for c in CHANNELS] == [PARTS, PARTS]  # nothing before the press

    fake.inject_callback(ADMIN, ADMIN, prompt.message_id, buttons[0][1])
    summary = (await fake.wait_for_messages(ADMIN, 2, timeout=10))[1]
    assert "telegram 2026-11-27: 发送 / sent 4" in summary.text
    assert [len(fake.sent(c)) for c in CHANNELS] == [2 * PARTS, 2 * PARTS]
    assert fake.sent(ADMIN)[0].reply_markup is None  # the prompt lost its buttons
    assert "已确认" in fake.sent(ADMIN)[0].text
    audit = await bot.service.ledger.audit_log(platform="telegram")
    assert [(a.user_id, a.action, a.allowed) for a in audit] == [(str(ADMIN), "repost", True)]

    # pressing the (stale) confirm again does not repost: the prompt is closed in the
    # double too, but even a replayed press goes through the ledger's "only missing" rule
    fake.inject_callback(ADMIN, ADMIN, prompt.message_id, "cf:repost:2026-11-27")
    summary = (await fake.wait_for_messages(ADMIN, 3, timeout=10))[2]
    assert "发送 / sent 0" in summary.text
    assert [len(fake.sent(c)) for c in CHANNELS] == [2 * PARTS, 2 * PARTS]


async def test_a_non_admin_repost_is_refused_and_audited(bot: Running, fake: FakeTelegram) -> None:
    refused = await bot.command("/repost 2026-11-27 force", user=BOB)
    assert "只有管理员" in refused[0].text and refused[0].reply_markup is None
    # an admin asks in a group: the prompt goes to the admin privately, not to the group
    before = len(fake.sent(ADMIN))
    fake.inject_message(GROUP, ADMIN, "/repost")
    prompt = (await fake.wait_for_messages(ADMIN, before + 1))[before]
    assert _keyboard(prompt) and fake.sent(GROUP) == []
    # a reader presses the admin's confirm button anyway (a forged callback)
    fake.inject_callback(ADMIN, BOB, prompt.message_id, _keyboard(prompt)[0][1])
    await _until(lambda: len(fake.answered_callbacks) == 1)
    assert fake.answered_callbacks[0]["show_alert"]
    assert "只有管理员" in fake.answered_callbacks[0]["text"]
    # the admin cancels
    fake.inject_callback(ADMIN, ADMIN, prompt.message_id, "cx")
    await _until(lambda: len(fake.answered_callbacks) == 2)
    await bot.settled()  # the cancel's handler has finished
    assert all(fake.sent(c) == [] for c in CHANNELS)  # nothing was reposted
    assert "已取消" in fake.chats[ADMIN].messages[prompt.message_id]["text"]
    audit = await bot.service.ledger.audit_log(platform="telegram")
    assert sorted((a.user_id, a.action, a.allowed) for a in audit) == [
        (str(BOB), "repost", False), (str(BOB), "repost", False)
    ]  # fmt: skip


# ---------------------------------------------------------------- flood limits and moves


async def test_429s_are_honoured_without_loss(bot: Running, fake: FakeTelegram) -> None:
    fake.fail_next(CHANNEL, "flood", times=3, retry_after=0.05)
    fake.fail_next(BY_NAME, "server_error", status=502)
    reports = await bot.service.post(TODAY)
    assert reports[0].ok and fake.flood_429s >= 3
    for chat in CHANNELS:
        assert len(fake.sent(chat)) == PARTS
        assert len(set(_html(chat, fake))) == PARTS  # each part once, in order
    assert _html(CHANNEL, fake) == _html(BY_NAME, fake)
    retried = [r for r in fake.calls("sendMessage") if r.chat_id == CHANNEL and r.status == 429]
    ok = [r for r in fake.calls("sendMessage") if r.chat_id == CHANNEL and r.status == 200]
    assert ok[0].at - retried[-1].at >= 0.05 - 1e-3  # the retry waited as asked


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_migrated_group_is_followed(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, base_url=fake.base_url, channels=[str(GROUP)])
    settings = settings_for(config, fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as bot:
        fake.fail_next(GROUP, "migrated")
        reports = await bot.service.post(TODAY)
        new_id = fake.chats[GROUP].migrated_to
        assert new_id is not None
        assert reports[0].targets[0].moved_to == str(new_id)
        assert len(fake.sent(new_id)) == PARTS and fake.sent(GROUP) == []
        # the next day goes straight to the supergroup
        before = len(fake.calls("sendMessage"))
        await bot.service.post(TODAY + dt.timedelta(days=1))
        later = fake.calls("sendMessage")[before:]
        assert {r.chat_id for r in later} == {new_id} and all(r.status == 200 for r in later)
        records = await bot.service.ledger.records(platform="telegram")
        assert all(r.state is PartState.SENT for r in records)


async def _until(condition: object, timeout: float = 5.0) -> None:  # noqa: ASYNC109
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():  # type: ignore[operator]
        if loop.time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


__all__ = ["visible"]
