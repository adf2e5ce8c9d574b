"""`digest-bot discord sync|invite` and `digest-bot run` against the loopback Discord double."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bots.cli import main
from bots.discord.cli import sync_commands
from bots.runtime import run
from digest_core.rendering.discord import check_message
from tests.bots.discord.harness import (
    CHANNELS,
    GUILD,
    READER,
    TODAY,
    clock_on,
    fake_discord,
    fake_discord_in_thread,
    make_settings,
)

COMMANDS = {
    "today",
    "headline",
    "briefs",
    "classic",
    "issue",
    "search",
    "subscribe",
    "unsubscribe",
    "repost",
    "status",
    "reactivate",
}


def test_discord_sync_and_invite_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_discord_in_thread() as fake:
        make_settings(tmp_path, monkeypatch, fake)
        config = str(tmp_path / "digest-bot.toml")
        assert main(["discord", "sync", "--guild", str(GUILD), "--config", config]) == 0
        assert {c["name"] for c in fake.commands(GUILD)} == COMMANDS
        assert fake.commands() == []  # only that server: instant, for trying it out
        assert main(["discord", "sync", "--config", config]) == 0
        assert {c["name"] for c in fake.commands()} == COMMANDS
        assert main(["discord", "invite", "--config", config]) == 0
        out = capsys.readouterr().out
    assert f"registered {len(COMMANDS)} commands for server {GUILD}" in out
    assert f"registered {len(COMMANDS)} commands for every server (global)" in out
    assert f"client_id={fake.application_id}&scope=bot+applications.commands&permissions=" in out
    assert fake.token not in out


def test_sync_to_a_server_the_bot_is_not_in_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_discord_in_thread() as fake:
        make_settings(tmp_path, monkeypatch, fake)
        config = str(tmp_path / "digest-bot.toml")
        assert main(["discord", "sync", "--guild", "123", "--config", config]) == 1
    assert "is the bot in it" in capsys.readouterr().err


async def test_digest_bot_run_catches_up_the_post_answers_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        # 09:00 on the day, post time 08:00: the start-up catch-up posts it
        settings = make_settings(tmp_path, monkeypatch, fake, schedule=True)
        await sync_commands(settings.discord)
        stop = asyncio.Event()
        bot = asyncio.create_task(run(settings, only="discord", clock=clock_on(TODAY), stop=stop))
        await fake.wait_until(lambda: all(fake.messages(c) for c in CHANNELS), within=10)
        record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "today")
        stop.set()
        await asyncio.wait_for(bot, timeout=10)
    assert record.callback_type == 4 and record.original is not None
    assert record.original.embeds
    for channel in CHANNELS:
        [post] = [m for m in fake.messages(channel) if "interaction" not in m.extra]
        assert check_message(post.request) == []
        assert post.components  # the section buttons
    assert fake.counters.gateway["identify"] == 1
