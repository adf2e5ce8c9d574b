"""`digest-bot run` on an SQLite ledger, whose leadership and delivery leases are OS locks.

A ledger write-locked by another client for 8 s mid-post only makes the post wait (no lease
lapses, nothing steps down, the process stays), and a `digest-bot post` whose clock is 120 s
ahead is refused while the bot delivers (it sends nothing, so nothing twice).

Real parts throughout: the real CLI in processes of its own, a real second SQLite client
holding the write lock, libfaketime for the skewed clock (tests/clockskew.py), the Telegram
double over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from bots import registry
from digest_core.loading import load_issue
from digest_core.rendering import Part, RenderOptions, render
from tests import forkserver
from tests.bots.failover_harness import ROOT, SAMPLE, Bot, eventually, write_config
from tests.clockskew import skewed_env
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegram

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: the issue's channels: after 20 sends the double holds the rest in flight (FakeTelegram.hold),
#: so the post is still under way, however long the fault takes, until the test lets it go on
CHANNELS = [-1002000000001 - i for i in range(60)]

#: another SQLite client: takes the write lock, prints "locked", gives it back on a line
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


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


def parts_of(path: Path) -> int:
    """How many messages the issue at ``path`` is on a Telegram channel."""
    options = RenderOptions(buttons=True, link_preview=True)
    return len(
        render(load_issue(path), registry.spec("telegram").renderer(), Part.ALL, options=options)
    )


@contextlib.asynccontextmanager
async def write_locked(database: Path) -> AsyncIterator[None]:
    """Within the block another process holds the SQLite write lock of ``database``."""
    pipe = asyncio.subprocess.PIPE
    locker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOCKER, str(database), stdin=pipe, stdout=pipe
    )
    assert locker.stdout is not None and locker.stdin is not None
    try:
        assert (await asyncio.wait_for(locker.stdout.readline(), 30)).strip() == b"locked"
        yield
    finally:
        locker.stdin.write(b"go\n")
        await locker.stdin.drain()
        await locker.wait()


async def until(condition: Callable[[], bool], what: str, bot: Bot, *, within: float) -> None:
    """:func:`eventually`, failing with what was awaited and the end of the bot's log."""
    try:
        await eventually(condition, within=within, step=0.05)
    except AssertionError:
        tail = "\n".join(bot.log.read_text().splitlines()[-15:])
        raise AssertionError(f"not {what} within {within} s; the bot's log ends:\n{tail}") from None


def every_part_once(tg: FakeTelegram, parts: int, channels: list[int] = CHANNELS) -> bool:
    return all(len({m.text for m in tg.sent(c)}) == parts for c in channels)


def repeats(tg: FakeTelegram) -> int:
    counts = Counter((m.chat_id, m.text) for m in tg.sent())
    return sum(n - 1 for n in counts.values())


async def test_a_ledger_write_locked_for_8_s_mid_post_only_makes_the_post_wait(
    tmp_path: Path, tg: FakeTelegram, bots: list[Bot]
) -> None:
    database = tmp_path / "ledger.db"
    config, archive, today = write_config(
        tmp_path, f"sqlite+aiosqlite:///{database}", tg, channels=CHANNELS
    )
    staged = tmp_path / f"{today}.txt"
    shutil.copy(SAMPLE, staged)
    parts = parts_of(staged)
    bot = Bot("one", config, tmp_path)
    bots.append(bot)
    assert await bot.wait_ready(within=30) == "leader"
    os.replace(staged, archive / staged.name)  # the issue arrives: the leader posts it
    await until(lambda: len(tg.sent()) >= 20, "20 sent", bot, within=30)
    tg.hold("sendMessage")  # the sends after these wait in flight: the post is not over
    await until(lambda: tg.held > 0, "a send in flight", bot, within=30)
    async with write_locked(database):
        assert len(tg.sent()) < len(CHANNELS) * parts, "locked mid-post"
        tg.release("sendMessage")  # their records, and the next claims, meet the lock
        # the fault itself: the write lock is held for 8 s (the leader's lease is 3 s), and
        # the bot must neither exit nor lose the leadership meanwhile
        await asyncio.sleep(8)
        assert bot.proc.poll() is None, bot.log.read_text()
    await until(lambda: every_part_once(tg, parts, CHANNELS), "all sent", bot, within=60)
    assert repeats(tg) == 0 and len(tg.sent()) == len(CHANNELS) * parts
    seen = await bot.readyz()
    assert bot.proc.poll() is None and seen is not None and seen[1]["role"] == "leader"
    said = [str(r.get("msg")) for r in bot.records()]
    assert not [m for m in said if "renew" in m or "stepping down" in m or "lost the" in m]
    assert [m for m in said if "database is locked" in m], "the lock was felt"
    bot.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(bot.proc.wait, 20) == 0


async def test_a_second_post_with_its_clock_120_s_ahead_sends_nothing_twice(
    tmp_path: Path, tg: FakeTelegram, bots: list[Bot]
) -> None:
    """`digest-bot post` (under libfaketime, 120 s ahead) while `run` delivers on the same
    SQLite file: the delivery lease is an OS lock, so the clock cannot make it look lapsed;
    the post is refused, naming the holder, and the bot finishes alone, nothing twice."""
    env = skewed_env("+120s")
    database = tmp_path / "ledger.db"
    config, archive, today = write_config(
        tmp_path, f"sqlite+aiosqlite:///{database}", tg, channels=CHANNELS
    )
    staged = tmp_path / f"{today}.txt"
    shutil.copy(SAMPLE, staged)
    parts = parts_of(staged)
    bot = Bot("one", config, tmp_path)
    bots.append(bot)
    assert await bot.wait_ready(within=30) == "leader"
    owner = (await bot.readyz() or (0, {}))[1]["owner"]
    os.replace(staged, archive / staged.name)
    await until(lambda: len(tg.sent()) >= 20, "20 sent", bot, within=30)
    # a stalled Bot API: the sends after these stay in flight while the post process runs
    tg.hold("sendMessage")
    await until(lambda: tg.held > 0, "a send in flight", bot, within=30)
    post_env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    post_env.update(PYTHONPATH=str(ROOT), DIGEST_BOT_TELEGRAM__TOKEN=DEFAULT_TOKEN, **env)
    command = [sys.executable, "-m", "bots.cli", "post", "--config", str(config)]
    post = await asyncio.to_thread(
        forkserver.run, command, cwd=tmp_path, env=post_env, capture_output=True, timeout=60
    )
    sent_then, out, err = len(tg.sent()), post.stdout.decode(), post.stderr.decode()
    refusal = f"another process is delivering on telegram: lease held by {owner}"
    assert post.returncode == 1 and refusal in err, f"not refused: {out}{err[-2000:]}"
    assert "Traceback" not in err
    assert sent_then < len(CHANNELS) * parts, "the bot was still posting"
    tg.release("sendMessage")
    await until(lambda: every_part_once(tg, parts), "all sent", bot, within=90)
    assert repeats(tg) == 0 and len(tg.sent()) == len(CHANNELS) * parts
    bot.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(bot.proc.wait, 20) == 0
