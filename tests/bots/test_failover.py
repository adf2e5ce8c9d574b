"""Two `digest-bot run` processes on one PostgreSQL ledger: one leads, the other takes over.

Real parts throughout: two processes of the real CLI, a real PostgreSQL server (tests/pg.py),
the Telegram double over loopback HTTP, the HTTP endpoint of each process to see its role.
The leader is SIGKILLed in the middle of the daily post; the standby must take over, send
what is left (nothing lost) and repeat at most the parts that were in flight (one per channel).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bots import registry
from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, PartState
from digest_core.loading import load_issue
from digest_core.rendering import Part, RenderOptions, render
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = sorted((ROOT / "archive").glob("2026-*.txt"))[0]
#: a channel gets the issue as one message: at Telegram's 29 messages/s overall, 60 channels
#: take about 2 s, long enough to kill the leader in the middle
CHANNELS = [-1001000000001 - i for i in range(60)]
#: the leader's lease: a standby takes over within 4/3 of it (the default is 15 s)
LEASE = 3
#: the spec: a standby takes over within this many seconds of the leader's death
TAKEOVER_LIMIT = 30.0

pytestmark = pytest.mark.timeout(150)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def zone_at_noon(now: dt.datetime) -> str:
    """A fixed-offset zone where it is about noon now: the post time an hour ago is today."""
    offset = (12 - now.hour) % 24
    if offset > 12:
        offset -= 24
    return "UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"


async def eventually(condition: Callable[[], bool], *, within: float, step: float = 0.2) -> None:
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
            self.proc = subprocess.Popen(
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
        try:
            status, text = await self.get("/readyz")
        except (aiohttp.ClientError, TimeoutError):
            return None
        return status, json.loads(text)

    async def wait_ready(self, *, within: float) -> str:
        """Wait until /readyz says ready; the role."""
        for _ in range(int(within / 0.2)):
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log.read_text()}"
            seen = await self.readyz()
            if seen is not None and seen[0] == 200:
                return str(seen[1]["role"])
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.name} not ready within {within} s")

    async def wait_role(self, role: str, *, within: float) -> float:
        """Wait until /readyz says ready in ``role``; the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < within:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log.read_text()}"
            seen = await self.readyz()
            if seen is not None and seen[0] == 200 and seen[1]["role"] == role:
                return time.monotonic() - start
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.name} not ready as {role} within {within} s: {seen}")

    def records(self) -> list[dict[str, Any]]:
        return [
            json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")
        ]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        for chat in CHANNELS:
            fake.add_chat(chat, "channel", title=f"channel {chat}")
        yield fake


@pytest.fixture
def bots() -> Iterator[list[Bot]]:
    started: list[Bot] = []
    yield started
    for bot in started:
        bot.kill()


def write_config(tmp_path: Path, url: str, tg: FakeTelegram) -> tuple[Path, Path, dt.date]:
    now = dt.datetime.now(dt.UTC)
    zone = zone_at_noon(now)
    from zoneinfo import ZoneInfo

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
        "[telegram]\n"
        f'api_base_url = "{tg.base_url}"\n'
        f"channels = {json.dumps([str(c) for c in CHANNELS])}\n"
        "poll_timeout_seconds = 2\n"
        "[leader]\n"
        f"lease_seconds = {LEASE}\n"
    )
    return config, archive, local.date()


def can_unshare() -> bool:
    try:
        done = subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@pytest.mark.parametrize("hosts", ["one host", "two hosts"])
async def test_sigkill_the_leader_mid_post_and_the_standby_finishes_it(
    tmp_path: Path, pg_url: str, tg: FakeTelegram, bots: list[Bot], hosts: str
) -> None:
    """On one host the standby sees the leader's pid is gone and takes over at its next try;
    across hosts (UTS namespaces) it must wait for the leader's lease to lapse, and then free
    the dead leader's delivery lease to resume the post at once."""
    if hosts == "two hosts" and not can_unshare():
        pytest.skip("unshare --uts is not permitted here")
    config, archive, today = write_config(tmp_path, pg_url, tg)
    staged = tmp_path / f"{today}.txt"
    shutil.copy(SAMPLE, staged)
    issue = load_issue(staged)
    parts = render(
        issue,
        registry.spec("telegram").renderer(),
        Part.ALL,
        options=RenderOptions(buttons=True, link_preview=True),
    )

    apart = hosts == "two hosts"
    bots.append(Bot("one", config, tmp_path, host="host-one" if apart else None))
    bots.append(Bot("two", config, tmp_path, host="host-two" if apart else None))
    roles = await asyncio.gather(*(bot.wait_ready(within=30) for bot in bots))
    assert sorted(roles) == ["leader", "standby"]
    first, second = bots if roles[0] == "leader" else reversed(bots)
    # both are up and only the leader polls: no getUpdates was ever answered 409 Conflict
    await asyncio.sleep(2)
    assert tg.calls("getUpdates") and not [c for c in tg.calls("getUpdates") if c.status == 409]
    status, body = (await second.readyz()) or (0, {})
    assert status == 200 and body["leader"] == (await first.readyz() or (0, {}))[1]["owner"]

    os.replace(staged, archive / staged.name)  # the issue arrives: the leader posts it
    await eventually(lambda: len(tg.sent()) >= 15, within=30, step=0.05)
    first.kill()
    killed_at = time.monotonic()
    sent_by_first = len(tg.sent())
    assert sent_by_first < len(CHANNELS) * len(parts), "killed mid-post"
    async with Ledger.open(pg_url, clock=SystemClock()) as ledger:  # before the takeover
        in_flight = len(await ledger.records(states=[PartState.IN_FLIGHT]))
    calls_at_kill = len(tg.calls("getUpdates"))

    takeover = await second.wait_role("leader", within=TAKEOVER_LIMIT)
    print(f"takeover {time.monotonic() - killed_at:.1f} s after SIGKILL (waited {takeover:.1f})")
    expected = len(CHANNELS) * len(parts)
    # the post resumes at once, not when the dead leader's delivery lease (60 s) lapses: the
    # spec's 30 s, of which the rest of the post itself takes about 2 s
    await eventually(
        lambda: all(len({m.text for m in tg.sent(c)}) == len(parts) for c in CHANNELS),
        within=TAKEOVER_LIMIT - (time.monotonic() - killed_at),
    )
    # nothing lost: every channel has every part
    wanted = {p.text for p in tg.sent(CHANNELS[0])}
    for chat in CHANNELS:
        assert {m.text for m in tg.sent(chat)} == wanted and len(wanted) == len(parts)
    # repeated: at most the parts in flight when the leader died
    repeats = {
        c: sum(n - 1 for n in Counter(m.text for m in tg.sent(c)).values()) for c in CHANNELS
    }
    assert all(n <= 1 for n in repeats.values()), repeats
    assert sum(repeats.values()) == len(tg.sent()) - expected <= in_flight
    print(
        f"{sent_by_first} sent before the kill, {in_flight} in flight, "
        f"{len(tg.sent()) - expected} repeated"
    )

    # the new leader polls now; the only 409 is the answer to the dead leader's long poll
    await eventually(lambda: len(tg.calls("getUpdates")) > calls_at_kill + 1, within=30)
    assert len([c for c in tg.calls("getUpdates") if c.status == 409]) <= 1
    took = [r for r in second.records() if "took over from" in str(r.get("msg"))]
    assert took and took[0]["level"] == "WARNING"

    status, text = await second.get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["digest_leader"].samples[0].value == 1
    sent_metric = [
        s.value
        for s in families["digest_messages"].samples
        if s.name == "digest_messages_total"
        and s.labels == {"platform": "telegram", "outcome": "sent"}
    ]
    after = len(tg.sent()) - sent_by_first  # (a send of the first may land after the count)
    assert len(sent_metric) == 1 and after - len(CHANNELS) <= sent_metric[0] <= after

    second.proc.send_signal(signal.SIGTERM)
    # (waited in a thread: the Telegram double in this loop must answer its last calls)
    assert await asyncio.to_thread(second.proc.wait, 20) == 0
