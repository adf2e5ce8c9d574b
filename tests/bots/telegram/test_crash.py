"""SIGKILL mid-broadcast: the real `digest-bot run` as a subprocess, the double standalone."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from digest_core.clock import SystemClock
from digest_core.delivery import Ledger
from tests import forkserver
from tests.bots.telegram.harness import ARCHIVE, REPO, TODAY, ZONE, until_answered, write_config
from tests.fakes.telegram_api import DEFAULT_TOKEN, running_process

pytestmark = pytest.mark.slow  # real processes, servers or a browser

SUBSCRIBERS = [5000 + i for i in range(60)]
CHANNELS = [-1003000000 - i for i in range(5)]
#: subscribers whose first send hangs SLOW_S seconds at the double, so the kill finds them in
#: flight and the killed bot's message still arrives: the duplicates the ledger allows
SLOW = SUBSCRIBERS[8:12]
SLOW_S = 2.0
PARTS = 2


@pytest.fixture
def fake_url() -> Iterator[str]:
    """The double as its own process (real flood limits), printing its base URL."""
    chats = {**dict.fromkeys(CHANNELS, "channel"), **dict.fromkeys(SUBSCRIBERS, "private")}
    with running_process(chats) as root:
        yield root


def _bot(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN}
    with log.open("ab") as out:
        return forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip


def _sent(client: httpx.Client) -> list[dict[str, object]]:
    result: list[dict[str, object]] = client.get("/_fake/sent").json()["result"]
    return result


def _wait(
    client: httpx.Client, condition: object, timeout: float, log: Path
) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sent = _sent(client)
        if condition(sent):  # type: ignore[operator]
            return sent
        time.sleep(0.02)
    raise AssertionError(f"timed out; bot log:\n{log.read_text()[-3000:]}")


def test_sigkill_mid_broadcast_then_restart_loses_nothing(fake_url: str, tmp_path: Path) -> None:
    today = dt.datetime.now(ZoneInfo(ZONE)).date()
    config = write_config(
        tmp_path, base_url=fake_url + "/bot", channels=[str(c) for c in CHANNELS],
        schedule=True, post_time="00:00", days=[],
    )  # fmt: skip
    # today's issue (the real date: the subprocess runs on the system clock)
    shutil.copy(ARCHIVE / f"{TODAY}.txt", tmp_path / "archive" / f"{today}.txt")
    config.write_text(config.read_text().replace("catch_up_hours = 6", "catch_up_hours = 24"))
    db = tmp_path / "digest.db"

    async def subscribe() -> None:
        async with Ledger.open(f"sqlite+aiosqlite:///{db}", clock=SystemClock()) as ledger:
            for user in SUBSCRIBERS:
                await ledger.subscribe("telegram", str(user))

    asyncio.run(subscribe())
    expected = {(chat, part) for chat in [*CHANNELS, *SUBSCRIBERS] for part in range(PARTS)}
    log = tmp_path / "bot.log"

    with httpx.Client(base_url=fake_url) as client:
        for user in SLOW:  # these sends hang past the kill, then take effect (like a timeout)
            client.post("/_fake/fail_next", json={"chat_id": user, "kind": "slow", "delay": SLOW_S})
        first = _bot(config, log)
        try:
            sent = _wait(client, lambda s: len(s) >= 40, 30, log)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        at_kill = len(_sent(client))
        assert at_kill < len(expected), "the kill did not land mid-broadcast"
        with sqlite3.connect(db) as conn:
            (in_flight,) = conn.execute(
                "SELECT count(*) FROM parts WHERE state = 'in_flight'"
            ).fetchone()
        assert in_flight >= 1, "the kill found nothing in flight"

        second = _bot(config, log)
        try:
            sent = _wait(client, lambda s: _covered(s) >= expected, 60, log)
            # let the hung sends of the killed bot land, and any duplicate show
            until_answered(client, within=SLOW_S + 10)
            sent = _sent(client)
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(20) == 0, log.read_text()[-3000:]

    copies = Counter(_key(m) for m in sent)
    assert set(copies) == expected  # nothing lost (and nothing unexpected)
    duplicates = sum(n - 1 for n in copies.values())
    assert duplicates <= in_flight, (duplicates, in_flight)
    # the restart resumed: far fewer than a whole second broadcast went out
    assert len(sent) - at_kill <= len(expected) - at_kill + in_flight


def _key(message: dict[str, object]) -> tuple[int, int]:
    """(chat, part): the first part carries the masthead date, the last one the keyboard."""
    part = PARTS - 1 if message["reply_markup"] else 0
    return int(message["chat_id"]), part  # type: ignore[call-overload]


def _covered(sent: list[dict[str, object]]) -> set[tuple[int, int]]:
    return {_key(m) for m in sent}


def test_digest_bot_post_delivers_once_and_exits(
    fake_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bots.cli import EXIT_OK, main

    config = write_config(
        tmp_path, base_url=fake_url + "/bot", channels=[str(c) for c in CHANNELS[:2]]
    )
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
    argv = ["post", "--config", str(config), "--platform", "telegram", "--date", str(TODAY)]
    assert main(argv) == EXIT_OK
    assert f"telegram {TODAY}: 发送 / sent 4" in capsys.readouterr().out
    assert main(argv) == EXIT_OK  # a second run sends only what is missing: nothing
    assert f"telegram {TODAY}: 发送 / sent 0" in capsys.readouterr().out
    with httpx.Client(base_url=fake_url) as client:
        sent = _sent(client)
    assert Counter(_key(m) for m in sent) == {(c, p): 1 for c in CHANNELS[:2] for p in range(2)}


def test_sigterm_while_a_reply_hangs_tells_the_reader_and_exits(
    fake_url: str, tmp_path: Path
) -> None:
    """Issue #8: a command whose answer does not come back (a send the Bot API holds for a
    minute) no longer holds a SIGTERM up: the reader is told to try again, then the process
    exits cleanly, without waiting for the answer."""
    reader = SUBSCRIBERS[0]
    config = write_config(tmp_path, base_url=fake_url + "/bot", channels=[], days=[TODAY])
    log = tmp_path / "bot.log"
    with httpx.Client(base_url=fake_url) as client:
        client.post(
            "/_fake/fail_next",
            json={"chat_id": reader, "kind": "slow", "delay": 120, "method": "sendMessage"},
        )
        bot = _bot(config, log)
        try:
            _wait_requests(client, lambda r: any(x["method"] == "getUpdates" for x in r), log)
            client.post(
                "/_fake/inject_message",
                json={"chat_id": reader, "from_user": reader, "text": f"/issue {TODAY}"},
            )
            # the answer is on its way and hangs at the double
            _wait_requests(client, lambda r: any(x["chat_id"] == reader for x in r), log)
            bot.send_signal(signal.SIGTERM)
            code = bot.wait(30)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait(10)
        assert code == 0, log.read_text()[-3000:]
        # what the reader got before the process ended: the notice, and not the held answer
        [notice] = _sent(client)
        assert notice["chat_id"] == reader
        assert "机器人正在重启，请稍后重试" in str(notice["text"])
        assert "The bot is restarting, please try again" in str(notice["text"])


def _wait_requests(client: httpx.Client, condition: object, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if condition(client.get("/_fake/requests").json()["result"]):  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out; bot log:\n{log.read_text()[-3000:]}")


def test_sigkill_mid_follow_messages_then_restart_sends_each_once(
    fake_url: str, tmp_path: Path
) -> None:
    """Issue #12: follow messages are ledger deliveries: a bot killed while sending them and
    started again sends each follower's message once (at most the ones in flight twice)."""
    today = dt.datetime.now(ZoneInfo(ZONE)).date()
    config = write_config(
        tmp_path, base_url=fake_url + "/bot", channels=[], schedule=True, post_time="00:00",
        days=[],
    )  # fmt: skip
    # today's issue, published at 00:00: it mentions 蒸馏 (the minute job runs at start)
    shutil.copy(ARCHIVE / f"{TODAY}.txt", tmp_path / "archive" / f"{today}.txt")
    db = tmp_path / "digest.db"

    async def follow() -> None:
        async with Ledger.open(f"sqlite+aiosqlite:///{db}", clock=SystemClock()) as ledger:
            for user in SUBSCRIBERS:
                await ledger.follow("telegram", str(user), "蒸馏")

    asyncio.run(follow())
    log = tmp_path / "bot.log"
    with httpx.Client(base_url=fake_url) as client:
        for user in SLOW:
            client.post("/_fake/fail_next", json={"chat_id": user, "kind": "slow", "delay": SLOW_S})
        first = _bot(config, log)
        try:
            _wait(client, lambda s: len(s) >= 20, 30, log)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        at_kill = len(_sent(client))
        assert at_kill < len(SUBSCRIBERS), "the kill did not land mid-way"
        with sqlite3.connect(db) as conn:
            (in_flight,) = conn.execute(
                "SELECT count(*) FROM parts WHERE state = 'in_flight'"
            ).fetchone()
        second = _bot(config, log)
        try:
            _wait(client, lambda s: {int(m["chat_id"]) for m in s} >= set(SUBSCRIBERS), 60, log)  # type: ignore[call-overload]
            until_answered(client, within=SLOW_S + 10)
            sent = _sent(client)
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(20) == 0, log.read_text()[-3000:]
    copies = Counter(int(m["chat_id"]) for m in sent)  # type: ignore[call-overload]
    assert set(copies) == set(SUBSCRIBERS)
    assert all("“蒸馏”" in str(m["text"]) for m in sent)
    assert sum(n - 1 for n in copies.values()) <= in_flight
