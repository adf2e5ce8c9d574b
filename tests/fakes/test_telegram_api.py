"""The Telegram Bot API double, exercised with the real python-telegram-bot client."""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeChat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Update,
)
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
)
from telegram.request import HTTPXRequest

from bots.telegram.request import shared_tls
from tests import forkserver
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram, FloodLimits
from tests.fakes.tg_html import HtmlParseError, parse_html, utf16_len

log = logging.getLogger(__name__)

ANN = 1001  # a reader, with a private chat
CHANNEL = -1001234567890
GROUP = -4001
REPO = Path(__file__).resolve().parents[2]


class FrozenClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _register(tg: FakeTelegram) -> FakeTelegram:
    tg.add_chat(ANN, "private", first_name="Ann", username="ann")
    tg.add_chat(CHANNEL, "channel", title="AI Digest", username="ai_digest")
    tg.add_chat(GROUP, "group", title="Team")
    return tg


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def tg(clock: FrozenClock) -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(clock=clock) as fake:
        yield _register(fake)


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    # (the TLS context the bot's own clients share: loading the CAs twice a test cost 80 ms)
    requests = [HTTPXRequest(httpx_kwargs=shared_tls()) for _ in range(2)]
    async with Bot(
        tg.token, base_url=tg.base_url, request=requests[0], get_updates_request=requests[1]
    ) as client:
        yield client


@pytest.fixture
def timedelta_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    # PTB 22 warns on RetryAfter.retry_after unless it may return a timedelta.
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@asynccontextmanager
async def running(app: Application[Any, Any, Any, Any, Any, Any]) -> AsyncIterator[None]:
    """Run an Application inside the test's loop, polling the double."""
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            yield
        finally:
            await app.updater.stop()
            await app.stop()


def _app(tg: FakeTelegram) -> Application[Any, Any, Any, Any, Any, Any]:
    return ApplicationBuilder().token(tg.token).base_url(tg.base_url).build()


# ------------------------------------------------------------------ basics


async def test_get_me_identifies_the_bot(tg: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (tg.bot_id, tg.bot_username, True)
    assert bot.username == "digest_test_bot"


async def test_send_message_returns_a_message_ptb_parses(tg: FakeTelegram, bot: Bot) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("More", callback_data="more:1")]])
    html = '<b>Today</b> in <a href="https://example.com/a">AI</a>\n<blockquote>quote</blockquote>'
    first = await bot.send_message(
        ANN,
        html,
        parse_mode=ParseMode.HTML,
        reply_markup=markup,
        link_preview_options=LinkPreviewOptions(is_disabled=True),
    )
    second = await bot.send_message(ANN, "plain")

    assert (first.message_id, second.message_id) == (1, 2)
    assert first.chat.id == ANN and first.from_user is not None
    assert first.from_user.username == "digest_test_bot"
    assert first.text == "Today in AI\nquote"
    assert [(e.type, e.offset, e.length) for e in first.entities] == [
        ("bold", 0, 5),
        ("text_link", 9, 2),
        ("blockquote", 12, 5),
    ]
    assert first.entities[1].url == "https://example.com/a"
    assert first.reply_markup == markup
    record = tg.sent(ANN)[0]
    assert record.html == html and record.parse_mode == "HTML"
    assert record.link_preview_options == {"is_disabled": True}
    assert record.reply_markup == markup.to_dict()
    assert [m.text for m in tg.sent()] == ["Today in AI\nquote", "plain"]


async def test_channel_posts_come_from_the_channel_and_usernames_resolve(
    tg: FakeTelegram, bot: Bot
) -> None:
    message = await bot.send_message("@ai_digest", "hello channel")
    assert message.chat.id == CHANNEL and message.chat.type == "channel"
    assert message.from_user is None and message.sender_chat is not None
    assert tg.sent(CHANNEL)[0].text == "hello channel"


@pytest.mark.parametrize("encoding", ["json", "form", "multipart"])
async def test_every_body_encoding_is_accepted(tg: FakeTelegram, encoding: str) -> None:
    markup = {"inline_keyboard": [[{"text": "Go", "url": "https://example.com"}]]}
    fields: dict[str, Any] = {"chat_id": ANN, "text": "<i>x</i>", "parse_mode": "HTML"}
    url = f"{tg.base_url}{tg.token}/sendMessage"
    async with httpx.AsyncClient() as client:
        if encoding == "json":
            response = await client.post(url, json={**fields, "reply_markup": markup})
        else:
            form = {k: str(v) for k, v in fields.items()} | {"reply_markup": json.dumps(markup)}
            if encoding == "form":
                response = await client.post(url, data=form)
            else:
                response = await client.post(url, data=form, files={"unused": ("a.txt", b"1")})
    body = response.json()
    assert response.status_code == 200 and body["ok"] is True
    assert body["result"]["entities"] == [{"type": "italic", "offset": 0, "length": 1}]
    assert body["result"]["reply_markup"] == markup


async def test_tokens_and_methods_are_checked_like_telegram(tg: FakeTelegram) -> None:
    with pytest.raises(InvalidToken):
        async with Bot("999:WRONG", base_url=tg.base_url):
            pass
    async with httpx.AsyncClient() as client:
        wrong = await client.post(f"{tg.base_url}999:WRONG/getMe")
        unknown = await client.post(f"{tg.base_url}{tg.token}/sendTelepathy")
        malformed = await client.post(f"{tg.base_url}no-colon/getMe")
        any_case = await client.get(f"{tg.base_url}{tg.token}/GETME")
    assert (wrong.status_code, wrong.json()) == (
        401,
        {"ok": False, "error_code": 401, "description": "Unauthorized"},
    )
    assert unknown.status_code == 404 and unknown.json()["description"] == "Not Found"
    assert malformed.status_code == 404
    assert any_case.json()["result"]["username"] == tg.bot_username


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("html", "fragment"),
    [
        ("line<br>next", 'unsupported start tag "br" at byte offset 4'),
        ("<b>open", 'can\'t find end tag corresponding to start tag "b"'),
        ("<b>x</i>", 'unmatched end tag at byte offset 4, expected "</b>", found "</i>"'),
        ("x</b>", "unexpected end tag at byte offset 1"),
        ("1 < 2", 'unsupported start tag "" at byte offset 2'),
        ("<span>s</span>", 'tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("<b>x</b", "unclosed end tag at byte offset 4"),
    ],
)
async def test_bad_html_is_a_bad_request(bot: Bot, html: str, fragment: str) -> None:
    with pytest.raises(BadRequest) as caught:
        await bot.send_message(ANN, html, parse_mode=ParseMode.HTML)
    assert caught.value.message.lower() == f"can't parse entities: {fragment}".lower()


async def test_length_is_counted_in_utf16_after_entity_parsing(bot: Bot) -> None:
    at_limit = "<b>" + "a" * 4000 + "</b>" + "&amp;" * 96
    message = await bot.send_message(ANN, at_limit, parse_mode=ParseMode.HTML)
    assert message.text is not None and len(message.text) == 4096
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(ANN, "a" * 4097)
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(ANN, "😀" * 2049)  # 2049 characters, 4098 UTF-16 units


@pytest.mark.parametrize(
    ("text", "parse_mode", "fragment"),
    [
        ("", None, "Message text is empty"),
        ("   \n ", None, "Message text is empty"),
        (" <b> </b> ", ParseMode.HTML, "Text must be non-empty"),
    ],
)
async def test_empty_text_is_refused(
    bot: Bot, text: str, parse_mode: str | None, fragment: str
) -> None:
    with pytest.raises(BadRequest, match=fragment):
        await bot.send_message(ANN, text, parse_mode=parse_mode)


async def test_callback_data_is_limited_to_64_bytes(tg: FakeTelegram, bot: Bot) -> None:
    fits = "ж" * 32  # 64 bytes in UTF-8
    ok = InlineKeyboardMarkup([[InlineKeyboardButton("ok", callback_data=fits)]])
    too_long = InlineKeyboardMarkup([[InlineKeyboardButton("no", callback_data=fits + "x")]])
    await bot.send_message(ANN, "fits", reply_markup=ok)
    with pytest.raises(BadRequest, match="Button_data_invalid"):
        await bot.send_message(ANN, "too long", reply_markup=too_long)
    assert [m.text for m in tg.sent(ANN)] == ["fits"]


async def test_unknown_chat_is_not_found(bot: Bot) -> None:
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(42, "hi")
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message("@nobody_here", "hi")


# ------------------------------------------------------------------ faults


async def test_blocked_once_then_permanently(tg: FakeTelegram, bot: Bot) -> None:
    tg.fail_next(ANN, "blocked")
    with pytest.raises(Forbidden, match="bot was blocked by the user"):
        await bot.send_message(ANN, "one")
    await bot.send_message(ANN, "two")
    tg.block(ANN)
    for _ in range(2):
        with pytest.raises(Forbidden, match="bot was blocked by the user"):
            await bot.send_message(ANN, "three")
    assert [m.text for m in tg.sent(ANN)] == ["two"]


async def test_kicked_names_the_chat_kind(tg: FakeTelegram, bot: Bot) -> None:
    tg.fail_next(CHANNEL, "kicked")
    with pytest.raises(Forbidden, match="bot was kicked from the channel chat"):
        await bot.send_message(CHANNEL, "x")
    tg.block(GROUP)
    with pytest.raises(Forbidden, match="bot was kicked from the group chat"):
        await bot.send_message(GROUP, "x")


async def test_migrated_group_points_to_a_new_supergroup(tg: FakeTelegram, bot: Bot) -> None:
    tg.fail_next(GROUP, "migrated")
    with pytest.raises(ChatMigrated) as caught:
        await bot.send_message(GROUP, "x")
    new_id = caught.value.new_chat_id
    assert new_id < -(10**12) and tg.chats[new_id].type == "supergroup"
    message = await bot.send_message(new_id, "moved")
    assert message.chat.type == "supergroup" and message.chat.title == "Team"
    with pytest.raises(ChatMigrated):  # the old id stays upgraded, as on Telegram
        await bot.send_message(GROUP, "again")


async def test_injected_flood_reports_retry_after(
    tg: FakeTelegram, bot: Bot, timedelta_retry_after: None
) -> None:
    tg.fail_next(ANN, "flood", retry_after=7)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(ANN, "x")
    assert caught.value.retry_after == dtm.timedelta(seconds=7)
    assert tg.flood_429s == 1
    assert [(r.method, r.status) for r in tg.calls("sendMessage")] == [("sendMessage", 429)]


@pytest.mark.parametrize("status", [500, 502])
async def test_server_errors_are_network_errors(tg: FakeTelegram, bot: Bot, status: int) -> None:
    tg.fail_next(None, "server_error", status=status)
    with pytest.raises(NetworkError) as caught:
        await bot.send_message(ANN, "x")
    assert not isinstance(caught.value, BadRequest | TimedOut)
    expected = "Internal Server Error" if status == 500 else "Bad Gateway (502)"
    assert expected in caught.value.message
    await bot.send_message(ANN, "after")
    assert [m.text for m in tg.sent()] == ["after"]


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_slow_answer_times_out_but_still_lands(tg: FakeTelegram) -> None:
    tg.fail_next(ANN, "slow", delay=0.5)
    request = HTTPXRequest(read_timeout=0.1)
    async with Bot(tg.token, base_url=tg.base_url, request=request) as slow_bot:
        with pytest.raises(TimedOut):
            await slow_bot.send_message(ANN, "late")
    delivered = await tg.wait_for_messages(ANN, 1, timeout=2)
    assert delivered[0].text == "late"  # a timeout does not mean "not sent"


async def test_a_held_method_takes_effect_only_when_released(tg: FakeTelegram, bot: Bot) -> None:
    tg.hold("sendMessage")
    pending = asyncio.ensure_future(bot.send_message(ANN, "held"))
    for _ in range(1000):  # the send reaches the double
        if tg.held:
            break
        await asyncio.sleep(0.01)
    assert tg.sent(ANN) == [] and not pending.done()  # in flight, not yet delivered
    assert (await bot.get_me()).is_bot  # other methods go on
    tg.release("sendMessage")
    assert (await pending).text == "held"
    assert [m.text for m in tg.sent(ANN)] == ["held"] and tg.held == 0


# ------------------------------------------------------------------ flood limits


async def test_private_chat_allows_a_burst_of_three_then_429(
    tg: FakeTelegram, bot: Bot, clock: FrozenClock, timedelta_retry_after: None
) -> None:
    outcomes: list[str] = []
    for i in range(5):
        try:
            await bot.send_message(ANN, f"m{i}")
            outcomes.append("ok")
        except RetryAfter as exc:
            outcomes.append(f"retry {exc.retry_after.total_seconds():g}")  # type: ignore[union-attr]
    assert outcomes == ["ok", "ok", "ok", "retry 3", "retry 3"]
    assert tg.flood_429s == 2
    clock.advance(1.0)  # one slot frees after 3 s: 1 s is not enough
    with pytest.raises(RetryAfter):
        await bot.send_message(ANN, "early")
    clock.advance(2.0)
    await bot.send_message(ANN, "on time")
    assert [m.text for m in tg.sent(ANN)] == ["m0", "m1", "m2", "on time"]


async def test_group_and_global_limits(
    tg: FakeTelegram, bot: Bot, clock: FrozenClock, timedelta_retry_after: None
) -> None:
    for i in range(20):
        await bot.send_message(CHANNEL, f"c{i}")
    with pytest.raises(RetryAfter) as per_channel:
        await bot.send_message(CHANNEL, "c20")
    assert per_channel.value.retry_after == dtm.timedelta(seconds=60)
    clock.advance(1.0)
    for user in range(30):
        tg.add_chat(5000 + user, "private")
        await bot.send_message(5000 + user, "hi")
    with pytest.raises(RetryAfter) as overall:
        await bot.send_message(ANN, "31st this second")
    assert overall.value.retry_after == dtm.timedelta(seconds=1)


async def test_per_chat_override_and_disabled_flood_control(timedelta_retry_after: None) -> None:
    clock = FrozenClock()
    async with FakeTelegram(clock=clock) as tg, Bot(tg.token, base_url=tg.base_url) as bot:
        tg.add_chat(ANN, "private", rate=(1, 10.0))
        await bot.send_message(ANN, "one")
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(ANN, "two")
        assert caught.value.retry_after == dtm.timedelta(seconds=10)
    async with (
        FakeTelegram(flood_control=False, limits=FloodLimits(private_count=1)) as tg,
        Bot(tg.token, base_url=tg.base_url) as bot,
    ):
        tg.add_chat(ANN, "private")
        for i in range(10):
            await bot.send_message(ANN, str(i))
        assert len(tg.sent(ANN)) == 10 and tg.flood_429s == 0


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_scale_compresses_windows_and_retry_after(timedelta_retry_after: None) -> None:
    async with FakeTelegram(scale=10) as tg, Bot(tg.token, base_url=tg.base_url) as bot:
        tg.add_chat(ANN, "private")
        sent = 0
        with pytest.raises(RetryAfter) as caught:
            for i in range(5):
                await bot.send_message(ANN, str(i))
                sent += 1
        retry = caught.value.retry_after
        assert isinstance(retry, dtm.timedelta)
        assert sent == 3 and retry == dtm.timedelta(seconds=0.3)
        await asyncio.sleep(retry.total_seconds())
        await bot.send_message(ANN, "after waiting")
        assert tg.sent(ANN)[-1].text == "after waiting"


# ------------------------------------------------------------------ updates


async def test_get_updates_long_polls_and_confirms_with_offset(tg: FakeTelegram, bot: Bot) -> None:
    assert await bot.get_updates(timeout=0) == ()
    loop = asyncio.get_running_loop()
    started = loop.time()
    polls = len(tg.calls("getUpdates"))
    poll = asyncio.create_task(bot.get_updates(timeout=5))
    await tg.wait_for(lambda: len(tg.calls("getUpdates")) > polls)  # the long poll waits
    tg.inject_message(ANN, ANN, "/today extra")
    updates = await asyncio.wait_for(poll, 3)
    assert loop.time() - started < 2  # woken by the update, not by the 5 s timeout
    message = updates[0].message
    assert message is not None and message.text == "/today extra"
    assert message.entities[0].type == "bot_command" and message.entities[0].length == 6
    again = await bot.get_updates(timeout=0)
    assert [u.update_id for u in again] == [updates[0].update_id]  # not confirmed yet
    assert await bot.get_updates(offset=updates[0].update_id + 1, timeout=0) == ()
    assert tg.pending_updates == 0


async def test_allowed_updates_filters_and_limit_caps(tg: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(ANN, "pick")
    for i in range(3):
        tg.inject_message(ANN, ANN, f"hello {i}")
    tg.inject_callback(ANN, ANN, sent.message_id, "pick:1")
    only_callbacks = await bot.get_updates(timeout=0, allowed_updates=["callback_query"])
    assert [u.callback_query.data for u in only_callbacks if u.callback_query] == ["pick:1"]
    assert len(only_callbacks) == 1
    tg.inject_message(ANN, ANN, "a")
    tg.inject_message(ANN, ANN, "b")
    confirm = only_callbacks[-1].update_id + 1
    capped = await bot.get_updates(offset=confirm, timeout=0, limit=1, allowed_updates=[])
    assert [u.message.text for u in capped if u.message] == ["a"]


async def test_webhook_and_a_second_poller_conflict(tg: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_webhook("https://example.com/hook", secret_token="s3cret")
    info = await bot.get_webhook_info()
    assert info.url == "https://example.com/hook" and tg.webhook is not None
    with pytest.raises(Conflict, match="webhook is active"):
        await bot.get_updates(timeout=0)
    assert await bot.delete_webhook()
    # PTB keeps getUpdates on its own one-connection pool: a second poller needs a second Bot.
    async with Bot(tg.token, base_url=tg.base_url) as other_instance:
        polls = len(tg.calls("getUpdates"))
        first = asyncio.create_task(bot.get_updates(timeout=3))
        await tg.wait_for(lambda: len(tg.calls("getUpdates")) > polls)  # the first one waits
        assert await other_instance.get_updates(timeout=0) == ()
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await asyncio.wait_for(first, 2)


# ------------------------------------------------------------------ Application


async def test_command_handler_replies_through_the_double(tg: FakeTelegram) -> None:
    seen: list[str] = []

    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None and update.effective_chat is not None
        seen.append(update.effective_message.text or "")
        await update.effective_message.reply_html(f"<b>Hi</b> {update.effective_chat.id}")

    app = _app(tg)
    app.add_handler(CommandHandler("start", start))
    async with running(app):
        tg.inject_message(ANN, ANN, "/start")
        tg.inject_message(GROUP, ANN, "/start@other_bot")  # meant for another bot: ignored
        tg.inject_message(GROUP, ANN, "/start@digest_test_bot")
        private = await tg.wait_for_messages(ANN, 1, timeout=5)
        group = await tg.wait_for_messages(GROUP, 1, timeout=5)
    assert seen == ["/start", "/start@digest_test_bot"]
    assert private[0].text == f"Hi {ANN}" and private[0].entities[0]["type"] == "bold"
    assert group[0].text == f"Hi {GROUP}" and len(tg.sent(GROUP)) == 1
    assert tg.calls("deleteWebhook") and tg.calls("getUpdates")


async def test_callback_query_is_answered_and_the_message_edited(tg: FakeTelegram) -> None:
    async def on_press(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None
        await query.answer("Loading…")
        await query.edit_message_text(f"You chose {query.data}")

    app = _app(tg)
    app.add_handler(CallbackQueryHandler(on_press))
    async with running(app):
        markup = InlineKeyboardMarkup([[InlineKeyboardButton("A", callback_data="sec:a")]])
        sent = await app.bot.send_message(ANN, "Pick one", reply_markup=markup)
        update = tg.inject_callback(ANN, ANN, sent.message_id, "sec:a")
        for _ in range(100):  # bounded: at most about 5 s
            if tg.sent(ANN)[0].edits:
                break
            await asyncio.sleep(0.05)
    assert tg.answered_callbacks == [
        {
            "callback_query_id": update["callback_query"]["id"],
            "text": "Loading…",
            "show_alert": False,
            "url": None,
            "cache_time": None,
        }
    ]
    record = tg.sent(ANN)[0]
    assert record.text == "You chose sec:a" and record.edits[0]["text"] == "Pick one"


async def test_callback_answered_twice_is_refused(tg: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(ANN, "x")
    query_id = tg.inject_callback(ANN, ANN, sent.message_id, "d")["callback_query"]["id"]
    assert await bot.answer_callback_query(query_id)
    with pytest.raises(BadRequest, match=r"(?i)query is too old.*query id is invalid"):
        await bot.answer_callback_query(query_id)


# ------------------------------------------------------------------ other methods


async def test_commands_per_language_and_scope(tg: FakeTelegram, bot: Bot) -> None:
    await bot.set_my_commands([BotCommand("today", "Today's digest")])
    await bot.set_my_commands([BotCommand("today", "今日日报")], language_code="zh")
    await bot.set_my_commands([BotCommand("repost", "Repost")], scope=BotCommandScopeChat(GROUP))
    assert tg.commands == {
        "": [{"command": "today", "description": "Today's digest"}],
        "zh": [{"command": "today", "description": "今日日报"}],
    }
    zh = await bot.get_my_commands(language_code="zh")
    assert [c.description for c in zh] == ["今日日报"]
    group = await bot.get_my_commands(scope=BotCommandScopeChat(GROUP))
    assert [c.command for c in group] == ["repost"]
    assert await bot.get_my_commands(language_code="de") == ()
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await bot.set_my_commands([BotCommand("Bad-Name", "x")])


async def test_edit_pin_and_get_chat(tg: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(CHANNEL, "<b>v1</b>", parse_mode=ParseMode.HTML)
    edited = await bot.edit_message_text("<b>v2</b>", CHANNEL, sent.message_id, parse_mode="HTML")
    assert isinstance(edited, type(sent)) and edited.text == "v2"
    assert edited.edit_date is not None
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_text("<b>v2</b>", CHANNEL, sent.message_id, parse_mode="HTML")
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("x", CHANNEL, 999)
    assert await bot.pin_chat_message(CHANNEL, sent.message_id)
    chat = await bot.get_chat("@ai_digest")
    assert chat.id == CHANNEL and chat.title == "AI Digest"
    assert chat.pinned_message is not None and chat.pinned_message.text == "v2"
    assert await bot.unpin_chat_message(CHANNEL)
    assert tg.chats[CHANNEL].pinned == []
    with pytest.raises(BadRequest, match="Message to pin not found"):
        await bot.pin_chat_message(CHANNEL, 999)


async def test_request_log_and_wait_helper_are_bounded(tg: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(ANN, "one")
    with pytest.raises(TimeoutError, match="1 of 2 messages"):
        await tg.wait_for_messages(ANN, 2, timeout=0.05)
    record = tg.calls("sendMessage")[0]
    assert (record.status, record.chat_id, record.params["text"]) == (200, ANN, "one")


# ------------------------------------------------------------------ HTML parser


@pytest.mark.parametrize(
    ("html", "text", "entities"),
    [
        ("a &lt;b&gt; &amp; &quot;", 'a <b> & "', []),
        ("&nbsp;&copy; &#65;&#x42;", "&nbsp;&copy; AB", []),  # only 4 named entities
        ("<B>up</B>", "up", [{"type": "bold", "offset": 0, "length": 2}]),
        (
            '<pre><code class="language-python">x = 1</code></pre>',
            "x = 1",
            [{"type": "pre", "offset": 0, "length": 5, "language": "python"}],
        ),
        (
            "<blockquote expandable>long</blockquote>",
            "long",
            [{"type": "expandable_blockquote", "offset": 0, "length": 4}],
        ),
        (
            '<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>',
            "st",
            [
                {"type": "spoiler", "offset": 0, "length": 1},
                {"type": "spoiler", "offset": 1, "length": 1},
            ],
        ),
        ("😀<i>x</i>", "😀x", [{"type": "italic", "offset": 2, "length": 1}]),
        ("  <b> pad </b>  ", "pad", [{"type": "bold", "offset": 0, "length": 3}]),
        ("<code><b>raw</b></code>", "raw", [{"type": "code", "offset": 0, "length": 3}]),
    ],
)
def test_telegram_html_parser(html: str, text: str, entities: list[dict[str, Any]]) -> None:
    assert parse_html(html) == (text, entities)
    assert utf16_len(text) == sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def test_telegram_html_parser_reports_byte_offsets() -> None:
    # Telegram counts UTF-8 bytes, not characters: "日报 " is 7 bytes.
    with pytest.raises(HtmlParseError, match='"x" at byte offset 7'):
        parse_html("日报 <x>")


# ------------------------------------------------------------------ standalone


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_standalone_server_runs_in_a_subprocess() -> None:
    proc = await forkserver.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes.telegram_api", "--port", "0", "--chat", "42:private"),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        base_url = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/bot")
        async with Bot(DEFAULT_TOKEN, base_url=base_url) as bot:
            await bot.send_message(42, "from outside")
        root = base_url.removesuffix("/bot")
        async with httpx.AsyncClient() as client:
            sent = (await client.get(f"{root}/_fake/sent", params={"chat_id": 42})).json()
            injected = await client.post(
                f"{root}/_fake/inject_message",
                json={"chat_id": 42, "from_user": 42, "text": "/start"},
            )
        assert [m["text"] for m in sent["result"]] == ["from outside"]
        assert injected.json()["result"]["message"]["text"] == "/start"
    finally:
        if proc.returncode is None:
            proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0


# ---------------------------------------------------------------- issue #11: doctor, paid broadcast


async def test_get_chat_member_reports_the_bots_rights_and_send_obeys_them(
    tg: FakeTelegram, bot: Bot
) -> None:
    me = await bot.get_me()
    member = await bot.get_chat_member(CHANNEL, me.id)
    assert member.status == "administrator" and member.can_post_messages  # type: ignore[attr-defined]
    tg.set_bot_member(CHANNEL, "administrator", can_post_messages=False)
    with pytest.raises(BadRequest, match=r"(?i)need administrator rights"):
        await bot.send_message(CHANNEL, "x")
    tg.set_bot_member(GROUP, "left")
    assert (await bot.get_chat_member(GROUP, me.id)).status == "left"
    with pytest.raises(Forbidden, match=r"(?i)not a member"):
        await bot.send_message(GROUP, "x")
    tg.set_bot_member(GROUP, "restricted", can_send_messages=False)
    with pytest.raises(BadRequest, match=r"(?i)not enough rights"):
        await bot.send_message(GROUP, "x")


async def test_date_header_follows_the_doubles_clock(tg: FakeTelegram) -> None:
    import email.utils

    tg.date_offset = 3600.0
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{tg.base_url}{tg.token}/getMe")
    date = email.utils.parsedate_to_datetime(answer.headers["Date"])
    assert abs(date.timestamp() - (tg.wall_clock() + 3600)) < 2


async def test_paid_broadcast_lifts_the_overall_limit_to_1000_per_second(
    clock: FrozenClock,
) -> None:
    async with FakeTelegram(clock=clock) as fake, httpx.AsyncClient() as client:
        for chat in range(1, 61):
            fake.add_chat(chat)

        async def send(chat: int, **extra: Any) -> int:
            answer = await client.post(
                f"{fake.base_url}{fake.token}/sendMessage",
                json={"chat_id": chat, "text": "x", **extra},
            )
            return answer.status_code

        free = [await send(chat) for chat in range(1, 31)]
        assert free == [200] * 30
        assert await send(31) == 429  # the 31st in one second, unpaid
        paid = [await send(chat, allow_paid_broadcast=True) for chat in range(31, 61)]
        assert paid == [200] * 30
        assert fake.paid_broadcasts == 30


# ------------------------------------------------------------------ files (documents)


async def test_a_document_is_fetched_with_get_file_and_the_file_url(tg: FakeTelegram) -> None:
    tg.add_chat(7, "private", first_name="Ann")
    update = tg.inject_document(7, 7, "2026-12-05.txt", "内容".encode(), caption="c")
    document = update["message"]["document"]
    assert document["file_size"] == len("内容".encode()) and "file_path" not in document
    async with Bot(tg.token, base_url=tg.base_url, base_file_url=f"{tg.url}/file/bot") as bot:
        file = await bot.get_file(document["file_id"])
        assert bytes(await file.download_as_bytearray()) == "内容".encode()
        with pytest.raises(BadRequest, match="Invalid file_id"):
            await bot.get_file("no-such-file")
    async with httpx.AsyncClient() as client:
        missing = await client.get(f"{tg.url}/file/bot{tg.token}/documents/none.txt")
        wrong_token = await client.get(f"{tg.url}/file/bot999:WRONG/{file.file_path}")
    assert (missing.status_code, wrong_token.status_code) == (404, 401)


# ------------------------------------------------------------------ inline mode


def _article(result_id: str, *, title: str = "标题", text: str = "<b>标题</b>") -> Any:
    from telegram import InlineQueryResultArticle, InputTextMessageContent

    return InlineQueryResultArticle(
        result_id, title, InputTextMessageContent(text, parse_mode=ParseMode.HTML)
    )


async def test_an_inline_query_arrives_as_an_update_and_is_answered_once(
    tg: FakeTelegram, bot: Bot
) -> None:
    query_id = tg.inject_inline_query(ANN, "模型")
    (update,) = await bot.get_updates(timeout=0)
    assert update.inline_query is not None and update.inline_query.query == "模型"
    assert update.inline_query.id == query_id and update.inline_query.from_user.id == ANN
    assert await bot.answer_inline_query(query_id, [_article("a"), _article("b")], cache_time=5)
    answer = await tg.wait_for_inline_answer(query_id)
    assert [r.id for r in answer.results] == ["a", "b"] and answer.cache_time == 5
    assert answer.results[0].text == "标题" and answer.results[0].entities[0]["type"] == "bold"
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_inline_query(query_id, [])


@pytest.mark.parametrize(
    ("results", "error"),
    [
        ([_article(str(n)) for n in range(51)], "RESULTS_TOO_MUCH"),
        ([_article("same"), _article("same")], "RESULT_ID_DUPLICATE"),
        ([_article("x" * 65)], "RESULT_ID_INVALID"),
        ([_article("é" * 33)], "RESULT_ID_INVALID"),  # 66 bytes in 33 characters
        ([_article("t", title=" ")], "ARTICLE_TITLE_EMPTY"),
        ([_article("h", text="<b>open")], "can.t parse entities"),
        ([_article("long", text="a" * 4097)], "too long"),
    ],
)
async def test_answer_inline_query_is_checked_as_telegram_does(
    tg: FakeTelegram, bot: Bot, results: list[Any], error: str
) -> None:
    query_id = tg.inject_inline_query(ANN, "x")
    with pytest.raises(BadRequest, match=f"(?i){error}"):
        await bot.answer_inline_query(query_id, results)
    assert tg.inline_answers == []
    # PTB caps a list at 50 itself unless asked to page; the double checks what it gets
    assert await bot.answer_inline_query(query_id, [_article(str(n)) for n in range(50)])


async def test_a_next_offset_over_64_bytes_is_refused(tg: FakeTelegram, bot: Bot) -> None:
    query_id = tg.inject_inline_query(ANN, "x")
    with pytest.raises(BadRequest, match=r"(?i)NEXT_OFFSET_INVALID"):
        await bot.answer_inline_query(query_id, [_article("a")], next_offset="o" * 65)


# ------------------------------------------------------------------ forum topics

FORUM = -1007770001


async def test_forum_topics_as_ptb_sees_them(tg: FakeTelegram, bot: Bot) -> None:
    """createForumTopic gives the topic's message_thread_id (its creation message's id); a
    send into it comes back as a topic message; getChat says the chat is a forum."""
    tg.add_chat(FORUM, "supergroup", title="Forum", forum=True)
    topic = await bot.create_forum_topic(FORUM, "日报", icon_color=0xFFD67E)
    sent = await bot.send_message(FORUM, "hi", message_thread_id=topic.message_thread_id)
    chat = await bot.get_chat(FORUM)

    assert topic.name == "日报" and topic.message_thread_id in tg.chats[FORUM].topics
    assert sent.message_thread_id == topic.message_thread_id and sent.is_topic_message
    assert sent.message_id > topic.message_thread_id and chat.is_forum
    assert tg.sent(FORUM)[0].message_thread_id == topic.message_thread_id
    general = await bot.send_message(FORUM, "in General")
    assert general.message_thread_id is None and not general.is_topic_message


async def test_the_double_refuses_what_telegram_refuses_of_topics(
    tg: FakeTelegram, bot: Bot
) -> None:
    tg.add_chat(FORUM, "supergroup", title="Forum", forum=True)
    topic = tg.add_topic(FORUM, "日报")
    gone = tg.add_topic(FORUM, "旧")
    tg.delete_topic(FORUM, gone.id)
    refusals = [
        ("TOPIC_CLOSED", dict(chat_id=FORUM, message_thread_id=topic.id)),
        ("TOPIC_DELETED", dict(chat_id=FORUM, message_thread_id=gone.id)),
        ("Message thread not found", dict(chat_id=FORUM, message_thread_id=9999)),
        # the General topic takes no id (tdlib/telegram-bot-api#798), nor do other chats
        ("Message thread not found", dict(chat_id=FORUM, message_thread_id=1)),
        ("Message thread not found", dict(chat_id=GROUP, message_thread_id=topic.id)),
    ]
    await bot.close_forum_topic(FORUM, topic.id)
    for text, where in refusals:
        with pytest.raises(BadRequest) as refused:
            await bot.send_message(text="x", **where)  # type: ignore[arg-type]
        assert refused.value.message.lower() == text.lower(), where  # (PTB capitalises)
        with pytest.raises(BadRequest):
            await bot.send_chat_action(action="typing", **where)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match=r"(?i)TOPIC_NOT_MODIFIED"):
        await bot.close_forum_topic(FORUM, topic.id)
    await bot.reopen_forum_topic(FORUM, topic.id)
    assert await bot.send_chat_action(FORUM, "typing", message_thread_id=topic.id)
    with pytest.raises(BadRequest, match="not a forum"):
        await bot.create_forum_topic(GROUP, "x")
    tg.set_bot_member(FORUM, "administrator", can_manage_topics=False)
    with pytest.raises(BadRequest, match=r"(?i)not enough rights to manage forum topics"):
        await bot.create_forum_topic(FORUM, "x")
    assert tg.sent() == []
