"""Forum topics end to end: the real service and PTB against the double. A channel entry naming
a topic (``-100…:42``) gets the post, its corrections and its pin there; a command sent in a
topic is answered in it; a closed topic is refused as Telegram refuses it; doctor checks it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.cli.doctor import run_checks
from bots.doctor import Status
from bots.registry import load_settings
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    CHANNEL,
    TODAY,
    Running,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram, FakeTopic

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

FORUM = -1005550001  # a supergroup with topics on
PLAIN = -1005550002  # a supergroup without
BRIEF = "单根“针”的检索测试已经很难拉开模型差距。"


@pytest.fixture
async def topic(fake: FakeTelegram) -> FakeTopic:
    fake.add_chat(FORUM, "supergroup", title="AI 论坛", forum=True)
    fake.add_chat(PLAIN, "supergroup", title="No topics")
    fake.add_topic(FORUM, "闲聊")  # another topic, created first: ids are message ids
    return fake.add_topic(FORUM, "日报")


@pytest.fixture
async def bot(
    fake: FakeTelegram, topic: FakeTopic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    path = write_config(
        tmp_path,
        base_url=fake.base_url,
        channels=[f"{FORUM}:{topic.id}", str(CHANNEL)],
        telegram={"pin": True},
    )
    async with running_bot(settings_for(path, fake, monkeypatch), fake, scale=100) as running:
        yield running


async def test_a_topic_gets_the_post_its_correction_and_its_pin_there(
    bot: Running, fake: FakeTelegram, topic: FakeTopic
) -> None:
    [report] = await bot.service.post(TODAY)

    assert report.ok and report.sent == 4
    posted = fake.sent(FORUM)
    assert len(posted) == 2 and [m.message_thread_id for m in posted] == [topic.id] * 2
    assert all(int(m.params["message_thread_id"]) == topic.id for m in posted)
    assert all(m.message_thread_id is None for m in fake.sent(CHANNEL))
    assert fake.chats[FORUM].pinned == [posted[0].message_id]  # the post's first message
    sends = len(fake.sent())

    bot.rewrite_issue(BRIEF, "单根“针”的检索测试已经无法拉开模型之间的差距。")
    [corrected] = await bot.service.correct(TODAY)

    assert corrected.edited == 2 and corrected.ok  # the second part, in the topic and the channel
    assert len(fake.sent()) == sends  # edited in place: nothing new
    first, second = fake.sent(FORUM)
    assert first.edits == [] and len(second.edits) == 1
    assert "已经无法拉开模型之间的差距" in second.text
    assert fake.chats[FORUM].messages[second.message_id]["message_thread_id"] == topic.id


async def test_a_command_in_a_topic_is_answered_in_it(
    bot: Running, fake: FakeTelegram, topic: FakeTopic
) -> None:
    fake.inject_message(FORUM, ANN, "/help", message_thread_id=topic.id)
    [answer] = await fake.wait_for_messages(FORUM, 1)
    assert answer.message_thread_id == topic.id and "/today" in answer.text

    fake.inject_message(FORUM, ANN, "/help")  # in the General topic: no thread id
    _, general = await fake.wait_for_messages(FORUM, 2)
    assert general.message_thread_id is None and "message_thread_id" not in general.params


async def test_a_closed_topic_is_refused_and_its_target_left_until_reactivated(
    bot: Running, fake: FakeTelegram, topic: FakeTopic
) -> None:
    fake.close_topic(FORUM, topic.id)

    [report] = await bot.service.post(TODAY)

    assert [t.id for t in report.gone] == [f"{FORUM}:{topic.id}"] and fake.sent(FORUM) == []
    assert len(fake.sent(CHANNEL)) == 2  # the other channel is not held back
    refused = [r for r in fake.calls("sendMessage") if r.chat_id == FORUM]
    assert [(r.status, r.description) for r in refused] == [(400, "Bad Request: TOPIC_CLOSED")]

    # reopened, the admin reactivates the topic's target by its id, and the post goes there
    fake.close_topic(FORUM, topic.id, closed=False)
    [answer] = await bot.command(f"/reactivate {FORUM}:{topic.id}", user=ADMIN)
    assert f"{FORUM}:{topic.id}" in answer.text and "active again" in answer.text
    [again] = await bot.service.post(TODAY)
    assert again.sent == 2 and [m.message_thread_id for m in fake.sent(FORUM)] == [topic.id] * 2


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_doctor_checks_each_topic(
    fake: FakeTelegram, topic: FakeTopic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = fake.add_topic(FORUM, "归档")
    fake.close_topic(FORUM, closed.id)
    channels = [f"{FORUM}:{topic.id}", f"{FORUM}:{closed.id}", f"{FORUM}:999", f"{PLAIN}:5"]
    path = write_config(tmp_path, base_url=fake.base_url, channels=channels)
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", fake.token)
    checks = {c.name: c for c in await run_checks(load_settings(path)) if c.area == "telegram"}

    assert checks[f"topic {FORUM}:{topic.id}"].status is Status.OK
    assert checks[f"topic {FORUM}:{closed.id}"].status is Status.FAIL
    assert "closed" in checks[f"topic {FORUM}:{closed.id}"].detail
    assert checks[f"topic {FORUM}:999"].status is Status.FAIL
    assert "no topic 999" in checks[f"topic {FORUM}:999"].detail
    assert checks[f"topic {PLAIN}:5"].status is Status.FAIL
    assert "Topics" in checks[f"topic {PLAIN}:5"].fix
    assert fake.sent() == []  # checked without a message
    # what doctor calls fine is where a post goes, and the other way round
    for channel in channels:
        chat, _, thread = channel.partition(":")
        answer = await _send(fake, int(chat), int(thread))
        assert answer == (checks[f"topic {channel}"].status is Status.OK), channel


async def _send(fake: FakeTelegram, chat: int, thread: int) -> bool:
    import httpx

    async with httpx.AsyncClient() as client:
        answer = await client.post(
            f"{fake.base_url}{fake.token}/sendMessage",
            json={"chat_id": chat, "text": "x", "message_thread_id": thread},
        )
    return bool(answer.json()["ok"])
