"""The two-process failover set-up: `digest-bot run` processes with their HTTP endpoints, a
config for a post due now on many channels of the Telegram double (tests and benchmarks)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp

from tests import forkserver, ports
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram
from tests.samples import SAMPLE_ARCHIVE

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = sorted(SAMPLE_ARCHIVE.glob("2026-*.txt"))[0]
#: a channel gets the issue as one message: at Telegram's 29 messages/s overall, 60 channels
#: take about 2 s, long enough to kill the leader in the middle
CHANNELS = [-1001000000001 - i for i in range(60)]
#: the leader's lease: a standby takes over within 4/3 of it (the default is 15 s)
LEASE = 3
#: the spec: a standby takes over within this many seconds of the leader's death
TAKEOVER_LIMIT = 30.0


def free_port() -> int:
    return ports.free_port()


def zone_at_noon(now: dt.datetime) -> str:
    """A fixed-offset zone where it is about noon now: the post time an hour ago is today."""
    offset = (12 - now.hour) % 24
    if offset > 12:
        offset -= 24
    return "UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"


async def eventually(condition: Callable[[], bool], *, within: float, step: float = 0.05) -> None:
    """Wait until ``condition()`` holds (it is asserted at the end, so a timeout fails)."""
    for _ in range(int(within / step)):
        if condition():
            return
        await asyncio.sleep(step)
    assert condition()


class Bot:
    """One `digest-bot run` process with its HTTP endpoint."""

    def __init__(self, name: str, config: Path, cwd: Path, *, host: str | None = None) -> None:
        self.name = name
        self.port = free_port()
        self.config = cwd / f"{name}.toml"
        self.config.write_text(config.read_text() + f'\n[http]\nlisten = "127.0.0.1:{self.port}"\n')
        self.log = cwd / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
        env.update(PYTHONPATH=str(ROOT), DIGEST_BOT_TELEGRAM__TOKEN=DEFAULT_TOKEN)
        with self.log.open("wb") as err:
            # ``host``: in a UTS namespace of its own under that host name, so that the other
            # process cannot see it die and must wait for its lease to lapse
            other_host = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host]
            self.proc = forkserver.Popen(
                [
                    *(other_host if host else []),
                    sys.executable,
                    "-m",
                    "bots.cli",
                    "run",
                    "--config",
                    str(self.config),
                    "--log-format",
                    "json",
                ],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    async def get(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"http://127.0.0.1:{self.port}{path}", timeout=aiohttp.ClientTimeout(total=5)
            ) as response,
        ):
            return response.status, await response.text()

    async def readyz(self) -> tuple[int, dict[str, Any]] | None:
        """(status, body) of /readyz; None until this process answers it (not another program
        that took the free port first)."""
        try:
            status, text = await self.get("/readyz")
        except (aiohttp.ClientError, TimeoutError):
            return None
        body = json.loads(text)
        if f":{self.proc.pid}:" not in str(body.get("owner")):
            return None
        return status, body

    async def wait_ready(self, *, within: float) -> str:
        """Wait until /readyz says ready; the role."""
        for _ in range(int(within / 0.05)):
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log.read_text()}"
            seen = await self.readyz()
            if seen is not None and seen[0] == 200:
                return str(seen[1]["role"])
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name} not ready within {within} s")

    async def wait_role(self, role: str, *, within: float) -> float:
        """Wait until /readyz says ready in ``role``; the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < within:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log.read_text()}"
            seen = await self.readyz()
            if seen is not None and seen[0] == 200 and seen[1]["role"] == role:
                return time.monotonic() - start
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name} not ready as {role} within {within} s: {seen}")

    def records(self) -> list[dict[str, Any]]:
        return [
            json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")
        ]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(10)


def write_config(
    tmp_path: Path,
    url: str,
    tg: FakeTelegram,
    *,
    lease: float = LEASE,
    channels: list[int] = CHANNELS,
) -> tuple[Path, Path, dt.date]:
    """A config (ledger ``url``, the double ``tg``'s ``channels``, the post due an hour ago)
    and an empty archive folder; returns (config, archive, the local date of the post)."""
    now = dt.datetime.now(dt.UTC)
    zone = zone_at_noon(now)
    local = now.astimezone(ZoneInfo(zone))
    post = local - dt.timedelta(hours=1)
    archive = tmp_path / "archive"
    archive.mkdir()
    config = tmp_path / "base.toml"
    config.write_text(
        f'timezone = "{zone}"\n'
        f'archive_dir = "{archive}"\n'
        f'database_url = "{url}"\n'
        "[schedule]\n"
        f'post_time = "{post:%H:%M}"\n'
        "catch_up_hours = 6\n"
        "retry_minutes = 0.02\n"
        # the tests copy the issue in moments before it is due: without this each post first
        # waited up to 10 s for the file to settle (tests/bots/telegram/test_half_saved.py
        # tests that wait; conftest's no_settle_wait does not reach these processes)
        "settle_seconds = 0\n"
        "[telegram]\n"
        f'api_base_url = "{tg.base_url}"\n'
        f"channels = {json.dumps([str(c) for c in channels])}\n"
        "poll_timeout_seconds = 2\n"
        "[leader]\n"
        f"lease_seconds = {lease}\n"
    )
    return config, archive, local.date()


def can_unshare() -> bool:
    try:
        done = subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
