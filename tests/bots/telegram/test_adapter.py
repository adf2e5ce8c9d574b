"""TelegramAdapter.send against the Bot API double: faithful payloads and error translation."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from bots.telegram.handlers import (
    UserRateLimiter,
    Verdict,
)
from bots.telegram.wire import chat_id, retry_seconds, split_payload, target_kind, translate
from digest_core.commands import Request
from digest_core.commands.confirmation import confirm_data, parse_confirm_data
from digest_core.errors import (
    DeliveryError,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    TargetGone,
    TargetMoved,
    TransientError,
)
from digest_core.platform import Target, TargetKind
from digest_core.rendering import Message, Part, RenderOptions, render
from digest_core.rendering import telegram as telegram_render
from digest_core.testing import ManualClock
from tests.bots.telegram.harness import (
    ANN,
    CHANNEL,
    GROUP,
    TODAY,
    Running,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram

# PTB 22 warns when it builds a RetryAfter (its int -> timedelta migration); not our concern
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    async with running_bot(settings, fake, scale=100, receive=False) as running:
        yield running


def _target(chat: int | str, kind: TargetKind = TargetKind.CHANNEL) -> Target:
    return Target("telegram", str(chat), kind)


async def test_send_posts_exactly_the_rendered_payload(bot: Running, fake: FakeTelegram) -> None:
    issue = bot.service.archive.on(TODAY)
    messages = render(issue, telegram_render, Part.ALL, options=bot.adapter.post_options)
    ids = [await bot.adapter.send(_target(CHANNEL), m) for m in messages]

    sent = fake.sent(CHANNEL)
    assert ids == [str(m.message_id) for m in sent]
    for message, received in zip(messages, sent, strict=True):
        # a form-encoded request: chat_id arrives as text, JSON fields decoded
        assert received.params == {"chat_id": str(CHANNEL), **message.payload}
    assert sent[-1].reply_markup == messages[-1].payload["reply_markup"]
    assert sent[0].link_preview_options == {"is_disabled": False, "url": issue.headline.url}


async def test_send_to_a_channel_username(bot: Running, fake: FakeTelegram) -> None:
    message_id = await bot.adapter.send(_target("@ai_digest"), Message({"text": "hi"}))
    assert fake.sent(-1009999)[0].message_id == int(message_id)


async def test_unknown_payload_fields_travel_as_they_are(bot: Running, fake: FakeTelegram) -> None:
    payload = {"text": "<b>x</b>", "parse_mode": "HTML", "message_effect_id": "123"}
    await bot.adapter.send(_target(ANN, TargetKind.PRIVATE), Message(payload))
    assert fake.sent(ANN)[-1].params == {"chat_id": str(ANN), **payload}


@pytest.mark.parametrize(
    ("fault", "kwargs", "error"),
    [
        ("flood", {"retry_after": 0.07}, RateLimited),
        ("blocked", {}, TargetGone),
        ("kicked", {}, TargetGone),
        ("migrated", {}, TargetMoved),
        ("server_error", {"status": 500}, TransientError),
        ("server_error", {"status": 502}, TransientError),
    ],
)
async def test_double_faults_become_core_errors(
    bot: Running, fake: FakeTelegram, fault: str, kwargs: dict[str, float], error: type
) -> None:
    fake.fail_next(GROUP, fault, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(error) as info:
        await bot.adapter.send(_target(GROUP, TargetKind.GROUP), Message({"text": "x"}))
    assert isinstance(info.value, DeliveryError)
    assert (info.value.platform, info.value.target) == ("telegram", str(GROUP))
    if isinstance(info.value, RateLimited):
        assert info.value.retry_after == pytest.approx(0.07)
    if isinstance(info.value, TargetMoved):
        assert info.value.new_target == str(fake.chats[GROUP].migrated_to)
    assert fake.sent(GROUP) == []


async def test_chat_not_found_is_gone_and_bad_html_is_rejected(bot: Running) -> None:
    with pytest.raises(TargetGone):
        await bot.adapter.send(_target(-100777), Message({"text": "x"}))
    with pytest.raises(Rejected, match="parse entities"):
        await bot.adapter.send(_target(CHANNEL), Message({"text": "<b>x", "parse_mode": "HTML"}))


async def test_a_token_the_api_refuses_stops_the_start(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from digest_core.errors import ConfigError

    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", "1:wrong")
    from bots.registry import load_settings

    settings = load_settings(tmp_path / "digest-bot.toml")
    with pytest.raises(ConfigError, match="refused the bot token") as info:
        async with running_bot(settings, fake, receive=False):
            pass
    assert "1:wrong" not in str(info.value)


# ---------------------------------------------------------------- translation table


def _connect_timeout() -> TimedOut:
    error = TimedOut()
    error.__cause__ = httpx.ConnectTimeout("connect")
    return error


def _network_error(cause: httpx.HTTPError) -> NetworkError:
    """A NetworkError as PTB's HTTPXRequest raises it (``from`` the httpx error)."""
    error = NetworkError(f"httpx.{type(cause).__name__}: {cause}")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: RetryAfter(3), RateLimited),
        (lambda: RetryAfter(dt.timedelta(seconds=1.5)), RateLimited),
        (lambda: ChatMigrated(-100555), TargetMoved),
        (lambda: Forbidden("Forbidden: bot was blocked by the user"), TargetGone),
        (lambda: Forbidden("bot can't initiate conversation with a user"), TargetGone),
        (lambda: BadRequest("Chat not found"), TargetGone),
        (lambda: BadRequest("need administrator rights in the channel chat"), TargetGone),
        (lambda: BadRequest("Can't parse entities: unclosed tag"), Rejected),
        (lambda: BadRequest("Message is too long"), Rejected),
        (lambda: TimedOut(), OutcomeUnknown),  # a read timeout: it may have arrived
        (_connect_timeout, TransientError),  # it never left
        (lambda: NetworkError("Bad Gateway"), TransientError),
        # refused or reset while connecting: it never left
        (lambda: _network_error(httpx.ConnectError("refused")), TransientError),
        # the request was written, the answer cut: it may have arrived
        (lambda: _network_error(httpx.ReadError("reset by peer")), OutcomeUnknown),
        (lambda: _network_error(httpx.RemoteProtocolError("disconnected")), OutcomeUnknown),
        (lambda: InvalidToken(), Rejected),
        (lambda: Conflict("terminated by other getUpdates request"), Rejected),
        (lambda: TelegramError("something new"), Rejected),
    ],
)
def test_translation_table(
    make: Callable[[], TelegramError], expected: type[DeliveryError]
) -> None:
    error = translate(make(), _target(CHANNEL))
    assert type(error) is expected
    assert error.target == str(CHANNEL)
    if isinstance(error, RateLimited):
        assert error.retry_after in (3.0, 1.5)
    if isinstance(error, TargetMoved):
        assert error.new_target == "-100555"


def test_retry_after_accepts_int_float_and_timedelta() -> None:
    assert retry_seconds(3) == 3.0
    assert retry_seconds(0.25) == 0.25
    assert retry_seconds(dt.timedelta(milliseconds=1500)) == 1.5


@pytest.mark.parametrize(
    ("target", "kind", "api_id"),
    [
        ("@ai_digest", TargetKind.CHANNEL, "@ai_digest"),
        ("-1001234567890", TargetKind.CHANNEL, -1001234567890),
        ("-4001", TargetKind.GROUP, -4001),
        ("1001", TargetKind.PRIVATE, 1001),
    ],
)
def test_target_kinds_and_chat_ids(target: str, kind: TargetKind, api_id: int | str) -> None:
    assert target_kind(target) is kind
    assert chat_id(target) == api_id


def test_split_payload_types_only_what_ptb_needs_typed() -> None:
    issue_payload = render(
        __import__("digest_core.testing", fromlist=["make_issue"]).make_issue(),
        telegram_render,
        options=RenderOptions(buttons=True),
    )[-1].payload
    kwargs, extra = split_payload({**issue_payload, "new_field": 1})
    assert extra == {"new_field": 1}
    assert kwargs["reply_markup"].to_dict() == issue_payload["reply_markup"]
    assert kwargs["link_preview_options"].to_dict() == issue_payload["link_preview_options"]
    assert kwargs["text"] == issue_payload["text"]


# ---------------------------------------------------------------- confirmation data


@given(
    st.sampled_from(["repost", "status"]),
    # arguments as parse_command_line makes them: no whitespace, valid Unicode
    st.lists(
        st.text(st.characters(exclude_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1),
        max_size=4,
    ),
)
def test_confirm_data_round_trips_within_64_bytes(command: str, args: list[str]) -> None:
    data = confirm_data(Request(command, tuple(args)))
    if data is None:
        assert len(f"cf:{command}:{' '.join(args)}".encode()) > 64
        return
    assert len(data.encode("utf-8")) <= 64
    back = parse_confirm_data(data)
    assert back is not None and (back.command, back.args) == (command, tuple(args))


def test_confirm_data_of_a_repost() -> None:
    assert confirm_data(Request("repost", ("2026-11-27", "force"))) == "cf:repost:2026-11-27 force"
    assert parse_confirm_data("dg:2026-11-27:headline") is None


# ---------------------------------------------------------------- per-user rate limit


async def test_rate_limiter_allows_a_burst_warns_once_then_refills() -> None:
    clock = ManualClock(autoadvance=False)
    limiter = UserRateLimiter(burst=5, window=10.0, clock=clock)
    verdicts = [limiter.check(ANN) for _ in range(8)]
    assert verdicts == [Verdict.ALLOW] * 5 + [Verdict.WARN] + [Verdict.DROP] * 2
    assert limiter.check(2) is Verdict.ALLOW  # another user is not affected
    clock.advance(2.0)  # 5 per 10 s: one more after 2 s
    assert limiter.check(ANN) is Verdict.ALLOW
    assert limiter.check(ANN) is Verdict.WARN  # a new burst over the limit warns again
    clock.advance(10.0)
    assert [limiter.check(ANN) for _ in range(5)] == [Verdict.ALLOW] * 5


# ---------------------------------------------------------------- one private chat's window


async def test_replies_to_one_private_chat_never_overrun_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve replies in a row to one reader, paced by the core's Telegram limits, against the
    double's own count (3 messages in any 3 s per private chat) on one virtual clock: every
    send is accepted, and a burst still reaches the reader at once."""
    clock = ManualClock(dt.datetime.combine(TODAY, dt.time(9), tzinfo=dt.UTC))
    async with FakeTelegram(clock=clock.monotonic) as fake:
        fake.add_chat(ANN, "private", first_name="Ann")
        settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
        async with running_bot(settings, fake, clock=clock, receive=False) as bot:
            messages = [Message({"text": f"reply {i}"}) for i in range(12)]
            ids = await bot.adapter.reply(ANN, TargetKind.PRIVATE, messages)
        sends = [c for c in fake.calls("sendMessage") if c.chat_id == ANN]
    assert len(ids) == 12
    assert [c.status for c in sends] == [200] * 12, fake.flood_429s
    assert fake.flood_429s == 0
    assert sends[2].at - sends[0].at < 0.1  # a burst still reaches the reader at once
