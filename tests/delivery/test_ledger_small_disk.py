"""An SQLite ledger on a real 2 MiB filesystem that fills up mid-post and is freed: the post waits,
then completes without the write-ahead log filling the disk again; and a real ``digest-bot run``
stops on SIGTERM while its ledger cannot write."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from bots.runtime import SHUTDOWN_BUDGET_SECONDS
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.health import RetryPolicy
from digest_core.delivery.ledger.engine import (
    WAL_AUTOCHECKPOINT_PAGES,
    WAL_LIMIT_BYTES,
    create_engine,
)
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets
from tests import forkserver
from tests.bots.telegram.harness import ARCHIVE, REPO, TODAY, ZONE, write_config
from tests.delivery.test_ledger_trouble import wait_for
from tests.fakes.telegram_api import DEFAULT_TOKEN, running_process
from tests.tmpfs import tmpfs

pytestmark = pytest.mark.slow  # real processes, servers or a browser

CHANNELS = 300
PARTS = 2
#: the real bot's channels: the double holds its sends after the first 40 (hold) while the
#: disk fills, so its post is still under way when the ledger fails
BOT_CHANNELS = [-1004000000 - i for i in range(60)]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of our own, to fill for real (needs root; skipped elsewhere)."""
    with tmpfs(tmp_path / "disk", 2) as mount:
        yield mount


def fill(path: Path) -> None:
    """Take every free block of the filesystem of ``path`` (unbuffered: closing it cannot fail)."""
    with contextlib.suppress(OSError), path.open("wb", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 16384)


#: the largest the ledger's log may grow once the disk has room again: what it is cut back to
#: when it starts over (WAL_LIMIT_BYTES), and a quarter of that for the commits that lie
#: beyond. Those are the commit that passes the checkpoint's page count and any made while a
#: reader keeps the checkpoint from finishing (SQLite's checkpoints after a commit do not wait
#: for readers). Alone this test's log ends at 257-259 pages of 4 KiB (1,058,872-1,067,112
#: bytes); on a loaded machine it has reached 267 (1,100,072 bytes, a CI run). The 2 MiB disk
#: filled again at SQLite's default of a checkpoint every 1000 pages.
LOG_BOUND_BYTES = WAL_LIMIT_BYTES + WAL_LIMIT_BYTES // 4


def wal_size(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


async def test_a_freed_disk_is_not_filled_again_by_the_log(
    tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="digest_core.delivery.ledger.core")
    clock = SystemClock()
    platform = FakePlatform(
        clock, limits=PlatformLimits(overall=Rate(1000.0, 100), per_target={}), latency=0.005
    )
    db = tiny_disk / "l.db"
    filler = tiny_disk / "filler"
    async with Ledger.open(f"sqlite+aiosqlite:///{db}", clock=clock) as ledger:
        ledger.retry_policy = RetryPolicy(base=0.05, cap=0.2)
        troubles: list[str] = []
        ledger.health.subscribe(
            lambda t, cleared: troubles.append("cleared" if cleared else t.error)
        )
        engine = DeliveryEngine(ledger, clock=clock, max_in_flight=8)
        targets, messages = make_targets(CHANNELS), make_messages(PARTS)
        post = asyncio.create_task(engine.deliver(make_issue().ref, platform, messages, targets))
        await wait_for(lambda: len(platform.sent) >= 50 or post.done(), "some sends")
        fill(filler)
        await wait_for(lambda: troubles or post.done(), "the trouble")
        assert not post.done(), "the post ended instead of waiting for the ledger"
        assert troubles == ["database or disk is full"]
        filler.unlink()
        largest = 0

        async def watch() -> None:
            nonlocal largest
            while True:
                largest = max(largest, wal_size(db))
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        report = await asyncio.wait_for(post, 60)
        watcher.cancel()
        print(f"largest log after the disk was freed: {largest} bytes")
        # what the full disk's backlog grew the log to was given back once it answered
        assert any("checkpointed the ledger's log" in r.message for r in caplog.records)
        # the log was checkpointed and cut back once the disk had room again: from then on it
        # stays near its limit, far from refilling the disk
        assert largest <= LOG_BOUND_BYTES, largest
        assert wal_size(db) <= LOG_BOUND_BYTES, wal_size(db)
    assert report.ok, report
    assert troubles == ["database or disk is full", "cleared"]
    sent = Counter((s.target.id, s.message.payload["part"]) for s in platform.sent)
    assert len(sent) == CHANNELS * PARTS and max(sent.values()) == 1


@pytest.fixture
def telegram_double() -> Iterator[str]:
    """The Telegram double as its own process (real flood limits), with the channels added;
    its root URL."""
    with running_process(dict.fromkeys(BOT_CHANNELS, "channel")) as root:
        try:
            yield root
        finally:
            _client(root).close()
            _client.cache_clear()


@functools.cache
def _client(root: str) -> httpx.Client:
    """One client a double, closed with it (a new one costs about 16 ms of CPU, for its
    TLS context: too much for a condition polled every 50 ms)."""
    return httpx.Client(base_url=root)


def sent_count(root: str) -> int:
    return len(_client(root).get("/_fake/sent").json()["result"])


def control(root: str, action: str, **body: object) -> object:
    """The double's control API (tests/fakes/telegram_api.py): hold, release, state."""
    answer = _client(root).post(f"/_fake/{action}", json=body).json()
    assert answer["ok"], answer
    return answer["result"]


def sent_keys(root: str) -> list[tuple[int, int]]:
    """(chat, part) of every message the double took: the last part carries the keyboard."""
    sent = _client(root).get("/_fake/sent").json()["result"]
    return [(int(m["chat_id"]), PARTS - 1 if m.get("reply_markup") else 0) for m in sent]


def empty_log(db: Path) -> None:
    """Checkpoint ``db``'s write-ahead log into the database and cut the log to nothing (as a
    backup tool may, from another process), so that the next write must take new blocks. A
    log keeps its size after a checkpoint and is written over from its start: filled up
    then, a full disk could take every write left of a post (a fresh clone's run once saw
    no trouble at all)."""
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        for _ in range(200):
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy and wal_size(db) == 0:
                return
            time.sleep(0.05)
    raise AssertionError(f"the log of {db} could not be emptied: {wal_size(db)} bytes")


def wait_until(condition: Callable[[], bool], what: str, log: Path, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; bot log:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
@pytest.mark.timeout(300)  # two runs of a real bot, on a machine that may be busy
def test_sigterm_stops_the_bot_while_its_ledger_cannot_write(
    tiny_disk: Path, tmp_path: Path, telegram_double: str
) -> None:
    today = dt.datetime.now(ZoneInfo(ZONE)).date()
    config = write_config(
        tmp_path, base_url=telegram_double + "/bot", channels=[str(c) for c in BOT_CHANNELS],
        schedule=True, post_time="00:00", days=[],
    )  # fmt: skip
    shutil.copy(ARCHIVE / f"{TODAY}.txt", tmp_path / "archive" / f"{today}.txt")
    text = config.read_text().replace("catch_up_hours = 6", "catch_up_hours = 24")
    config.write_text(text.replace(str(tmp_path / "digest.db"), str(tiny_disk / "digest.db")))
    log = tmp_path / "bot.log"
    env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN}

    def start() -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return forkserver.Popen(
                [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip

    bot = start()
    try:
        wait_until(lambda: sent_count(telegram_double) >= 40, "the post to start", log, seconds=60)
        control(telegram_double, "hold", method="sendMessage")  # the next sends stay in flight
        wait_until(
            lambda: control(telegram_double, "state")["held"] > 0, "a send held", log, seconds=30
        )  # fmt: skip
        empty_log(tiny_disk / "digest.db")
        fill(tiny_disk / "filler")
        control(telegram_double, "release", method="sendMessage")  # their records meet the disk
        wait_until(
            lambda: "ledger trouble: database or disk is full" in log.read_text(),
            "the ledger to fail",
            log,
            seconds=30,
        )
        assert bot.poll() is None, log.read_text()[-3000:]
        assert sent_count(telegram_double) < len(BOT_CHANNELS) * PARTS, "the post was over"
        asked = time.monotonic()
        bot.send_signal(signal.SIGTERM)
        try:
            code = bot.wait(SHUTDOWN_BUDGET_SECONDS + 5)  # the budget, and a slow machine's
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running {SHUTDOWN_BUDGET_SECONDS + 5:.0f} s after SIGTERM; log:\n"
                + log.read_text()[-3000:]
            ) from None
        print(f"stopped {time.monotonic() - asked:.1f} s after SIGTERM (exit {code})")
        assert code == 0, log.read_text()[-3000:]

        # room again: the next start sends what is left, and at most the parts the stop
        # left in flight (they may have arrived) a second time
        (tiny_disk / "filler").unlink()
        with sqlite3.connect(tiny_disk / "digest.db") as db:
            (maybe_sent,) = db.execute(
                "SELECT count(*) FROM parts WHERE state IN ('in_flight', 'unknown')"
            ).fetchone()
        bot = start()
        expected = {(chat, part) for chat in BOT_CHANNELS for part in range(PARTS)}
        wait_until(
            lambda: set(sent_keys(telegram_double)) >= expected, "the rest", log, seconds=120
        )
        bot.send_signal(signal.SIGTERM)
        assert bot.wait(SHUTDOWN_BUDGET_SECONDS + 5) == 0, log.read_text()[-3000:]
        copies = Counter(sent_keys(telegram_double))
        assert set(copies) == expected
        assert sum(n - 1 for n in copies.values()) <= maybe_sent
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait()


async def test_a_ledger_connection_bounds_its_log(tmp_path: Path) -> None:
    """What keeps the log from refilling a freed disk, on each of the ledger's SQLite
    connections (the settings are per connection): a checkpoint every
    WAL_AUTOCHECKPOINT_PAGES pages, and the file cut back to WAL_LIMIT_BYTES when the log
    starts over (SQLite keeps it at its largest size otherwise)."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'l.db'}", echo=False)
    try:
        async with engine.connect() as conn:
            limit = (await conn.exec_driver_sql("PRAGMA journal_size_limit")).scalar()
            pages = (await conn.exec_driver_sql("PRAGMA wal_autocheckpoint")).scalar()
    finally:
        await engine.dispose()
    assert (limit, pages) == (WAL_LIMIT_BYTES, WAL_AUTOCHECKPOINT_PAGES)
