"""Issue #13 item 8: discord.py's "voice will NOT be supported" warnings are not shown."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import discord
import pytest

from bots.runtime import run
from tests.bots.discord.harness import CHANNELS, TODAY, clock_on, fake_discord, make_settings


async def test_running_on_discord_prints_no_voice_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # as in a fresh process: discord.py warns once per process, while these flags are set
    for flag in ("warn_nacl", "warn_dave"):
        monkeypatch.setattr(discord.VoiceClient, flag, True, raising=False)
    caplog.set_level(logging.INFO, logger="discord")  # (a one-shot command may have quieted it)
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, schedule=True)
        stop = asyncio.Event()
        bot = asyncio.create_task(run(settings, only="discord", clock=clock_on(TODAY), stop=stop))
        await fake.wait_until(lambda: all(fake.messages(c) for c in CHANNELS), within=10)
        stop.set()
        await asyncio.wait_for(bot, timeout=10)
    assert any(r.name.startswith("discord") for r in caplog.records)  # its other logs stay
    assert not [r for r in caplog.records if "voice" in r.getMessage().lower()]
