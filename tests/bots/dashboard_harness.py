"""The dashboard's test bot: the real service with its Telegram and Discord adapters started
against the loopback doubles, and the real HTTP endpoint (dashboard, tracked links) on a free
loopback port, all on the test's event loop."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bots import dashboard, links
from bots.http import HttpEndpoint, Probe
from bots.registry import load_settings
from bots.runtime import open_service
from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.service.leadership import Leadership
from digest_core.service.root import DigestService
from digest_core.testing import PinnedClock, scaled_limits
from tests.bots.discord.harness import ADMIN_ROLE, fake_discord
from tests.bots.telegram.harness import ADMIN, CHANNEL, register_chats
from tests.bots.test_http import free_port
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.telegram_api import FakeTelegram
from tests.samples import SAMPLE_ARCHIVE

PASSWORD = "correct horse battery staple"
DISCORD_CHANNEL = 910_000_000_000_000_011
#: the evening before the issue the tests make: tomorrow is its day
NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)  # 20:00 in Asia/Shanghai
TOMORROW = dt.date(2026, 12, 1)


@dataclass
class Bot:
    """The running bot and its doubles."""

    service: DigestService
    endpoint: HttpEndpoint
    telegram: FakeTelegram
    discord: FakeDiscord
    archive: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.endpoint.port}"

    def write_issue(self, day: dt.date, text: str) -> None:
        (self.archive / f"{day}.txt").write_text(text, encoding="utf-8")
        self.service.archive.refresh(full=True)


def issue_text(day: dt.date, *, broken: bool = False) -> str:
    """The bundled issue of 2026-11-30 as the issue of ``day`` (a link broken, if asked)."""
    text = (SAMPLE_ARCHIVE / "2026-11-30.txt").read_text(encoding="utf-8")
    if broken:
        first = next(line for line in text.splitlines() if line.startswith("https://"))
        text = text.replace(first, "https://exa mple.com/broken", 1)
    return text


def _settings(
    tmp: Path, tg: FakeTelegram, dc: FakeDiscord, port: int, *, telegram_login: bool = False
) -> Any:
    archive = tmp / "archive"
    shutil.copytree(SAMPLE_ARCHIVE, archive)
    config = tmp / "digest-bot.toml"
    lines = {
        "timezone": "Asia/Shanghai",
        "archive_dir": str(archive),
        "database_url": f"sqlite+aiosqlite:///{tmp / 'ledger.db'}",
        "[schedule]": None,
        "enabled": False,
        "require_approval": True,
        "[delivery]": None,
        "backoff_base_seconds": 0.01,
        "backoff_max_seconds": 0.05,
        "[http]": None,
        "listen": f"127.0.0.1:{port}",
        "admin": True,
        "[analytics]": None,
        "track_links": True,
        "base_url": f"http://127.0.0.1:{port}/",
        "[telegram]": None,
        "channels": [str(CHANNEL)],
        "admins": [ADMIN],
        "dashboard_login": telegram_login,
        "api_base_url": tg.base_url,
        "poll_timeout_seconds": 1,
        "[discord]": None,
        "channels_": [str(DISCORD_CHANNEL)],
        "admin_roles": [ADMIN_ROLE],
        "api_base_url_": dc.api_base,
        "guild_ready_timeout_seconds": 0.05,
        "ready_timeout_seconds": 5,
    }
    text = "\n".join(
        k if v is None else f"{k.rstrip('_')} = {json.dumps(v)}" for k, v in lines.items()
    )
    config.write_text(text + "\n", encoding="utf-8")
    return load_settings(config), archive


@contextlib.asynccontextmanager
async def running(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, *, telegram_login: bool = False
) -> AsyncIterator[Bot]:
    """The bot of the dashboard tests (see the module docstring); ``telegram_login``: the
    admins may log in with Telegram's Login Widget too."""
    async with FakeTelegram(scale=100) as tg, fake_discord() as dc:
        register_chats(tg)
        monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", tg.token)
        monkeypatch.setenv("DIGEST_BOT_DISCORD__TOKEN", dc.token)
        monkeypatch.setenv("DIGEST_BOT_HTTP__ADMIN_PASSWORD", PASSWORD)
        monkeypatch.setenv("DIGEST_BOT_ANALYTICS__SECRET_KEY", "links-secret-for-tests")
        port = free_port()
        settings, archive = _settings(tmp, tg, dc, port, telegram_login=telegram_login)
        async with open_service(settings, clock=PinnedClock(NOW)) as service:
            telegram, discord = service.platforms["telegram"], service.platforms["discord"]
            telegram.limits = scaled_limits(TELEGRAM_LIMITS, 100)  # type: ignore[misc]
            await telegram.start(service)
            await discord.start(service)
            leadership = Leadership(service.ledger, name="leader", clock=service.clock)
            probe = Probe(service, leadership, [telegram, discord])
            routes = [*dashboard.endpoint_routes(settings), *links.endpoint_routes(settings)]
            endpoint = HttpEndpoint(probe, host="127.0.0.1", port=port, routes=routes)
            await endpoint.start()
            try:
                yield Bot(service, endpoint, tg, dc, archive)
            finally:
                await endpoint.stop()
                await discord.stop()
                await telegram.stop()
