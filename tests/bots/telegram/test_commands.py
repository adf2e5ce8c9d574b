"""Readers' and admins' commands end to end: the real Application polling the Bot API double."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from pathlib import Path

import httpx
import pytest

from bots.runtime import run
from digest_core.commands.catalogue import CATALOGUE, menu, spec
from tests import ports
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    BOB,
    BOT,
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
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


# ---------------------------------------------------------------- every reader command


@pytest.mark.parametrize(
    ("command", "n", "expected"),
    [
        ("/start", 1, ["欢迎", "/today"]),
        ("/start 2026-11-26", 1, ["投机解码遇上大批量"]),  # deep link: that issue
        ("/help", 1, ["/search", "/subscribe"]),
        ("/today", 2, ["2026年11月27日", "KV 缓存为什么要分页", "【简讯】"]),
        ("/headline", 2, ["【重点】", "KV 缓存为什么要分页"]),
        ("/briefs", 1, ["【简讯】", "1. 长上下文评测"]),
        ("/brief 2", 1, ["2. 梯度累积与学习率"]),
        ("/classic", 1, ["【经典回顾】"]),
        ("/toc", 1, ["【重点】", "【简讯】"]),
        ("/issue 2026-11-26", 1, ["2026年11月26日"]),
        ("/issue 2026-11-28", 1, ["2026-11-28 的日报还没有发布", "08:00"]),  # tomorrow's
        ("/issue yesterday", 1, ["不是日期", "/issue YYYY-MM-DD"]),
        ("/issue 2020-01-01", 1, ["2020-01-01"]),
        ("/search 投机解码", 1, ["2026-11-26", "投机解码"]),
        ("/brief 99", 1, ["没有第 99 条"]),
        ("/nonsense", 1, ["未知命令 /nonsense"]),
        ("/TODAY@digest_test_bot", 2, ["2026年11月27日"]),
    ],
)
async def test_each_command_is_answered_in_private(
    bot: Running, command: str, n: int, expected: list[str]
) -> None:
    replies = await bot.command(command, n=n)
    text = visible(replies)
    for fragment in expected:
        assert fragment in text, (fragment, text[:300])
    assert all(m.parse_mode == "HTML" for m in replies)


async def test_today_links_the_headline_source_only(bot: Running) -> None:
    replies = await bot.command("/today", n=2)
    previews = [m.link_preview_options for m in replies]
    assert previews[0] == {"is_disabled": False, "url": "https://arxiv.org/abs/2309.06180"}
    assert previews[1] == {"is_disabled": True}
    assert all(m.reply_markup is None for m in replies)  # buttons only on channel posts


async def test_commands_in_a_group_need_our_suffix_or_none(
    bot: Running, fake: FakeTelegram
) -> None:
    replies = await bot.command(f"/headline@{BOT}", user=ANN, chat=GROUP, n=2)
    assert "【重点】" in visible(replies)
    fake.inject_message(GROUP, ANN, "/today@some_other_bot")
    fake.inject_message(GROUP, ANN, "/weather")  # another bot's command, no suffix
    fake.inject_message(GROUP, ANN, "/classic")  # ours: answered, and it comes last
    sent = await fake.wait_for_messages(GROUP, 3)
    assert "【经典回顾】" in sent[2].text
    await bot.settled()
    assert len(fake.sent(GROUP)) == 3


async def test_subscribing_in_a_group_explains_how(bot: Running, fake: FakeTelegram) -> None:
    replies = await bot.command("/subscribe", user=ANN, chat=GROUP)
    assert f"@{BOT}" in replies[0].text and "/subscribe" in replies[0].text
    assert await bot.service.ledger.subscribers("telegram") == []


async def test_subscribe_and_unsubscribe_in_private(bot: Running) -> None:
    assert "已订阅" in (await bot.command("/subscribe"))[0].text
    assert "已经订阅" in (await bot.command("/subscribe"))[0].text
    subs = await bot.service.ledger.subscribers("telegram")
    assert [t.id for t in subs] == [str(ANN)]
    assert "已取消订阅" in (await bot.command("/unsubscribe"))[0].text
    assert await bot.service.ledger.subscribers("telegram") == []


async def test_plain_text_in_private_points_to_help(bot: Running) -> None:
    assert "/help" in (await bot.command("hello"))[0].text


async def test_command_menu_is_set_in_chinese_and_english(bot: Running, fake: FakeTelegram) -> None:
    menus = fake.commands
    assert set(menus) == {"", "zh"}
    zh = {c["command"]: c["description"] for c in menus["zh"]}
    en = {c["command"]: c["description"] for c in menus[""]}
    assert zh.keys() == en.keys() == {s.name for s in menu(admin=False)}
    assert zh["today"] == spec("today").zh and en["today"] == spec("today").en
    assert "repost" not in zh  # admin commands only in the admins' own menu
    # every menu entry is a command the bot answers
    assert set(zh) <= set(bot.service.commands.names)


async def test_admin_menu_lists_every_admin_command_in_both_languages(
    bot: Running, fake: FakeTelegram
) -> None:
    scoped = {
        lang: {c["command"]: c["description"] for c in cmds}
        for (scope, lang), cmds in fake.all_commands.items()
        if json.loads(scope) == {"type": "chat", "chat_id": ADMIN}
    }
    assert set(scoped) == {"", "zh"}
    admin = {s.name for s in CATALOGUE if s.admin}
    readers = {c["command"] for c in fake.commands[""]}
    # the admins' own menu is the readers' and every admin command of the catalogue
    assert set(scoped[""]) - readers == admin and set(scoped[""]) == set(scoped["zh"])
    assert admin <= set(scoped[""]) and admin <= set(scoped["zh"])
    assert scoped["zh"]["reactivate"] == spec("reactivate").zh
    assert scoped[""]["reactivate"] == spec("reactivate").en


# ---------------------------------------------------------------- admin commands


async def test_status_for_admins_only(bot: Running) -> None:
    status = await bot.command("/status", user=ADMIN)
    assert "下次推送" in status[0].text and "telegram: 2" in status[0].text
    refused = await bot.command("/status", user=BOB)
    assert "只有管理员" in refused[0].text
    audit = await bot.service.ledger.audit_log(platform="telegram")
    assert [(a.user_id, a.action, a.allowed) for a in audit] == [(str(BOB), "status", False)]


async def test_help_shows_admin_commands_to_admins(bot: Running) -> None:
    assert "/repost" in (await bot.command("/help", user=ADMIN))[0].text
    assert "/repost" not in (await bot.command("/help", user=ANN))[0].text


# ---------------------------------------------------------------- flood protection


async def test_a_flooding_reader_is_told_once_then_ignored(
    bot: Running, fake: FakeTelegram
) -> None:
    for _ in range(8):
        fake.inject_message(BOB, BOB, "/classic")
    sent = await fake.wait_for_messages(BOB, 6)
    await bot.settled()
    sent = fake.sent(BOB)
    slow = [m for m in sent if "请慢一点" in m.text]
    assert len(slow) == 1 and "5" in slow[0].text
    assert len(sent) == 6  # five answers and one "slow down"; the rest ignored
    # another reader is not affected
    assert "【经典回顾】" in (await bot.command("/classic", user=ANN))[0].text


async def test_admins_are_not_rate_limited(bot: Running, fake: FakeTelegram) -> None:
    for _ in range(7):
        fake.inject_message(ADMIN, ADMIN, "/brief 1")
    sent = await fake.wait_for_messages(ADMIN, 7)
    assert not any("请慢一点" in m.text for m in sent)


# ---------------------------------------------------------------- secrets and modes


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_the_token_never_reaches_the_log(
    fake: FakeTelegram,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as bot:
        await bot.command("/today", n=2)
        fake.fail_next(ANN, "server_error")
        fake.inject_message(ANN, ANN, "/classic")
        await bot.settled()
    assert "getUpdates" in caplog.text  # httpx did log the requests ...
    assert fake.token not in caplog.text  # ... without the token
    assert fake.token.split(":")[1] not in caplog.text
    assert fake.token not in repr(settings)


def _free_port() -> int:
    return ports.free_port()


async def test_webhook_mode_checks_the_secret_on_every_request(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tornado", reason="python-telegram-bot[webhooks] is not installed")
    port = _free_port()
    config = write_config(
        tmp_path,
        base_url=fake.base_url,
        telegram={
            "mode": "webhook",
            "webhook_url": "https://bot.example.org/tg/hook",
            "webhook_port": port,
        },
    )
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__WEBHOOK_SECRET", "s3cret-Value_1")
    settings = settings_for(config, fake, monkeypatch)
    async with running_bot(settings, fake, scale=100):
        assert fake.webhook is not None
        assert fake.webhook["url"] == "https://bot.example.org/tg/hook"
        assert fake.webhook["secret_token"] == "s3cret-Value_1"
        update = {
            "update_id": 1,
            "message": {
                "message_id": 1, "date": 0, "text": "/classic",
                "chat": {"id": ANN, "type": "private", "first_name": "Ann"},
                "from": {"id": ANN, "is_bot": False, "first_name": "Ann"},
                "entities": [{"type": "bot_command", "offset": 0, "length": 8}],
            },
        }  # fmt: skip
        url = f"http://127.0.0.1:{port}/tg/hook"
        async with httpx.AsyncClient() as client:
            missing = await client.post(url, json=update)
            wrong = await client.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "nope"}
            )
            assert (missing.status_code, wrong.status_code) == (403, 403)
            assert fake.sent(ANN) == []
            ok = await client.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret-Value_1"}
            )
            assert ok.status_code == 200
        sent = await fake.wait_for_messages(ANN, 1)
        assert "【经典回顾】" in sent[0].text


def test_webhook_mode_without_a_secret_is_a_config_error(tmp_path: Path) -> None:
    from bots.registry import load_settings
    from digest_core.errors import ConfigError

    config = write_config(
        tmp_path, base_url="http://127.0.0.1:1/bot",
        telegram={"mode": "webhook", "webhook_url": "https://bot.example.org/hook"},
    )  # fmt: skip
    with pytest.raises(ConfigError, match="webhook_secret"):
        load_settings(config)
    config.write_text(config.read_text().replace("https://bot", "http://bot"))
    with pytest.raises(ConfigError, match="https"):
        load_settings(config)


# ---------------------------------------------------------------- the real `run`


async def test_digest_bot_run_answers_and_stops_cleanly(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    stop = asyncio.Event()
    task = asyncio.create_task(
        run(settings, only="telegram", clock=PinnedClock(local(TODAY, 9)), stop=stop)
    )
    try:
        fake.inject_message(ANN, ANN, "/headline")
        sent = await fake.wait_for_messages(ANN, 2)
        assert "【重点】" in sent[0].text
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert task.exception() is None
    before = len(fake.requests)
    await fake.wait_disconnected()  # the bot let go of the API: nothing of it can poll now
    assert len(fake.requests) == before  # stopped: no more polling


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_digest_bot_run_builds_the_search_index_at_start(
    fake: FakeTelegram,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a large archive the first /search took seconds: `run` builds the index in a
    background thread at start, before any reader searches."""
    path = write_config(tmp_path, base_url=fake.base_url)
    archive = tmp_path / "archive"
    text = (archive / "2026-11-26.txt").read_bytes()
    for n in range(300):  # 300 more issues, back from 2025-12-31
        (archive / f"{dt.date(2025, 12, 31) - dt.timedelta(days=n)}.txt").write_bytes(text)
    settings = settings_for(path, fake, monkeypatch)
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="digest_core.archive")
    task = asyncio.create_task(
        run(settings, only="telegram", clock=PinnedClock(local(TODAY, 9)), stop=stop)
    )
    try:
        async with asyncio.timeout(20):
            while not any("search index built" in r.getMessage() for r in caplog.records):
                assert not task.done(), task
                await asyncio.sleep(0.05)
        [built] = [r.getMessage() for r in caplog.records if "search index built" in r.getMessage()]
        assert "(305 issues" in built, built  # every file, with no search asked
        assert not fake.sent(ANN)  # nobody asked anything
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert task.exception() is None


async def test_admin_output_asked_in_a_group_goes_to_the_admin_privately(
    bot: Running, fake: FakeTelegram
) -> None:
    before = len(fake.sent(ADMIN))
    fake.inject_message(GROUP, ADMIN, "/status")
    status = (await fake.wait_for_messages(ADMIN, before + 1))[before]
    assert "下次推送 / next post" in status.text
    assert fake.sent(GROUP) == []  # nothing about targets in front of the group
    fake.block(ADMIN)  # as if the admin never started the bot
    [hint] = await bot.command("/status", user=ADMIN, chat=GROUP)
    assert "/start" in hint.text and "next post" not in hint.text


# ---------------------------------------------------------------- replies: paced, 429s waited out


async def test_a_reply_hit_by_a_429_is_sent_after_the_wait(
    bot: Running, fake: FakeTelegram
) -> None:
    fake.fail_next(ANN, "flood", times=2, retry_after=0.05)
    [reply] = await bot.command("/help")
    assert "/search" in reply.text
    calls = [c for c in fake.calls("sendMessage") if str(c.chat_id) == str(ANN)]
    assert [c.status for c in calls] == [429, 429, 200]
    assert calls[2].at - calls[1].at >= 0.05 - 1e-3  # Retry-After was honoured


async def test_a_reply_is_one_send_per_message_in_the_adapter(
    bot: Running, fake: FakeTelegram
) -> None:
    """A server error is not retried (the reply may have arrived); the bot answers the
    next command as usual."""
    fake.fail_next(ANN, "server_error", status=502)
    fake.inject_message(ANN, ANN, "/help")
    [reply] = await bot.command("/help")
    assert "/search" in reply.text
    await bot.settled()  # /help handled: a retry would have been sent by now
    statuses = [c.status for c in fake.calls("sendMessage") if str(c.chat_id) == str(ANN)]
    assert statuses == [502, 200]
