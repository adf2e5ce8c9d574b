"""`digest-bot run` started while the Bot API is unreachable: it stays up, not ready, and starts
Telegram (and posts) once the API answers; a refused token still ends it. The real `run` as a
subprocess, the double as its own process started later on a port chosen in advance."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from bots.runtime import open_service
from bots.starting import PlatformStarts
from digest_core.port import Adapter
from digest_core.testing import PinnedClock
from tests import forkserver
from tests.bots.telegram.harness import (
    ARCHIVE,
    CHANNEL,
    REPO,
    TODAY,
    ZONE,
    local,
    settings_for,
    write_config,
)
from tests.bots.test_http import free_port
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram, running_process

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]


@contextmanager
def _double(port: int, *, token: str = DEFAULT_TOKEN) -> Iterator[httpx.Client]:
    """The Bot API double as its own process on ``port``, with the harness's channel."""
    args = ("--port", str(port), "--token", token)
    with running_process({CHANNEL: "channel"}, args=args) as root:
        assert root == f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=root) as client:
            yield client


def _config(tmp_path: Path, api_port: int, http_port: int) -> Path:
    """Today's issue (the real date: the subprocess runs on the system clock), due at 00:00
    and within the catch-up window, for one channel; /readyz on ``http_port``."""
    today = dt.datetime.now(ZoneInfo(ZONE)).date()
    config = write_config(
        tmp_path, base_url=f"http://127.0.0.1:{api_port}/bot", channels=[str(CHANNEL)],
        schedule=True, post_time="00:00", days=[],
    )  # fmt: skip
    shutil.copy(ARCHIVE / f"{TODAY}.txt", tmp_path / "archive" / f"{today}.txt")
    text = config.read_text().replace("catch_up_hours = 6", "catch_up_hours = 24")
    config.write_text(text + f'[http]\nlisten = "127.0.0.1:{http_port}"\n')
    return config


def _bot(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN}
    with log.open("ab") as out:
        return forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip


def _until(what: str, condition: Callable[[], Any], log: Path, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; bot log:\n{log.read_text()[-3000:]}")


def _readyz(port: int) -> tuple[int, dict[str, Any]] | None:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2.0)
    except httpx.TransportError:
        return None  # not listening yet
    return answer.status_code, answer.json()


def test_run_waits_for_an_unreachable_api_then_starts_and_posts(tmp_path: Path) -> None:
    api_port, http_port = free_port(), free_port()
    log = tmp_path / "bot.log"
    bot = _bot(_config(tmp_path, api_port, http_port), log)
    try:
        # (before it leads, /readyz says 503 for that alone: wait for the platform's reason)
        status, body = _until(
            "/readyz naming a waiting platform",
            lambda: (r := _readyz(http_port)) and "waiting" in r[1] and r,
            log,
        )
        assert status == 503, body
        assert "cannot reach the Bot API" in body["waiting"]["telegram"], body
        assert body["platforms"] == {"telegram": False}
        assert bot.poll() is None, log.read_text()  # it stays up (it exited 1 before)

        with _double(api_port) as api:
            _until("ready", lambda: (r := _readyz(http_port)) and r[0] == 200, log)
            sent = _until(
                "the catch-up post",
                lambda: len(api.get("/_fake/sent").json()["result"]) >= 2 or None,
                log,
            )
            assert sent
            posted = api.get("/_fake/sent").json()["result"]
            assert {m["chat_id"] for m in posted} == {CHANNEL}
            assert len(posted) == 2  # the whole issue, once
            bot.send_signal(signal.SIGTERM)
            assert bot.wait(20) == 0, log.read_text()[-3000:]
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait(10)
    text = log.read_text()
    assert "running without telegram (not ready)" in text, text[-3000:]
    assert "telegram is reachable again: started" in text, text[-3000:]
    assert DEFAULT_TOKEN not in text


def test_run_ends_on_a_refused_token_found_after_an_outage(tmp_path: Path) -> None:
    api_port, http_port = free_port(), free_port()
    log = tmp_path / "bot.log"
    bot = _bot(_config(tmp_path, api_port, http_port), log)
    try:
        _until("/readyz", lambda: _readyz(http_port), log)
        assert bot.poll() is None
        # the API comes back, but the bot's token was revoked meanwhile: 401 from getMe
        with _double(api_port, token="999:another-bots-token"):
            assert bot.wait(30) == 1, log.read_text()[-3000:]
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait(10)
    text = log.read_text()
    assert "configuration error: telegram.token: Telegram refused the bot token" in text
    assert DEFAULT_TOKEN not in text


def _fail(error: Exception) -> None:
    pytest.fail(f"a start that can be retried was taken as fatal: {error}")


async def test_status_names_the_platform_waiting_and_the_catch_up_follows_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process, the real PTB Application: /status says Telegram is not connected and
    why; posts leave it out meanwhile; once the API answers it starts and ``on_started``
    runs (the runtime's catch-up)."""
    port = free_port()
    fake = FakeTelegram(port=port)
    config = write_config(tmp_path, base_url=fake.base_url, channels=[str(CHANNEL)])
    settings = settings_for(config, fake, monkeypatch)
    caught_up = asyncio.Event()

    async def on_started(adapter: Adapter) -> None:
        assert adapter.name == "telegram"
        caught_up.set()

    async with open_service(settings, only="telegram", clock=PinnedClock(local(TODAY, 9))) as svc:
        started: list[Adapter] = []
        starts = PlatformStarts(
            svc, started, clock=svc.clock, on_started=on_started, on_fatal=_fail, base=0.05, cap=0.2
        )
        svc.unavailable = starts.waiting
        [telegram] = svc.platforms.values()
        try:
            assert await starts.start(telegram) is False
            status = await svc.status()
            assert "⚠ telegram 未连接 / not connected: telegram: cannot reach the Bot API" in status
            assert await svc.post(TODAY) == []  # left out, not failed: posted once it starts
            async with fake:
                fake.add_chat(CHANNEL, "channel")
                await asyncio.wait_for(caught_up.wait(), 10)
                assert started == [telegram] and starts.waiting == {}
                assert "未连接" not in await svc.status()
                [report] = await svc.post(TODAY)
                assert report.ok and fake.sent(CHANNEL)
                await telegram.stop()
        finally:
            await starts.stop()
