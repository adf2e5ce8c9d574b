"""Readers' own terms end to end on Telegram (issue #12): subscribers' times, zones and formats,
/settings buttons, keyword follows and inline mode, against the Bot API double."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from digest_core.testing import SettableClock
from tests.bots.telegram.harness import (
    ANN,
    BOB,
    CHANNEL,
    GROUP,
    TODAY,
    Running,
    local,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram, SentMessage

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BERLIN = ZoneInfo("Europe/Berlin")
CAROL = 3_000_003  # a reader of inline queries only
SHANGHAI = ZoneInfo("Asia/Shanghai")
HEADLINE_27 = "KV 缓存为什么要分页"  # the headline of TODAY's issue
PARTS = 2  # TODAY's issue is two messages on Telegram
TOMORROW = TODAY + dt.timedelta(days=1)


def at(day: dt.date, hh: int, mm: int, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hh, mm, 30, tzinfo=zone)


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock(local(TODAY, 9))


@pytest.fixture
async def bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: SettableClock
) -> AsyncIterator[Running]:
    config = write_config(tmp_path, base_url=fake.base_url, telegram={"command_burst": 50})
    settings = settings_for(config, fake, monkeypatch)
    async with running_bot(settings, fake, clock=clock, scale=100) as running:
        yield running


def issues_in(messages: list[SentMessage]) -> int:
    """How many messages carry TODAY's headline (a delivered issue starts with it)."""
    return sum(1 for m in messages if HEADLINE_27 in m.text and "/ Subscribed" not in m.text)


async def test_each_subscriber_gets_the_issue_once_at_their_own_time(
    bot: Running, fake: FakeTelegram, clock: SettableClock
) -> None:
    # 09:00 in Shanghai on the 27th: the issue of the 27th was published at 08:00
    (reply,) = await bot.command("/subscribe 07:00")
    assert "07:00" in reply.text and "Asia/Shanghai" in reply.text
    await bot.command("/zone Europe/Berlin", user=BOB)
    (reply,) = await bot.command("/subscribe 21:00 compact", user=BOB)
    assert "Europe/Berlin" in reply.text and "compact" in reply.text
    before = {ANN: len(fake.sent(ANN)), BOB: len(fake.sent(BOB))}

    # their times today came before they chose them: nothing yet; the channel post leaves
    # them out (they are timed)
    assert await bot.service.deliver_personal() == []
    await bot.service.post(TODAY)
    assert len(fake.sent(CHANNEL)) == PARTS
    assert [len(fake.sent(ANN)), len(fake.sent(BOB))] == [before[ANN], before[BOB]]

    # 21:00 in Berlin (04:00 on the 28th in Shanghai): Bob gets the 27th, compact (one message)
    clock.set(at(TODAY, 21, 0, BERLIN))
    reports = await bot.service.deliver_personal()
    assert [r.sent for r in reports] == [1]
    bob = fake.sent(BOB)[before[BOB] :]
    assert len(bob) == 1 and HEADLINE_27 in bob[0].text and "2026年11月27日" in bob[0].text
    assert len(fake.sent(ANN)) == before[ANN]
    assert await bot.service.deliver_personal() == []  # once

    # 07:00 in Shanghai on the 28th: the 28th is not out until 08:00, so Ann gets the 27th
    clock.set(at(TOMORROW, 7, 0, SHANGHAI))
    reports = await bot.service.deliver_personal()
    assert [r.sent for r in reports] == [PARTS]
    ann = fake.sent(ANN)[before[ANN] :]
    assert len(ann) == PARTS and issues_in(ann) == 1
    assert len(fake.sent(BOB)) == before[BOB] + 1
    assert await bot.service.deliver_personal() == []


async def test_a_preference_changed_after_delivery_does_not_resend(
    bot: Running, fake: FakeTelegram, clock: SettableClock
) -> None:
    await bot.command("/subscribe 07:00")
    clock.set(at(TOMORROW, 7, 0, SHANGHAI))
    assert [r.sent for r in await bot.service.deliver_personal()] == [PARTS]
    got = len(fake.sent(ANN))
    # at 07:10 Ann moves to 07:30 and the headline format: the next slot is still before the
    # 28th's publish time, so it would be the 27th again, which she has (in another format)
    clock.set(at(TOMORROW, 7, 10, SHANGHAI))
    await bot.command("/subscribe 07:30 headline")
    clock.set(at(TOMORROW, 7, 30, SHANGHAI))
    assert await bot.service.deliver_personal() == []
    assert len(fake.sent(ANN)) == got + 1  # the /subscribe answer only
    # a /repost (not forced) of the 27th does not reach her either
    await bot.service.post(TODAY)
    assert len(fake.sent(ANN)) == got + 1


async def test_settings_shows_preferences_and_its_buttons_change_them(
    bot: Running, fake: FakeTelegram
) -> None:
    await bot.command("/subscribe 07:00")
    (shown,) = await bot.command("/settings")
    assert "07:00" in shown.text and "完整 / full" in shown.text
    assert shown.reply_markup is not None
    buttons = {b["text"]: b["callback_data"] for row in shown.reply_markup["inline_keyboard"]
               for b in row}  # fmt: skip
    assert buttons["✓ 07:00"] == "rd:subscribe 07:00"
    before = len(fake.sent(ANN))
    fake.inject_callback(ANN, ANN, shown.message_id, buttons["精简"])
    (changed,) = (await fake.wait_for_messages(ANN, before + 1))[before:]
    assert "精简 / compact" in changed.text and "07:00" in changed.text
    assert fake.answered_callbacks[-1]["text"] == "✓"
    pref = await bot.service.ledger.preference("telegram", str(ANN))
    assert pref.format == "compact" and pref.at == dt.time(7, 0)
    # in a group, reader settings are answered with a pointer to the private chat
    (pointer,) = await bot.command("/settings", chat=GROUP)
    assert "私信" in pointer.text and "07:00" not in pointer.text


async def test_bad_times_and_zones_get_one_clear_line(bot: Running) -> None:
    (reply,) = await bot.command("/subscribe 25:00")
    assert "“25:00” 不是时间或格式" in reply.text and "/subscribe [HH:MM]" in reply.text
    (reply,) = await bot.command("/zone Mars/Olympus")
    assert "“Mars/Olympus” 不是时区" in reply.text


async def test_a_follow_fires_once_per_issue_and_only_once_it_is_published(
    bot: Running, fake: FakeTelegram, clock: SettableClock
) -> None:
    clock.set(at(TODAY, 7, 0, SHANGHAI))  # before the 27th's 08:00 publish time
    await bot.command("/follow 蒸馏")  # only the issue of the 27th mentions it
    await bot.command("/follow 不存在的词", user=BOB)
    (listed,) = await bot.command("/following")
    assert "蒸馏" in listed.text and "1/10" in listed.text
    before, bob = len(fake.sent(ANN)), len(fake.sent(BOB))
    assert await bot.service.deliver_personal() == []  # embargoed: not out yet

    clock.set(at(TODAY, 8, 1, SHANGHAI))
    reports = await bot.service.deliver_personal()
    assert [(r.platform, r.sent) for r in reports] == [("telegram~follow", 1)]
    (alert,) = fake.sent(ANN)[before:]
    assert "2026-11-27" in alert.text and "“蒸馏”" in alert.text and "简讯" in alert.text
    # later runs, and a new process on the same ledger, send nothing more
    assert await bot.service.deliver_personal() == []
    bot.service.personal._checked.clear()  # as after a restart: the ledger alone decides
    assert await bot.service.deliver_personal() == []
    assert len(fake.sent(ANN)) == before + 1
    assert len(fake.sent(BOB)) == bob  # his word is in no issue


async def test_follow_limits(bot: Running) -> None:
    for n in range(10):
        await bot.command(f"/follow 词{n}")
    (full,) = await bot.command("/follow 第十一个")
    assert "最多关注 10 个词" in full.text
    (gone,) = await bot.command("/unfollow 词3")
    assert "已取消关注" in gone.text
    (missing,) = await bot.command("/unfollow 词3")
    assert "你没有关注" in missing.text


async def test_a_follow_of_an_invisible_character_is_refused_and_quoted_escaped(
    bot: Running,
) -> None:
    """A NUL or U+202E in /follow is no word an issue can hold: refused, quoted escaped (it
    was echoed raw, and stored)."""
    (refused,) = await bot.command("/follow a\x00b\u202ec")
    assert "不可见字符" in refused.text
    assert "\\x00" in refused.text and "\\u202e" in refused.text
    assert "\x00" not in refused.text and "\u202e" not in refused.text
    (listed,) = await bot.command("/following")
    assert "\\x00" not in listed.text and "\x00" not in listed.text


async def test_inline_results_respect_the_embargo(bot: Running, fake: FakeTelegram) -> None:
    # 09:00 on the 27th: the files of the 28th, 29th and 30th are in the archive, not out
    query = fake.inject_inline_query(ANN, "Transformer")
    answer = await fake.wait_for_inline_answer(query)
    assert answer.results and all(r.id.startswith("2026-11-2") for r in answer.results)
    dates = {r.id.split(":")[0] for r in answer.results}
    assert dates <= {"2026-11-26", "2026-11-27"} and "2026-11-27" in dates
    first = answer.results[0]
    assert first.title in first.text and "AI 技术日报 2026-11-27" in first.text
    # only the issue of the 28th mentions it: nothing to show yet
    query = fake.inject_inline_query(ANN, "机器人")
    assert (await fake.wait_for_inline_answer(query)).results == []
    # a word of many briefs: one page of unique results (the double refuses duplicates, more
    # than 50, ids over 64 bytes), none from a future issue
    query = fake.inject_inline_query(ANN, "模型")
    many = (await fake.wait_for_inline_answer(query)).results
    assert 1 < len(many) <= 20 and all(r.id < "2026-11-28" for r in many)
    # an empty query: today's headline
    query = fake.inject_inline_query(BOB, "")
    (headline,) = (await fake.wait_for_inline_answer(query)).results
    assert HEADLINE_27 in headline.title and headline.url == "https://arxiv.org/abs/2309.06180"


async def test_a_format_switch_before_a_repost_sends_nothing_more(
    bot: Running, fake: FakeTelegram
) -> None:
    # Ann takes the issue at the digest's time, compact (one message)
    await bot.command("/subscribe compact")
    await bot.service.post(TODAY)
    got = len(fake.sent(ANN))
    assert HEADLINE_27 in fake.sent(ANN)[-1].text
    # she switches to the full issue (two messages); a /repost of the day (not forced) must
    # not send her the full issue's second message after the compact one
    await bot.command("/subscribe full")
    [report] = await bot.service.post(TODAY)
    assert report.ok and len(fake.sent(ANN)) == got + 1  # the /subscribe answer only


async def test_a_timed_delivery_cut_after_its_first_part_resumes_with_the_rest(
    bot: Running, fake: FakeTelegram, clock: SettableClock, tmp_path: Path
) -> None:
    await bot.command("/subscribe 07:00")
    clock.set(at(TOMORROW, 7, 0, SHANGHAI))
    assert [r.sent for r in await bot.service.deliver_personal()] == [PARTS]
    got = len(fake.sent(ANN))
    # as if the process had died after the first part: the second is pending in the ledger
    with sqlite3.connect(tmp_path / "digest.db") as conn:
        changed = conn.execute(
            "UPDATE parts SET state = 'pending' WHERE target = ? AND part = 1", (str(ANN),)
        ).rowcount
    assert changed == 1
    bot.service.personal._served.clear()  # a new process knows only what the ledger says
    clock.set(at(TOMORROW, 7, 1, SHANGHAI))
    assert [r.sent for r in await bot.service.deliver_personal()] == [1]
    assert len(fake.sent(ANN)) == got + 1 and HEADLINE_27 not in fake.sent(ANN)[-1].text


async def test_an_early_publish_shows_in_follows_and_inline_at_once(
    bot: Running, fake: FakeTelegram, clock: SettableClock
) -> None:
    # the readers' surfaces ask the core's embargo: an admin's early publish counts at once
    clock.set(at(TODAY, 7, 0, SHANGHAI))  # before the 27th's 08:00 publish time
    await bot.command("/follow 蒸馏")  # only the issue of the 27th mentions it
    assert await bot.service.deliver_personal() == []
    before = len(fake.sent(ANN))
    await bot.service.publishing.published(TODAY, by="telegram:1")
    reports = await bot.service.deliver_personal()
    assert [(r.platform, r.sent) for r in reports] == [("telegram~follow", 1)]
    (alert,) = fake.sent(ANN)[before:]
    assert "2026-11-27" in alert.text and "“蒸馏”" in alert.text
    # only the issue of the 28th mentions 机器人: hidden until published early
    query = fake.inject_inline_query(ANN, "机器人")
    assert (await fake.wait_for_inline_answer(query)).results == []
    await bot.service.publishing.published(TOMORROW, by="telegram:1")
    query = fake.inject_inline_query(ANN, "机器人")
    found = (await fake.wait_for_inline_answer(query)).results
    assert found and {r.id.split(":")[0] for r in found} == {"2026-11-28"}


async def test_inline_hits_count_as_searches_once_the_reader_stops_typing(
    bot: Running, fake: FakeTelegram
) -> None:
    # the reader types on: "Trans", then "Transformer" (twice); only the last query of the
    # burst counts. Another reader's query is a search of its own; an empty query none
    bot.service.engagement.searches.settle = 3600.0  # (settled below, not by waiting)
    for word in ("Trans", "Transformer"):
        await fake.wait_for_inline_answer(fake.inject_inline_query(ANN, word))
    typed = await fake.wait_for_inline_answer(fake.inject_inline_query(ANN, "Transformer"))
    other = await fake.wait_for_inline_answer(fake.inject_inline_query(BOB, "模型"))
    await fake.wait_for_inline_answer(fake.inject_inline_query(CAROL, ""))
    assert typed.results and other.results
    bot.service.engagement.searches.settle_all()
    stories = await bot.service.dashboard.stories(days=30)
    found = {f"{r.date}:{r.story}": r.found for r in stories if r.found}
    expected: dict[str, int] = {}
    for result in [*typed.results, *other.results]:
        day, code = result.id.split(":")
        story = {"h": "headline", "c": "classic"}.get(code[0], f"brief-{code[1:]}")
        expected[f"{day}:{story}"] = expected.get(f"{day}:{story}", 0) + 1
    assert found == expected
    # /search hits land in the same counts
    await bot.command("/search Transformer")
    again = await bot.service.dashboard.stories(days=30)
    assert sum(r.found for r in again) > sum(found.values())


async def test_an_unsubscribe_is_counted_with_its_reason(bot: Running) -> None:
    await bot.command("/subscribe")
    await bot.command("/unsubscribe")
    await bot.command("/unsubscribe")  # not subscribed: nothing ended
    view = await bot.service.dashboard.audience(days=7)
    assert ("telegram", "/unsubscribe", 1) in view.reasons
    assert not any(r == "未记录 / not recorded" for _, r, _ in view.reasons)
