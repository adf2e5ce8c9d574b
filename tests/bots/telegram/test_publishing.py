"""The editor's side end to end on Telegram: embargo, admin preview, the approval gate.

The real PTB Application polls the Bot API double; the clock is pinned to a chosen morning and
moved by the tests (the bot's own waits stay real).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from digest_core.commands.buttons import parse_action_data
from digest_core.publishing.embargo import EARLY_ACTION
from digest_core.rendering import Part, render
from digest_core.rendering import telegram as telegram_render
from digest_core.testing import PinnedClock
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    CHANNEL,
    GROUP,
    TODAY,
    Running,
    local,
    running_bot,
    settings_for,
    visible,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram, SentMessage

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

TOMORROW = TODAY + dt.timedelta(days=1)
YESTERDAY = TODAY - dt.timedelta(days=1)
#: a word only the issue of TOMORROW has
ONLY_TOMORROW = "提示词模板"


class MovableClock(PinnedClock):
    """A pinned clock the test can move forward (wall time only)."""

    def advance(self, delta: dt.timedelta) -> None:
        self._start += delta


async def _until(check: Callable[[], bool], within: float = 5.0) -> None:
    for _ in range(int(within / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def _keyboard(message: SentMessage) -> list[tuple[str, str]]:
    markup = message.reply_markup or {}
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


# ---------------------------------------------------------------- embargo


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_no_reader_surface_shows_a_future_issue_before_its_time(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, base_url=fake.base_url, telegram={"command_burst": 1000})
    settings = settings_for(config, fake, monkeypatch)
    clock = MovableClock(local(TODAY, 7))  # an hour before today's 08:00 post
    async with running_bot(settings, fake, clock=clock, scale=100) as bot:
        today = visible(await bot.command("/today", n=2))
        assert f"今天（{TODAY}）的日报将于 08:00 发布" in today
        assert "2026年11月26日" in today and "2026年11月27日" not in today  # yesterday's
        for day in (TODAY, TOMORROW):
            for command in ("/issue", "/headline", "/briefs", "/classic", "/toc", "/brief 1"):
                [reply] = await bot.command(f"{command} {day}")
                assert f"{day} 的日报还没有发布" in reply.text, (command, reply.text)
        [hits] = await bot.command(f"/search {ONLY_TOMORROW}")
        assert "没有找到" in hits.text and str(TOMORROW) not in hits.text
        # a section button whose data names tomorrow (forged, or on an early preview)
        private = len(fake.sent(ANN))
        fake.inject_callback(ANN, ANN, hits.message_id, f"dg:{TOMORROW}:headline")
        await _until(lambda: len(fake.answered_callbacks) == 1)
        answer = fake.answered_callbacks[0]
        assert answer["show_alert"] and "还没有发布" in answer["text"]
        assert len(fake.sent(ANN)) == private  # nothing came privately
        # admins see everything
        admin = visible(await bot.command(f"/issue {TOMORROW}", user=ADMIN))
        assert "推理模型的 <think> 段落" in admin
        [found] = await bot.command(f"/search {ONLY_TOMORROW}", user=ADMIN)
        assert str(TOMORROW) in found.text
        # at 08:00 today's issue is out; tomorrow's is still not
        clock.advance(dt.timedelta(hours=1, minutes=1))
        assert "2026年11月27日" in visible(await bot.command("/today", n=2))
        [later] = await bot.command(f"/issue {TOMORROW}")
        assert "还没有发布" in later.text


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_an_admin_repost_of_a_future_day_publishes_it_early_and_it_stays_so(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as bot:
        [prompt] = await bot.command(f"/repost {TOMORROW}", user=ADMIN)
        fake.inject_callback(ADMIN, ADMIN, prompt.message_id, _keyboard(prompt)[0][1])
        await fake.wait_for_messages(CHANNEL, 1)
        await _until(lambda: "发送 / sent" in visible(fake.sent(ADMIN)))
        assert "推理模型的 <think>" in visible(await bot.command(f"/issue {TOMORROW}"))
        [entry] = await bot.service.ledger.audit_log(actions=[EARLY_ACTION])
        assert entry.args == {"date": str(TOMORROW)} and entry.user_id == str(ADMIN)
    # a restart an hour later reads the fact back
    async with running_bot(settings, fake, clock=PinnedClock(local(TODAY, 10)), scale=100) as bot:
        assert "推理模型的 <think>" in visible(await bot.command(f"/issue {TOMORROW}"))


# ---------------------------------------------------------------- preview


async def test_preview_sends_the_admin_privately_exactly_the_post_buttons_included(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as bot:
        issue = bot.service.archive.on(TOMORROW)
        want = render(issue, telegram_render, Part.ALL, options=bot.adapter.post_options)
        # asked in the group: the preview goes to the admin's private chat, not the group
        before = len(fake.sent(ADMIN))
        fake.inject_message(GROUP, ADMIN, f"/preview {TOMORROW}")
        sent = (await fake.wait_for_messages(ADMIN, before + 1 + len(want)))[before:]
        head, *post = sent
        assert "预览" in head.text and str(issue.revision) in head.text
        assert [m.html for m in post] == [m.payload["text"] for m in want]
        assert [m.reply_markup for m in post] == [m.payload.get("reply_markup") for m in want]
        assert _keyboard(post[-1])[0][1] == f"dg:{TOMORROW}:headline"
        assert fake.sent(GROUP) == [] and fake.sent(CHANNEL) == []
        # the preview's own section button answers the admin even before publication
        fake.inject_callback(ADMIN, ADMIN, post[-1].message_id, f"dg:{TOMORROW}:classic")
        await _until(lambda: len(fake.answered_callbacks) == 1)
        assert not fake.answered_callbacks[0]["show_alert"]
        # nothing was recorded as a delivery
        assert await bot.service.ledger.records(limit=1) == []
        # readers are refused
        [refused] = await bot.command(f"/preview {TOMORROW}")
        assert "只有管理员" in refused.text


# ---------------------------------------------------------------- approval


def _approval_config(tmp_path: Path, fake: FakeTelegram) -> Path:
    path = write_config(tmp_path, base_url=fake.base_url)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("[schedule]\n", "[schedule]\nrequire_approval = true\n"))
    return path


async def _review(bot: Running, fake: FakeTelegram, day: dt.date) -> SentMessage:
    """Run the review of ``day``; returns the admin's last message (with the buttons)."""
    before = len(fake.sent(ADMIN))
    await bot.service.publishing.review(day)
    sent = fake.sent(ADMIN)[before:]
    assert "待批准" in sent[0].text
    return sent[-1]


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_unapproved_is_held_and_alerted_then_a_late_approval_posts_at_once(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(_approval_config(tmp_path, fake), fake, monkeypatch)
    clock = MovableClock(local(TODAY, 6))  # review time: 2 h before 08:00
    async with running_bot(settings, fake, clock=clock, scale=100) as bot:
        last = await _review(bot, fake, TODAY)
        (approve_label, approve), (hold_label, _) = _keyboard(last)
        assert "Approve" in approve_label and "Hold" in hold_label
        revision = bot.service.archive.on(TODAY).revision
        assert parse_action_data(approve) == ("approve", (str(TODAY), revision))
        clock.advance(dt.timedelta(hours=2))  # 08:00: nobody approved
        before = len(fake.sent(ADMIN))
        await bot.service.poster.run_due(TODAY)
        assert fake.sent(CHANNEL) == []
        alert = visible(fake.sent(ADMIN)[before:])
        assert "等待批准" in alert and "还没有人批准" in alert
        assert TODAY in bot.service.publishing.held
        # a reader pressing the button is refused and audited; nothing is posted
        fake.inject_callback(ADMIN, ANN, last.message_id, approve)
        await _until(lambda: len(fake.answered_callbacks) == 1)
        assert fake.answered_callbacks[0]["show_alert"]
        assert fake.sent(CHANNEL) == []
        # the admin approves late: posted at once
        fake.inject_callback(ADMIN, ADMIN, last.message_id, approve)
        await fake.wait_for_messages(CHANNEL, 2)
        await _until(lambda: "立即推送" in visible(fake.sent(ADMIN)))
        assert not await bot.service.publishing.remind(TODAY)  # no more reminders
        decisions = await bot.service.ledger.audit_log(actions=["approve"])
        who = [(d.user_id, d.allowed) for d in decisions]
        assert who == [(str(ADMIN), True), (str(ANN), False)]


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_an_approval_lets_the_post_out_and_a_changed_file_voids_it(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(_approval_config(tmp_path, fake), fake, monkeypatch)
    clock = MovableClock(local(TODAY, 6))
    async with running_bot(settings, fake, clock=clock, scale=100) as bot:
        last = await _review(bot, fake, TODAY)
        approve = _keyboard(last)[0][1]
        fake.inject_callback(ADMIN, ADMIN, last.message_id, approve)
        await _until(lambda: "已批准" in fake.sent(ADMIN)[-1].text)
        # the editor fixes a typo after the approval: a new revision
        bot.rewrite_issue("分页", "分頁")
        clock.advance(dt.timedelta(hours=2))
        before = len(fake.sent(ADMIN))
        await bot.service.poster.run_due(TODAY)
        assert fake.sent(CHANNEL) == []
        assert "批准作废" in visible(fake.sent(ADMIN)[before:])
        # the old button approves the old revision: refused
        fake.inject_callback(ADMIN, ADMIN, last.message_id, approve)
        await _until(lambda: "文件已经改过" in fake.sent(ADMIN)[-1].text)
        assert fake.sent(CHANNEL) == []
        # a review of the new revision, approved: posted
        fresh = await _review(bot, fake, TODAY)
        fake.inject_callback(ADMIN, ADMIN, fresh.message_id, _keyboard(fresh)[0][1])
        posted = await fake.wait_for_messages(CHANNEL, 2)
        assert "分頁" in visible(posted)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_approved_ahead_of_time_posts_on_schedule_and_hold_keeps_it_back(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(_approval_config(tmp_path, fake), fake, monkeypatch)
    clock = MovableClock(local(TODAY, 6))
    async with running_bot(settings, fake, clock=clock, scale=100) as bot:
        [held] = await bot.command(f"/hold {TODAY}", user=ADMIN)
        assert "已暂缓" in held.text
        [status] = await bot.command("/status", user=ADMIN)
        assert f"{TODAY}: 就绪，待批准" in status.text
        [ok] = await bot.command(f"/approve {TODAY}", user=ADMIN)
        assert "将于" in ok.text
        [status] = await bot.command("/status", user=ADMIN)
        assert f"{TODAY}: 已批准" in status.text and f"{TOMORROW}: 就绪" in status.text
        clock.advance(dt.timedelta(hours=2))
        await bot.service.poster.run_due(TODAY)
        assert len(fake.sent(CHANNEL)) == 2


# ---------------------------------------------------------------- readiness


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_status_shows_readiness_and_the_missing_alert_names_the_first_error(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, base_url=fake.base_url, days=[YESTERDAY, TODAY])
    settings = settings_for(config, fake, monkeypatch)
    clock = MovableClock(local(TODAY, 9))
    async with running_bot(settings, fake, clock=clock, scale=100) as bot:
        [status] = await bot.command("/status", user=ADMIN)
        assert f"{TOMORROW}: 缺失 / missing" in status.text
        # at missing_alert (05:00 tomorrow) the admins hear of it
        before = len(fake.sent(ADMIN))
        assert await bot.service.publishing.check_missing(TOMORROW) == "missing"
        alert = visible(fake.sent(ADMIN)[before:])
        assert f"{TOMORROW}" in alert and "文件还没有" in alert
        # a broken file: invalid, with its first error as path:line
        broken = tmp_path / "archive" / f"{TOMORROW}.txt"
        broken.write_text("AI 技术日报\n重点\n", encoding="utf-8")
        bot.service.archive.refresh(full=True)
        [status] = await bot.command("/status", user=ADMIN)
        assert f"{TOMORROW}: 无效 / invalid: " in status.text and f"{broken}:" in status.text
        before = len(fake.sent(ADMIN))
        assert await bot.service.publishing.check_missing(TOMORROW) == "invalid"
        assert f"{broken}:" in visible(fake.sent(ADMIN)[before:])
        # fixed: ready, and no alert
        broken.write_text((tmp_path / "archive" / f"{TODAY}.txt").read_text(encoding="utf-8"))
        bot.service.archive.refresh(full=True)
        [status] = await bot.command("/status", user=ADMIN)
        assert f"{TOMORROW}: 就绪 / ready" in status.text
        before = len(fake.sent(ADMIN))
        assert await bot.service.publishing.check_missing(TOMORROW) == "ready"
        await fake.wait_until_answered()  # check_missing awaits the alerts it sends
        assert len(fake.sent(ADMIN)) == before


async def test_brief_and_briefs_take_a_date(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as bot:
        [one] = await bot.command(f"/brief 2 {YESTERDAY}")
        assert "2026年11月26日" in one.text and "2. 数据加载上 GPU" in one.text
        [briefs] = await bot.command(f"/briefs {YESTERDAY}")
        assert "【简讯】" in briefs.text and "2026年11月26日" in briefs.text
