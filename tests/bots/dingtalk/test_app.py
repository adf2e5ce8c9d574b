"""The DingTalk app robot end to end: the real service and adapter, dingtalk-stream's own
Stream client, and the DingTalk app double (tests/fakes/dingtalk_app.py)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bots.dingtalk.app import DingTalkAppAdapter
from bots.dingtalk.spec import DINGTALK_LIMITS
from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.commands import MAX_REPLY_MESSAGES
from digest_core.loading import load_issue
from digest_core.rendering import dingtalk as dingtalk_render
from digest_core.service.root import DigestService
from digest_core.testing import PinnedClock, scaled_limits
from tests.bots.telegram.harness import ARCHIVE, TODAY, ZONE, local
from tests.fakes.dingtalk_app import FakeDingTalkApp

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ANN, BOB = "staff-ann", "staff-bob"
GROUP = "cidGroup0000000000000000=="
NEXT = TODAY + dt.timedelta(days=1)


def write_config(tmp: Path, fake: FakeDingTalkApp, **dingtalk: object) -> Path:
    archive = tmp / "archive"
    archive.mkdir(exist_ok=True)
    for src in ARCHIVE.iterdir():
        shutil.copy(src, archive / src.name)
    table = {"client_id": fake.client_id, "openapi_base": fake.url, "chats": [GROUP], **dingtalk}
    lines = [
        f'timezone = "{ZONE}"',
        f'archive_dir = "{archive}"',
        f'database_url = "sqlite+aiosqlite:///{tmp / "digest.db"}"',
        "[schedule]",
        "enabled = false",
        "[delivery]",
        "backoff_base_seconds = 0.01",
        "backoff_max_seconds = 0.05",
        "[dingtalk]",
        *(f"{k} = {json.dumps(v)}" for k, v in table.items()),
    ]
    path = tmp / "digest-bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class Bot:
    service: DigestService
    adapter: DingTalkAppAdapter
    fake: FakeDingTalkApp

    async def say(self, sender: str, text: str, *, group: str | None = None) -> None:
        push = await self.fake.push(self.fake.robot_message(sender, text, group=group))
        assert push.acks and push.acks[-1]["code"] == 200  # the SDK acked it

    async def settled(self) -> None:
        assert await self.adapter.in_flight.idle(10.0)
        await self.fake.wait_until_answered()


@asynccontextmanager
async def app_robot(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeDingTalkApp, **dingtalk: object
) -> AsyncIterator[Bot]:
    for user in (ANN, BOB):
        fake.add(user, "user")
    fake.add(GROUP, "group")
    monkeypatch.setenv("DIGEST_BOT_DINGTALK__CLIENT_SECRET", fake.client_secret)
    settings = load_settings(write_config(tmp, fake, **dingtalk))
    clock = PinnedClock(local(TODAY, 9))
    async with open_service(settings, only="dingtalk", clock=clock) as service:
        adapter = service.platforms["dingtalk"]
        assert isinstance(adapter, DingTalkAppAdapter)
        adapter.limits = scaled_limits(DINGTALK_LIMITS, 60)
        await adapter.start(service)
        try:
            yield Bot(service, adapter, fake)
        finally:
            await adapter.stop()


def text_of(message: dict[str, Any]) -> str:
    return str(message["msgParam"].get("text", ""))


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """An ActionCard's buttons: label -> the command its link sends."""
    param = message["msgParam"]
    if "singleTitle" in param:  # the one-button template
        param = {"actionTitle1": param["singleTitle"], "actionURL1": param["singleURL"]}
    out = {}
    for n in range(1, 6):
        if f"actionTitle{n}" in param:
            url = param[f"actionURL{n}"]
            assert url.startswith(dingtalk_render.SEND_MESSAGE_LINK)
            content = url.removeprefix(dingtalk_render.SEND_MESSAGE_LINK)
            out[param[f"actionTitle{n}"]] = urllib.parse.unquote(content)
    return out


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_today_privately_over_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDingTalkApp() as fake, app_robot(tmp_path, monkeypatch, fake) as bot:
        assert {"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"} in fake.subscriptions
        await bot.say(ANN, "/today")
        issue = load_issue(ARCHIVE / f"{TODAY}.txt")
        expected = min(len(dingtalk_render.render(issue)), MAX_REPLY_MESSAGES)
        sent = await fake.wait_for_messages(ANN, expected)
        await bot.settled()
        assert len(fake.sent(ANN)) == expected
        assert all(m["msgKey"] == "sampleMarkdown" for m in sent[:-1])
        assert "2026-11-27" in sent[0]["msgParam"]["title"]
        assert "重点" in text_of(sent[0])
        # the last is an ActionCard: the previous issue; 2026-11-28 is embargoed, so no next
        assert sent[-1]["msgKey"].startswith("sampleActionCard")
        assert buttons(sent[-1]) == {"← 上一期 / previous": "/issue 2026-11-26"}


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_brief_button_sends_that_briefs_command_privately(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDingTalkApp() as fake, app_robot(tmp_path, monkeypatch, fake) as bot:
        await bot.say(ANN, "/briefs")
        await fake.wait_for_messages(ANN, 1)
        await bot.settled()
        sent = fake.sent(ANN)
        actions = buttons(sent[-1])
        assert actions["简讯 2"] == "/brief 2 2026-11-27"
        assert len(actions) <= dingtalk_render.Limits.actions_per_card
        await bot.say(ANN, actions["简讯 2"])  # DingTalk's client sends it as the reader
        await bot.settled()
        [answer] = fake.sent(ANN)[len(sent) :]
        issue = load_issue(ARCHIVE / f"{TODAY}.txt")
        assert issue.brief(2).title in text_of(answer)
        assert issue.brief(1).title not in text_of(answer)
        # in a group the same reply carries no issue buttons (the link would post there)
        await bot.say(ANN, "/briefs", group=GROUP)
        await bot.settled()
        assert all(m["msgKey"] == "sampleMarkdown" for m in fake.sent(GROUP))


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_groups_answer_mentions_and_send_subscriptions_to_a_private_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDingTalkApp() as fake, app_robot(tmp_path, monkeypatch, fake) as bot:
        await bot.say(ANN, "/headline", group=GROUP)
        await bot.say(ANN, "/subscribe", group=GROUP)
        await bot.settled()
        texts = [text_of(m) for m in fake.sent(GROUP)]
        assert any("重点" in t for t in texts)
        assert sum("请私信机器人发送 /subscribe" in t for t in texts) == 1
        assert fake.sent(ANN) == []


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_subscribe_get_the_next_post_once_and_press_a_section_button(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDingTalkApp() as fake, app_robot(tmp_path, monkeypatch, fake) as bot:
        await bot.say(ANN, "/subscribe")
        [ack] = await fake.wait_for_messages(ANN, 1)
        assert "已订阅" in text_of(ack)
        await bot.service.post(NEXT, platforms=["dingtalk"])
        post = fake.sent(ANN)[1:]
        assert post and "2026-11-28" in post[0]["msgParam"]["title"]
        # the group's post is markdown; the reader's last message an ActionCard
        assert all(m["msgKey"] == "sampleMarkdown" for m in fake.sent(GROUP))
        assert post[-1]["msgKey"].startswith("sampleActionCard")
        command = buttons(post[-1])["经典回顾"]
        assert command == "/classic 2026-11-28"
        await bot.service.post(NEXT, platforms=["dingtalk"])  # sends nothing more
        await bot.settled()
        assert fake.sent(ANN)[1:] == post
        # the press: DingTalk's client sends the button's command as the reader
        await bot.say(ANN, command)
        answer = await fake.wait_for_messages(ANN, len(post) + 2)
        assert "经典回顾" in text_of(answer[-1]) and "重点" not in text_of(answer[-1])
        assert fake.sent(BOB) == []


async def test_the_http_callback_checks_timestamp_and_sign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        FakeDingTalkApp() as fake,
        app_robot(tmp_path, monkeypatch, fake, mode="http", callback_listen="127.0.0.1:0") as bot,
        aiohttp.ClientSession() as session,
    ):
        assert not fake.connections  # no stream in this mode
        receiver = bot.adapter._receiver
        url = f"http://127.0.0.1:{receiver.port}/dingtalk/messages"  # type: ignore[union-attr]
        assert (
            await fake.post_callback(session, url, fake.robot_message(ANN, "/today"), sign="forged")
            == 403
        )
        assert await fake.post_callback(session, url, fake.robot_message(ANN, "/classic")) == 200
        [answer] = await fake.wait_for_messages(ANN, 1)
        assert "经典回顾" in text_of(answer)
        await bot.settled()
        assert len(fake.sent(ANN)) == 1
