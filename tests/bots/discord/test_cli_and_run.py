"""`digest-bot discord sync|invite` and `digest-bot run` against the loopback Discord double."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bots.cli import main
from bots.discord.cli import sync_commands
from bots.runtime import run
from digest_core.commands.catalogue import CATALOGUE
from digest_core.rendering.discord import check_message
from tests import forkserver, ports
from tests.bots.discord.harness import (
    CHANNELS,
    GUILD,
    READER,
    REPO,
    TODAY,
    clock_on,
    fake_discord,
    fake_discord_in_thread,
    make_settings,
)
from tests.fakes.discord_api import FakeDiscord

pytestmark = pytest.mark.slow  # real processes, servers or a browser

#: every slash command: the catalogue's listed commands, less those another one covers
COMMANDS = {s.name for s in CATALOGUE if s.menu and not s.covered_by}


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


def test_sigterm_tells_a_deferred_interaction_to_try_again_before_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #8: a /subscribe deferred ("thinking…") when SIGTERM comes gets a follow-up
    saying the bot is restarting before the real `digest-bot run` process exits, instead of
    thinking forever."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-discord", daemon=True)
    thread.start()

    def on_fake(coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    manager = fake_discord()
    fake = on_fake(manager.__aenter__())
    log = tmp_path / "bot.log"
    try:
        make_settings(tmp_path, monkeypatch, fake, guild_ready_timeout_seconds=0.05)
        config = str(tmp_path / "digest-bot.toml")
        assert main(["discord", "sync", "--guild", str(GUILD), "--config", config]) == 0
        env = {**os.environ, "DIGEST_BOT_DISCORD__TOKEN": fake.token}
        with log.open("wb") as out:
            bot = forkserver.Popen(
                [sys.executable, "-m", "bots.cli", "run", "--only", "discord", "--config", config],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 30  # until connected and ready
            while "digest-bot running on discord" not in log.read_text():
                assert time.monotonic() < deadline and bot.poll() is None, log.read_text()
                time.sleep(0.05)
            # opening the DM channel hangs: the bot defers, and is still working at SIGTERM
            loop.call_soon_threadsafe(lambda: fake.fail_next(None, "slow", delay=60))
            record = on_fake(fake.run_slash_command(GUILD, CHANNELS[0], READER, "subscribe"))
            assert record.callback_type == 5 and not record.followups  # "thinking…"
            bot.send_signal(signal.SIGTERM)
            code = bot.wait(30)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait(10)
        assert code == 0, log.read_text()[-3000:]
        # the follow-up came before the process ended, and replaced "thinking…"
        [notice] = record.followups
        assert notice is record.original and notice.ephemeral
        assert "机器人正在重启，请稍后重试" in notice.content
        assert "The bot is restarting, please try again" in notice.content
    finally:
        on_fake(manager.__aexit__(None, None, None))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def test_digest_bot_run_waits_for_an_unreachable_discord_then_posts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Started while Discord does not answer (it exited before): `run` stays up, retries
    the login in the background, and once Discord answers starts and posts the catch-up."""
    port = ports.free_port()
    settings = make_settings(tmp_path, monkeypatch, FakeDiscord(port=port), schedule=True)
    caplog.set_level(logging.INFO, logger="bots.starting")
    stop = asyncio.Event()
    bot = asyncio.create_task(run(settings, only="discord", clock=clock_on(TODAY), stop=stop))
    try:
        async with asyncio.timeout(20):
            while "running without discord" not in caplog.text:
                assert not bot.done(), bot
                await asyncio.sleep(0.05)
        async with fake_discord(port=port) as fake:
            await fake.wait_until(lambda: all(fake.messages(c) for c in CHANNELS), within=20)
            stop.set()
            await asyncio.wait_for(bot, timeout=10)
    finally:
        stop.set()
        await asyncio.wait_for(bot, timeout=10)
    assert bot.exception() is None
    assert "discord is reachable again: started" in caplog.text
