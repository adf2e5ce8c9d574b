"""Issue #10 item 4: an admin sends an issue file to the bot in a Discord direct message.

The real discord.py Client gets the DM (MESSAGE_CREATE) from the double's gateway, downloads
the attachment from the double's CDN, and the core checks and stores it as `digest-bot
archive add` does; the answer (errors or the preview) goes back to the DM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bots.discord import DiscordAdapter
from digest_core.archive import Archive
from digest_core.rendering.discord import ALLOWED_MENTIONS, check_message
from tests.bots.discord.harness import (
    ADMIN_USER,
    READER,
    TODAY,
    clock_on,
    fake_discord,
    make_settings,
    running_bot,
)
from tests.fakes.discord_api import FakeDiscord, StoredMessage
from tests.samples import SAMPLE_ARCHIVE

GOOD = (SAMPLE_ARCHIVE / "2026-11-28.txt").read_bytes()
FUTURE = dt.date(2026, 12, 5)


@dataclass
class Bot:
    fake: FakeDiscord
    adapter: DiscordAdapter
    archive: Path

    async def send_file(self, user: int, name: str, data: bytes, content: str = "") -> str:
        """DM ``name`` to the bot; the text of the bot's whole answer (embeds' too)."""
        sent = await self.fake.user_sends_dm(user, content, files=[(name, data)])

        def answer() -> list[StoredMessage]:
            return [m for m in self.fake.messages(sent.channel_id) if m.id > sent.id]

        await self.fake.wait_until(lambda: bool(answer()), within=10)
        assert await self.adapter.in_flight.idle(10)  # every message of the answer
        for m in answer():
            assert check_message(m.request) == []  # valid create-message bodies
            assert m.allowed_mentions == dict(ALLOWED_MENTIONS)  # nobody pinged
        return "\n".join(
            m.content + "".join(f"{e.get('title', '')}{e.get('description', '')}" for e in m.embeds)
            for m in answer()
        )


@pytest.fixture
async def bot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Bot]:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, admin_users=[ADMIN_USER])
        async with running_bot(settings, clock=clock_on(TODAY)) as (_, adapter):
            yield Bot(fake, adapter, settings.archive_dir)


async def test_an_admins_good_file_is_stored_and_answered_with_the_preview(
    bot: Bot,
) -> None:
    archive = bot.archive
    text = await bot.send_file(ADMIN_USER, f"{FUTURE}.txt", GOOD)
    assert f"已收录 / stored: {FUTURE}.txt" in text
    assert "推理模型的" in text  # the preview: the headline as readers get it
    assert (archive / f"{FUTURE}.txt").read_bytes() == GOOD
    assert Archive(archive, index=False).on(FUTURE).headline.title.startswith("推理模型的")
    assert bot.fake.cdn_requests  # downloaded from the CDN URL, as Discord serves attachments


async def test_an_admins_bad_file_is_answered_with_path_line_and_stores_nothing(
    bot: Bot,
) -> None:
    archive = bot.archive
    before = sorted(p.name for p in archive.iterdir())
    bad = GOOD.decode().replace("\n简讯\n", "\n简讯：\n", 1).encode()
    text = await bot.send_file(ADMIN_USER, f"{FUTURE}.txt", bad)
    line = GOOD.decode().split("\n").index("简讯") + 1
    assert f"{FUTURE}.txt:{line}: " in text and "did you mean 简讯?" in text
    assert "not stored" in text
    assert sorted(p.name for p in archive.iterdir()) == before


async def test_a_readers_file_is_refused_and_not_downloaded(
    bot: Bot,
) -> None:
    archive = bot.archive
    text = await bot.send_file(READER, f"{FUTURE}.txt", GOOD)
    assert "Only admins can send issue files" in text
    assert not (archive / f"{FUTURE}.txt").exists()
    assert bot.fake.cdn_requests == []


async def test_a_published_day_needs_the_word_correct(bot: Bot) -> None:
    archive = bot.archive
    published = archive / "2026-11-26.txt"
    old = published.read_bytes()
    fixed = old.replace("投机解码".encode(), "投机解码（更正）".encode(), 1)
    refused = await bot.send_file(ADMIN_USER, "2026-11-26.txt", fixed)
    assert "is published already" in refused and published.read_bytes() == old
    corrected = await bot.send_file(ADMIN_USER, "2026-11-26.txt", fixed, "correct")
    assert "corrected: 2026-11-26.txt" in corrected and published.read_bytes() == fixed
