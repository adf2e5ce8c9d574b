"""The Feishu app bot end to end: the real service and adapter, lark-oapi's own long-connection
client and event dispatcher, and the Feishu app double (tests/fakes/feishu_app.py)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bots.feishu.app import FeishuAppAdapter
from bots.feishu.handlers import menu_command, with_reply_buttons
from bots.feishu.menu import bot_menu
from bots.feishu.spec import FEISHU_LIMITS
from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.commands.catalogue import menu
from digest_core.commands.requests import Choice, Reply
from digest_core.rendering import feishu as feishu_render
from digest_core.service.root import DigestService
from digest_core.testing import PinnedClock, scaled_limits
from tests.bots.telegram.harness import ARCHIVE, TODAY, ZONE, local
from tests.fakes.feishu_app import FakeFeishuApp

# the Feishu SDK's import takes 2-4 s of CPU (every API's models): one worker pays it for
# all of the tests that load it in-process (tests/xdist_groups.py), and make check leaves
# them out (slow)
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.xdist_group("lark"),
    pytest.mark.slow,
]

ANN = "ou_ann00000000000000000000000000"
BOB = "ou_bob00000000000000000000000000"
ADMIN = "ou_admin000000000000000000000000"
GROUP = "oc_group0000000000000000000000000"
NEXT = TODAY + dt.timedelta(days=1)


def write_config(tmp: Path, fs: FakeFeishuApp, **feishu: object) -> Path:
    archive = tmp / "archive"
    archive.mkdir(exist_ok=True)
    for src in ARCHIVE.iterdir():
        shutil.copy(src, archive / src.name)
    table = {"app_id": fs.app_id, "api_base": fs.url, "chats": [GROUP], "admins": [ADMIN], **feishu}
    lines = [
        f'timezone = "{ZONE}"',
        f'archive_dir = "{archive}"',
        f'database_url = "sqlite+aiosqlite:///{tmp / "digest.db"}"',
        "[schedule]",
        "enabled = false",
        "[delivery]",
        "backoff_base_seconds = 0.01",
        "backoff_max_seconds = 0.05",
        "[feishu]",
        *(f"{k} = {json.dumps(v)}" for k, v in table.items()),
    ]
    path = tmp / "digest-bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class Bot:
    service: DigestService
    adapter: FeishuAppAdapter
    fs: FakeFeishuApp

    async def say(self, chat: str, sender: str, text: str, *, mention: bool = False) -> None:
        delivery = await self.fs.push(
            self.fs.message_event(chat, sender, text, mention_bot=mention)
        )
        assert delivery.acks[-1]["code"] == 200  # acked within Feishu's 3 s

    async def settled(self) -> None:
        """Every command handed to the bot so far answered."""
        assert await self.adapter.in_flight.idle(10.0)
        await self.fs.wait_until_answered()


@asynccontextmanager
async def app_bot(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, fs: FakeFeishuApp, **feishu: object
) -> AsyncIterator[Bot]:
    for chat in (ANN, BOB, ADMIN):
        fs.add_chat(chat, "p2p")
    fs.add_chat(GROUP, "group")
    monkeypatch.setenv("DIGEST_BOT_FEISHU__APP_SECRET", fs.app_secret)
    if feishu.get("mode") == "http":
        monkeypatch.setenv("DIGEST_BOT_FEISHU__ENCRYPT_KEY", fs.encrypt_key)
        monkeypatch.setenv("DIGEST_BOT_FEISHU__VERIFICATION_TOKEN", fs.verification_token)
    settings = load_settings(write_config(tmp, fs, **feishu))
    async with open_service(settings, only="feishu", clock=PinnedClock(local(TODAY, 9))) as service:
        adapter = service.platforms["feishu"]
        assert isinstance(adapter, FeishuAppAdapter)
        adapter.limits = scaled_limits(FEISHU_LIMITS, 20)
        await adapter.start(service)
        try:
            yield Bot(service, adapter, fs)
        finally:
            await adapter.stop()


def text_of(message: dict[str, Any]) -> str:
    return feishu_render.card_preview(feishu_render.Message({"card": message["content"]}))


async def test_today_in_a_private_chat_is_answered_with_cards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.say(ANN, ANN, "/today")
        sent = await fs.wait_for_messages(ANN, 2)
        assert all(m["msg_type"] == "interactive" for m in sent)
        assert "AI 技术日报 · 2026-11-27" in text_of(sent[0])
        assert "【经典回顾】" in text_of(sent[-1])
        assert all(m["uuid"] is None for m in sent)  # replies are not ledger parts


async def test_groups_answer_mentions_only_and_private_commands_point_to_a_dm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.say(GROUP, ANN, "/today")  # no mention: not for us
        await bot.say(GROUP, ANN, "/headline", mention=True)
        await bot.say(GROUP, ANN, "/subscribe", mention=True)
        await bot.settled()
        texts = [text_of(m) for m in fs.sent(GROUP)]
        assert any("【重点】" in t for t in texts)
        assert not any("【简讯】" in t for t in texts)  # /today (unmentioned) was not answered
        assert sum("请私信机器人发送 /subscribe" in t for t in texts) == 1
        assert fs.sent(ANN) == []


async def test_a_section_button_on_the_group_post_answers_the_presser_privately(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        report = await bot.service.post(TODAY, platforms=["feishu"])
        assert report
        post = fs.sent(GROUP)
        assert post and all(m["uuid"] for m in post)  # ledger parts carry their uuid
        [row] = [e for e in post[-1]["content"]["elements"] if e["tag"] == "action"]
        classic = next(b for b in row["actions"] if b["text"]["content"] == "经典回顾")
        delivery = await fs.push(
            fs.card_event(BOB, classic["value"], chat_id=GROUP, message_id=post[-1]["message_id"])
        )
        assert delivery.answer() == {
            "toast": {"type": "info", "content": "经典回顾：已私信发送 / sent to you in private"}
        }
        [answer] = fs.sent(BOB)
        assert "【经典回顾】" in text_of(answer) and "【重点】" not in text_of(answer)
        assert len(fs.sent(GROUP)) == len(post)  # nothing more in the group


async def test_a_subscriber_gets_the_next_days_post_privately_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.say(ANN, ANN, "/subscribe")
        [ack] = await fs.wait_for_messages(ANN, 1)
        assert "已订阅" in text_of(ack)
        await bot.service.post(NEXT, platforms=["feishu"])
        got = fs.sent(ANN)[1:]
        assert got and "2026-11-28" in text_of(got[0])
        await bot.service.post(NEXT, platforms=["feishu"])  # a second run sends nothing more
        await bot.settled()
        assert fs.sent(ANN)[1:] == got
        assert fs.sent(BOB) == []


async def test_the_bot_menu_runs_the_catalogues_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [item.event_key for item in bot_menu()]
    assert keys == [s.name for s in menu(admin=False) if menu_command(s.name)]
    assert "today" in keys and all(1 <= len(k) <= 30 for k in keys)
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await fs.push(fs.menu_event(ANN, "classic"))
        [answer] = await fs.wait_for_messages(ANN, 1)
        assert "【经典回顾】" in text_of(answer)
        await fs.push(fs.menu_event(ANN, "nosuchcommand"))
        await bot.settled()
        assert len(fs.sent(ANN)) == 1


async def test_the_http_callback_verifies_decrypts_and_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        FakeFeishuApp() as fs,
        app_bot(tmp_path, monkeypatch, fs, mode="http", callback_listen="127.0.0.1:0") as bot,
    ):
        receiver = bot.adapter._receiver
        assert receiver is not None and not fs.connections  # no long connection in this mode
        url = f"http://127.0.0.1:{receiver.port}/feishu/events"  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as session:
            assert await fs.post_callback(session, url, fs.verification_event("c-9")) == (
                200,
                {"challenge": "c-9"},
            )
            forged = fs.message_event(ANN, ANN, "/today")
            status, _ = await fs.post_callback(session, url, forged, sign="f" * 64)
            assert status == 500
            status, _ = await fs.post_callback(session, url, fs.message_event(ANN, ANN, "/classic"))
            assert status == 200
            [answer] = await fs.wait_for_messages(ANN, 1)
            assert "【经典回顾】" in text_of(answer)
            await bot.settled()
            assert len(fs.sent(ANN)) == 1  # the forged one did nothing


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The buttons of a sent card by label: their values."""
    elements = message["content"]["elements"]
    actions = [a for e in elements if e["tag"] == "action" for a in e["actions"]]
    return {a["text"]["content"]: a["value"] for a in actions}


PREVIOUS = "← 上一期 / previous"
NEXT_ISSUE = "下一期 / next →"


async def press(bot: Bot, user: str, message: dict[str, Any], label: str) -> Any:
    """``user`` presses the button ``label`` of ``message`` (in their private chat)."""
    value = buttons(message)[label]
    event = bot.fs.card_event(user, value, chat_id=user, message_id=message["message_id"])
    return await bot.fs.push(event)


async def test_previous_issue_on_todays_card_and_no_next_past_the_embargo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.say(ANN, ANN, "/today")
        sent = await fs.wait_for_messages(ANN, 2)
        await bot.settled()
        sent = fs.sent(ANN)
        last = buttons(sent[-1])
        # 2026-11-28 is in the archive but embargoed at 09:00 of the 27th: never offered
        assert PREVIOUS in last and NEXT_ISSUE not in last
        assert all("2026-11-28" not in v["data"] for m in sent for v in buttons(m).values())
        assert last[PREVIOUS] == {"data": "rd:issue 2026-11-26"}
        delivery = await press(bot, ANN, sent[-1], PREVIOUS)
        assert delivery.answer() == {"toast": {"type": "info", "content": "✓"}}
        await bot.settled()
        got = fs.sent(ANN)[len(sent) :]
        assert got and "AI 技术日报 · 2026-11-26" in text_of(got[0])
        older = buttons(got[-1])
        # the 26th is the oldest: no previous; its next is the 27th
        assert PREVIOUS not in older and older[NEXT_ISSUE] == {"data": "rd:issue 2026-11-27"}


async def test_an_admin_sees_the_next_issue_the_embargo_holds_from_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.say(ADMIN, ADMIN, "/issue 2026-11-27")
        await fs.wait_for_messages(ADMIN, 1)
        await bot.settled()
        sent = fs.sent(ADMIN)
        assert buttons(sent[-1])[NEXT_ISSUE] == {"data": "rd:issue 2026-11-28"}
        await bot.say(BOB, BOB, "/issue 2026-11-27")
        await fs.wait_for_messages(BOB, 1)
        await bot.settled()
        assert NEXT_ISSUE not in buttons(fs.sent(BOB)[-1])
        # a reader who types the data of the admin's button gets no embargoed issue
        forged = {"data": "rd:issue 2026-11-28"}
        await fs.push(fs.card_event(BOB, forged, chat_id=BOB, message_id=sent[-1]["message_id"]))
        await bot.settled()
        texts = [text_of(m) for m in fs.sent(BOB)]
        assert not any("AI 技术日报 · 2026-11-28" in t for t in texts)


async def test_a_brief_button_under_the_briefs_shows_that_brief(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.say(ANN, ANN, "/briefs")
        await fs.wait_for_messages(ANN, 1)
        await bot.settled()
        sent = fs.sent(ANN)
        last = buttons(sent[-1])
        briefs = [label for label in last if label.startswith("简讯 ")]
        assert briefs and briefs[0] == "简讯 1"
        assert last["简讯 2"] == {"data": "rd:brief 2 2026-11-27"}
        for message in sent:  # within the card limits, buttons and all
            assert feishu_render.check_card({"card": message["content"]}, buttons=True) == []
        issue = bot.service.archive.on(TODAY)
        await press(bot, ANN, sent[-1], "简讯 2")
        await bot.settled()
        [answer] = fs.sent(ANN)[len(sent) :]
        assert issue.brief(2).title in text_of(answer)
        assert issue.brief(1).title not in text_of(answer)


def test_issue_buttons_on_a_full_card_drop_the_last_briefs_and_keep_the_card_in_limits() -> None:
    budget = (
        feishu_render.CardLimits.request_maxlen
        - feishu_render.CardLimits.envelope_overhead
        - feishu_render.CardLimits.button_reserve
    )
    card = feishu_render.card_notice("x")[0]
    text = card.payload["card"]["elements"][0]["text"]
    while feishu_render.card_body_size(card.payload["card"]) < budget - 3:
        text["content"] += "字"  # the card filled to the renderer's budget
    assert feishu_render.check_card(card.payload) == []
    nav = (Choice(PREVIOUS, "rd:issue 2026-11-26"), Choice(NEXT_ISSUE, "rd:issue 2026-11-28"))
    briefs = tuple(Choice(f"简讯 {n}", f"rd:brief {n} 2026-11-27") for n in range(1, 9))
    settings = (Choice("订阅 / subscribe", "rd:subscribe"),)
    reply = Reply([card], choices=(settings,), navigation=(nav, briefs))
    [drawn] = with_reply_buttons(reply)
    assert feishu_render.check_card(drawn.payload, buttons=True) == []
    labels = list(buttons({"content": drawn.payload["card"]}))
    assert labels[:3] == ["订阅 / subscribe", PREVIOUS, NEXT_ISSUE]  # choices and nav stay
    shown = labels[3:]
    assert shown == [f"简讯 {n}" for n in range(1, len(shown) + 1)] and 0 < len(shown) < 8
    # the same buttons fit whole on a short card
    [short] = with_reply_buttons(Reply(feishu_render.card_notice("x"), navigation=(nav, briefs)))
    assert len(buttons({"content": short.payload["card"]})) == 10


async def test_the_briefs_section_button_answers_with_brief_and_issue_buttons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs, app_bot(tmp_path, monkeypatch, fs) as bot:
        await bot.service.post(TODAY, platforms=["feishu"])
        post = fs.sent(GROUP)
        value = buttons(post[-1])["简讯"]
        await fs.push(fs.card_event(BOB, value, chat_id=GROUP, message_id=post[-1]["message_id"]))
        await bot.settled()
        answer = fs.sent(BOB)
        assert answer and "【简讯】" in text_of(answer[0])
        last = buttons(answer[-1])
        assert last[PREVIOUS] == {"data": "rd:issue 2026-11-26"} and NEXT_ISSUE not in last
        await press(bot, BOB, answer[-1], "简讯 1")
        await bot.settled()
        [brief] = fs.sent(BOB)[len(answer) :]
        assert bot.service.archive.on(TODAY).brief(1).title in text_of(brief)
        assert len(fs.sent(GROUP)) == len(post)  # presses answer privately only
