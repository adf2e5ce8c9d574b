"""Issue 20, item 7: Discord's login errors say what Telegram's say, in words, not reprs; a
token that is not token-shaped is refused before any request, naming the variable."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import discord
import pytest

from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.errors import TransientError
from tests import forkserver
from tests.bots.discord.harness import TODAY, clock_on
from tests.fakes.discord_api import FAKE_TOKEN
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser


def _config(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{tmp_path / "archive"}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n'
        '[discord]\nchannels = ["123456789012345678"]\n',
        encoding="utf-8",
    )
    return cfg


async def test_a_host_that_does_not_resolve_at_login_is_one_plain_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGEST_BOT_DISCORD__TOKEN", FAKE_TOKEN)
    settings = load_settings(_config(tmp_path))  # the default API base: nothing to point at
    # where discord.py sends its login (the default is discord.com); .invalid never resolves
    monkeypatch.setattr(discord.http.Route, "BASE", "https://discord.invalid/api/v10")
    async with open_service(settings, only="discord", clock=clock_on(TODAY)) as service:
        adapter = service.platforms["discord"]
        with pytest.raises(TransientError) as caught:
            await adapter.start(service)
    text = str(caught.value)
    assert text.startswith(
        "discord:login: cannot reach Discord at https://discord.invalid/api/v10: cannot resolve "
        "discord.invalid ("
    ), text
    assert text.endswith("; check the network or [discord] api_base_url"), text
    assert "ConnectionKey" not in text and "gaierror" not in text


def test_a_token_that_is_not_token_shaped_is_refused_before_any_request(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    base = f"http://127.0.0.1:{listener.getsockname()[1]}/api/v10"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    env |= {"DIGEST_BOT_DISCORD__TOKEN": "garbage", "DIGEST_BOT_DISCORD__API_BASE_URL": base}
    with listener:
        done = forkserver.run(
            [sys.executable, "-m", "bots.cli", "--config", str(cfg), "post", "--date",
             "2026-11-30", "--platform", "discord"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        with pytest.raises(BlockingIOError):  # nobody connected: no request was made
            listener.accept()
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "digest-bot: configuration error: discord.token: DIGEST_BOT_DISCORD__TOKEN does not "
        "look like a Discord bot token (three parts joined by dots, about 70 characters, like "
        "MTA…): copy it again from the Developer Portal, Bot → Reset Token"
    ]
    assert "garbage" not in done.stderr
