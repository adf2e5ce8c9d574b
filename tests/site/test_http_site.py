"""`[http] site = true`: the web archive served by `digest-bot run` at its HTTP endpoint's root,
beside /healthz, over real HTTP; a future issue is never served."""

from __future__ import annotations

import asyncio
import io
import shutil
from pathlib import Path

import pytest

from bots import runtime
from bots.registry import load_settings
from digest_core.errors import ConfigError
from tests.bots.test_http import eventually, free_port, get
from tests.samples import SAMPLE_ARCHIVE


async def test_run_serves_the_site_beside_the_health_endpoints(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    shutil.copytree(SAMPLE_ARCHIVE, archive)
    # a file for a day far ahead: under embargo whatever the machine's date
    shutil.copy(archive / "2026-11-27.txt", archive / "2099-01-01.txt")
    port = free_port()
    config = tmp_path / "bot.toml"
    config.touch()
    settings = load_settings(
        config,
        overrides={
            "archive_dir": archive,
            "database_url": f"sqlite+aiosqlite:///{tmp_path}/ledger.db",
            "http": {"listen": f"127.0.0.1:{port}", "site": True},
            "site": {"base_url": "https://digest.example/"},
            "schedule": {"enabled": False},
        },
    )
    stop = asyncio.Event()
    task = asyncio.create_task(
        runtime.run(settings, stop=stop, stdin=io.StringIO(""), out=io.StringIO())
    )
    try:

        async def page() -> tuple[int, str] | None:
            assert not task.done(), task
            try:
                answer = await get(port, "/2026/11/27/")
            except OSError:
                return None
            return answer if answer[0] == 200 else None

        _, html = await eventually(page)
        assert "KV 缓存" in html and 'href="https://digest.example/2026/11/27/"' in html
        assert await get(port, "/healthz") == (200, "ok\n")
        assert (await get(port, "/2099/01/01/"))[0] == 404
        status, index = await get(port, "/")
        assert status == 200 and "2099" not in index
        status, feed = await get(port, "/feed.xml")
        assert status == 200 and "2099-01-01" not in feed
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)


def test_site_without_listen_is_refused_at_start(tmp_path: Path) -> None:
    config = tmp_path / "bot.toml"
    config.write_text("[http]\nsite = true\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert "listen" in str(info.value) and "http" in str(info.value)
