"""Replies to commands over the real Application: the core paces them and waits out a 429."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bots.telegram.harness import (
    ANN,
    Running,
    register_chats,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(scale=100) as tg:
        register_chats(tg)
        yield tg


@pytest.fixture
async def bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    settings = settings_for(write_config(tmp_path, base_url=fake.base_url), fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as running:
        yield running


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
    await asyncio.sleep(0.2)  # a retry would have come by now
    statuses = [c.status for c in fake.calls("sendMessage") if str(c.chat_id) == str(ANN)]
    assert statuses == [502, 200]
