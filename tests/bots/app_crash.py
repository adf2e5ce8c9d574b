"""Helpers of the app bots' crash tests (Feishu, DingTalk): a config on which `digest-bot run`
posts today's issue as it starts, readers subscribed in its ledger beforehand, the bot as a
subprocess, and the ledger's parts left in flight."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from digest_core.clock import SystemClock
from digest_core.delivery import Ledger
from tests import forkserver
from tests.bots.telegram.harness import ARCHIVE, REPO, TODAY, ZONE

#: the sample issue posted as today's
SAMPLE = ARCHIVE / f"{TODAY}.txt"


def today() -> dt.date:
    """Today in the digest's zone (the subprocess runs on the system clock)."""
    return dt.datetime.now(ZoneInfo(ZONE)).date()


def write_run_config(tmp: Path, platform: str, table: dict[str, Any]) -> Path:
    """A config whose schedule posts at 00:00 with a whole day to catch up, so `run` posts
    today's issue (the sample, copied under today's date) as soon as it starts."""
    archive = tmp / "archive"
    archive.mkdir(exist_ok=True)
    shutil.copy(SAMPLE, archive / f"{today()}.txt")
    lines = [
        f'timezone = "{ZONE}"',
        f'archive_dir = "{archive}"',
        f'database_url = "sqlite+aiosqlite:///{tmp / "digest.db"}"',
        'log_level = "INFO"',
        "[schedule]",
        'post_time = "00:00"',
        "enabled = true",
        "catch_up_hours = 24",
        "[delivery]",
        "backoff_base_seconds = 0.01",
        "backoff_max_seconds = 0.05",
        f"[{platform}]",
        *(f"{k} = {json.dumps(v)}" for k, v in table.items()),
    ]
    path = tmp / "digest-bot.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def subscribe(tmp: Path, platform: str, readers: Iterable[str]) -> None:
    """Subscribe ``readers`` in the config's ledger, as their /subscribe would have."""

    async def run() -> None:
        url = f"sqlite+aiosqlite:///{tmp / 'digest.db'}"
        async with Ledger.open(url, clock=SystemClock()) as ledger:
            for reader in readers:
                await ledger.subscribe(platform, reader)

    asyncio.run(run())


def start_bot(config: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`digest-bot run --config` as a subprocess, its output appended to ``log``."""
    with log.open("ab") as out:
        return forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
            cwd=REPO, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip


def wait_for(condition: Callable[[], bool], timeout: float, log: Path) -> None:
    """Poll ``condition`` until it holds; fail with the bot's log after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; bot log:\n{log.read_text()[-4000:]}")
        time.sleep(0.01)


def parts_in(db: Path, state: str) -> int:
    """How many ledger parts are in ``state`` (``in_flight``: the only ones a kill can repeat)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (n,) = conn.execute("SELECT count(*) FROM parts WHERE state = ?", (state,)).fetchone()
    return int(n)


def stop(bot: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM ``bot`` and check it exits cleanly."""
    bot.terminate()
    try:
        code = bot.wait(30)
    except subprocess.TimeoutExpired:
        bot.kill()
        bot.wait(10)
        raise AssertionError(f"the bot did not stop; log:\n{log.read_text()[-4000:]}") from None
    assert code == 0, log.read_text()[-4000:]
