"""Discord end-to-end helpers: a fake server, a config pointing the real bot at it, the bot."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bots.discord import DiscordAdapter
from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.service.root import DigestService
from digest_core.settings import Settings
from digest_core.testing import PinnedClock
from tests.fakes import discord_payloads as p
from tests.fakes.discord_api import FakeDiscord
from tests.samples import SAMPLE_ARCHIVE

REPO = Path(__file__).resolve().parents[3]
GUILD = 910_000_000_000_000_001
CHANNELS = (910_000_000_000_000_011, 910_000_000_000_000_012, 910_000_000_000_000_013)
OTHER_CHANNEL = 910_000_000_000_000_019  # in the server, not configured for posts
ADMIN_ROLE = 910_000_000_000_000_021
READER = 910_000_000_000_000_031
ADMIN_USER = 910_000_000_000_000_032
MANAGER = 910_000_000_000_000_033
ALERTED = 910_000_000_000_000_034
#: the newest bundled issue: one message of 8 embeds with buttons
TODAY = dt.date(2026, 11, 30)
#: an issue of two messages
TWO_PARTS = dt.date(2026, 11, 27)
#: Manage Server on top of a plain member's permissions
MANAGE_GUILD = p.DEFAULT_MEMBER_PERMISSIONS | (1 << 5)


def clock_on(day: dt.date, hour: int = 9) -> PinnedClock:
    """A clock at ``hour``:00 Asia/Shanghai (UTC+8) on ``day``."""
    return PinnedClock(dt.datetime(day.year, day.month, day.day, hour - 8, tzinfo=dt.UTC))


@contextlib.asynccontextmanager
async def fake_discord(**options: Any) -> AsyncIterator[FakeDiscord]:
    """A fake Discord with one server: the configured channels, another one, an admin role."""
    async with FakeDiscord(**options) as fake:
        await fake.add_guild(
            GUILD,
            "AI 技术日报 readers",
            channels=[
                *((c, f"digest-{i}") for i, c in enumerate(CHANNELS)),
                (OTHER_CHANNEL, "chat"),
            ],
            roles=[(ADMIN_ROLE, "digest admins")],
        )
        yield fake


@contextlib.contextmanager
def fake_discord_in_thread(**options: Any) -> Iterator[FakeDiscord]:
    """:func:`fake_discord` on an event loop of its own, for code that runs ``asyncio.run``
    itself (the CLI)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-discord", daemon=True)
    thread.start()
    manager = fake_discord(**options)
    try:
        yield asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def make_settings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake: FakeDiscord,
    *,
    channels: tuple[int | dict[str, Any], ...] = CHANNELS,
    schedule: bool = False,
    **discord: Any,
) -> Settings:
    """Settings from a TOML file in ``tmp_path``: a copy of the bundled archive, a fresh SQLite
    ledger, the token in the environment and ``api_base_url`` at ``fake``. A channel given as
    a dict is written as a table (``{ id = "…", forum = true }``)."""
    archive = tmp_path / "archive"
    if not archive.exists():
        shutil.copytree(SAMPLE_ARCHIVE, archive)
    values: dict[str, Any] = {
        "channels": [c if isinstance(c, dict) else str(c) for c in channels],
        "admin_roles": [ADMIN_ROLE],
        "admin_users": [],
        "api_base_url": fake.api_base,
        "guild_ready_timeout_seconds": 0.05,
        "ready_timeout_seconds": 5,
        **discord,
    }
    lines = [
        f'archive_dir = "{archive}"',
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.sqlite3"}"',
        "[schedule]",
        f"enabled = {_toml(schedule)}",
        'post_time = "08:00"',
        "[delivery]",
        "backoff_base_seconds = 0.05",
        "backoff_max_seconds = 0.2",
        "[discord]",
        *(f"{k} = {_toml(v)}" for k, v in values.items()),
    ]
    config = tmp_path / "digest-bot.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("DIGEST_BOT_DISCORD__TOKEN", fake.token)
    return load_settings(config)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return str(value)


@contextlib.asynccontextmanager
async def running_bot(
    settings: Settings, *, clock: Any = None, receive: bool = True
) -> AsyncIterator[tuple[DigestService, DiscordAdapter]]:
    """The service of ``digest-bot run --only discord`` with its adapter started."""
    async with open_service(settings, only="discord", clock=clock or clock_on(TODAY)) as service:
        adapter = service.platforms["discord"]
        assert isinstance(adapter, DiscordAdapter)
        await adapter.start(service, receive=receive)
        try:
            yield service, adapter
        finally:
            await adapter.stop()
