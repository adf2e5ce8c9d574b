"""The Telegram tests' common fixtures: the Bot API double with the harness's chats, and the
bot running against it (a test module may define its own ``fake`` or ``bot`` instead)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bots.telegram.harness import (
    Running,
    register_chats,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram


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
