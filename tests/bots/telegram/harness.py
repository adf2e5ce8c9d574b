"""Importable helpers for the Telegram tests: a config on disk, the real service, the double."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bots.registry import load_settings
from bots.runtime import open_service
from bots.telegram import TelegramAdapter
from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.service.root import DigestService
from digest_core.settings import Settings
from digest_core.testing import PinnedClock, scaled_limits
from tests.fakes.telegram_api import FakeTelegram, SentMessage
from tests.samples import SAMPLE_ARCHIVE

REPO = Path(__file__).resolve().parents[3]
ARCHIVE = SAMPLE_ARCHIVE
ZONE = "Asia/Shanghai"
#: the issue the tests treat as today's (two messages on Telegram)
TODAY = dt.date(2026, 11, 27)

ADMIN = 42
ANN = 1001  # a reader who started the bot
BOB = 1002  # another reader
CHANNEL = -1001234567890
CHANNEL_NAME = "@ai_digest"  # a second channel, by username
GROUP = -4001  # a group chat where people use commands
BOT = "digest_test_bot"


def local(day: dt.date, hh: int, mm: int = 0) -> dt.datetime:
    """An aware UTC datetime for a local time in the digest's zone."""
    from zoneinfo import ZoneInfo

    return dt.datetime(day.year, day.month, day.day, hh, mm, tzinfo=ZoneInfo(ZONE)).astimezone(
        dt.UTC
    )


def write_config(
    tmp: Path,
    *,
    base_url: str,
    channels: Sequence[str] = (str(CHANNEL), CHANNEL_NAME),
    admins: Sequence[int] = (ADMIN,),
    post_time: str = "08:00",
    schedule: bool = False,
    days: Sequence[dt.date] | None = None,
    telegram: dict[str, Any] | None = None,
    delivery: dict[str, Any] | None = None,
) -> Path:
    """A TOML config in ``tmp`` with its own archive copy and SQLite file; returns its path."""
    archive = tmp / "archive"
    archive.mkdir(exist_ok=True)
    for src in sorted(ARCHIVE.iterdir()):
        if days is None or dt.date.fromisoformat(src.stem) in days:
            shutil.copy(src, archive / src.name)
    tg = {
        "channels": list(channels),
        "admins": list(admins),
        "api_base_url": base_url,
        "poll_timeout_seconds": 1,
        **(telegram or {}),
    }
    lines = [
        f'timezone = "{ZONE}"',
        f'archive_dir = "{archive}"',
        f'database_url = "sqlite+aiosqlite:///{tmp / "digest.db"}"',
        'log_level = "INFO"',
        "[schedule]",
        f'post_time = "{post_time}"',
        f"enabled = {'true' if schedule else 'false'}",
        "catch_up_hours = 6",
        "[delivery]",
        *(
            f"{k} = {json.dumps(v)}"
            for k, v in {
                "backoff_base_seconds": 0.01,
                "backoff_max_seconds": 0.05,
                **(delivery or {}),
            }.items()
        ),
        "[telegram]",
        *(f"{k} = {json.dumps(v)}" for k, v in tg.items()),
    ]
    path = tmp / "digest-bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def settings_for(path: Path, fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", fake.token)
    return load_settings(path)


def register_chats(fake: FakeTelegram) -> None:
    """The chats every test knows: two channels, a group, two readers and an admin."""
    fake.add_chat(CHANNEL, "channel", title="AI 技术日报")
    fake.add_chat(-1009999, "channel", title="AI Digest by name", username=CHANNEL_NAME)
    fake.add_chat(GROUP, "group", title="Readers")
    for user in (ADMIN, ANN, BOB):
        fake.add_chat(user, "private", first_name=f"User {user}")


@dataclass
class Running:
    """A started bot: the real service and adapter, talking to the double."""

    service: DigestService
    adapter: TelegramAdapter
    fake: FakeTelegram

    async def command(
        self,
        text: str,
        *,
        user: int = ANN,
        chat: int | None = None,
        n: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded test helper
    ) -> list[SentMessage]:
        """Inject ``text`` from ``user`` (in ``chat``, default the private chat) and wait for
        ``n`` new messages to that chat; returns just the new ones."""
        where = user if chat is None else chat
        before = len(self.fake.sent(where))
        self.fake.inject_message(where, user, text)
        sent = await self.fake.wait_for_messages(where, before + n, timeout=timeout)
        return sent[before:]

    async def settled(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a bounded helper
        """Wait until the bot has fetched every update injected so far and finished handling
        each (PTB awaits the handlers, and they their replies): what the bot has not sent by
        then, it does not send for those updates."""
        app = self.adapter._app  # the PTB Application: its update queue counts handled updates
        assert app is not None, "the adapter is not started"
        async with asyncio.timeout(timeout):
            # fetched updates are confirmed by the next poll, once they are in PTB's queue
            await self.fake.wait_for(lambda: not self.fake.pending_updates, timeout)
            await app.update_queue.join()

    def issue_file(self, day: dt.date = TODAY) -> Path:
        return self.service.archive.root / f"{day}.txt"

    def rewrite_issue(self, old: str, new: str, *, day: dt.date = TODAY) -> None:
        """Replace the first ``old`` in ``day``'s issue file by ``new`` (a new revision) and
        reread the archive."""
        path = self.issue_file(day)
        text = path.read_text(encoding="utf-8")
        assert old in text
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        self.service.archive.refresh(full=True)


@asynccontextmanager
async def running_bot(
    settings: Settings,
    fake: FakeTelegram,
    *,
    clock: Any = None,
    scale: float = 1.0,
    receive: bool = True,
) -> AsyncIterator[Running]:
    """The service from ``open_service`` with its Telegram adapter started (and stopped)."""
    clock = clock or PinnedClock(local(TODAY, 9))
    async with open_service(settings, only="telegram", clock=clock) as service:
        adapter = service.platforms["telegram"]
        assert isinstance(adapter, TelegramAdapter)
        if scale != 1.0:
            adapter.limits = scaled_limits(TELEGRAM_LIMITS, scale)
        await adapter.start(service, receive=receive)
        try:
            yield Running(service, adapter, fake)
        finally:
            await adapter.stop()


@asynccontextmanager
async def bot_with(
    fake: FakeTelegram,
    tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    scale: float = 100.0,
    **telegram: object,
) -> AsyncIterator[Running]:
    """A bot on a config written to ``tmp`` with these ``[telegram]`` options, paced at
    ``scale`` times Telegram's limits."""
    path = write_config(tmp, base_url=fake.base_url, telegram=dict(telegram))
    async with running_bot(settings_for(path, fake, monkeypatch), fake, scale=scale) as running:
        yield running


def until_answered(client: httpx.Client, within: float) -> None:
    """Wait until the double in its own process (driven over ``client``) has answered every
    request but long polls: the hung sends of a killed bot have landed, or taken effect."""
    deadline = time.monotonic() + within
    while client.get("/_fake/state").json()["result"]["unanswered"]:
        if time.monotonic() > deadline:
            raise AssertionError(f"the double still holds requests after {within} s")
        time.sleep(0.05)


def visible(messages: Sequence[SentMessage]) -> str:
    return "\n".join(m.text for m in messages)
