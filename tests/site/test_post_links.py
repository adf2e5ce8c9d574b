"""Posts and replies link to the web archive when ``[site] base_url`` is set: the real PTB
application against the Bot API double."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from digest_core.publishing.schedule import Outcome
from tests.bots.telegram.harness import (
    CHANNEL,
    TODAY,
    register_chats,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

SITE = "https://digest.example/ai/"


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(scale=100) as tg:
        register_chats(tg)
        yield tg


@pytest.mark.parametrize("base_url", [SITE, None])
async def test_posts_and_replies_link_to_the_issue_page(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str | None
) -> None:
    config = write_config(tmp_path, base_url=fake.base_url)
    if base_url is not None:
        with config.open("a", encoding="utf-8") as file:
            file.write(f'[site]\nbase_url = "{base_url}"\n')
    settings = settings_for(config, fake, monkeypatch)
    async with running_bot(settings, fake, scale=100) as bot:
        assert await bot.service.poster.run_due(TODAY) is Outcome.POSTED
        first = fake.sent(CHANNEL)[0].html.split("\n", 1)[0]
        reply = await bot.command(f"/brief 3 {TODAY.isoformat()}")
    page = f"{SITE}2026/11/27/"
    if base_url is None:
        assert "全文 / web" not in first and "全文 / web" not in reply[0].html
        return
    assert first.endswith(f' · <a href="{page}">全文 / web</a>')
    assert f'<a href="{page}#brief-3">全文 / web</a>' in reply[0].html
