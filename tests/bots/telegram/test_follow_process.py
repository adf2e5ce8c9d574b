"""Issue #25 as a reader and an admin met it: the real `digest-bot run` as a subprocess against
the standalone Bot API double, on the system clock. A reader follows a word of tomorrow's
issue, the admin publishes that issue early with a confirmed ``/repost``; the running bot's
minute job sends exactly one follow message linking the brief, a follower of an absent word
gets nothing, and a restart sends nothing again."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests import forkserver
from tests.bots.telegram.harness import ADMIN, ARCHIVE, REPO, TODAY, ZONE, write_config
from tests.fakes.telegram_api import DEFAULT_TOKEN, running_process

pytestmark = pytest.mark.slow  # real processes, servers or a browser

CHANNEL = -1003000000
ANN, BOB = 5001, 5002
#: a word only brief 1 of the issue of 2026-11-28 has, and that brief's link
WORD, BRIEF_URL = "全员提醒", "https://example.org/postmortems/everyone-ping"
ABSENT = "斑马鱼推理"
#: how often the bot's minute job runs here ([schedule] personal_seconds), and how long a
#: follow message may take
JOB_SECONDS = 2
MINUTE_JOB = 30.0
#: APScheduler's line for a finished run of the minute job (its name, see personal.install;
#: logged at --log-level debug)
JOB_NAME = "subscribers' times and follows"

Message = dict[str, Any]


@pytest.fixture
def fake_url() -> Iterator[str]:
    """The double as its own process, printing its base URL."""
    chats = {CHANNEL: "channel", **dict.fromkeys((ADMIN, ANN, BOB), "private")}
    with running_process(chats) as root:
        yield root


def _bot(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN,
        # the minute job every 2 s: a follow message need not wait for a real minute
        "DIGEST_BOT_SCHEDULE__PERSONAL_SECONDS": str(JOB_SECONDS),
    }
    with log.open("ab") as out:
        return forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip


def _stop(bot: subprocess.Popen[bytes], log: Path) -> None:
    bot.send_signal(signal.SIGTERM)
    assert bot.wait(20) == 0, log.read_text()[-3000:]


def _sent(client: httpx.Client, chat: int) -> list[Message]:
    result: list[Message] = client.get("/_fake/sent", params={"chat_id": chat}).json()["result"]
    return result


def _until(check: Callable[[], bool], within: float, log: Path, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {within} s; bot log:\n{log.read_text()[-3000:]}")


def _job_runs(log: Path) -> int:
    """How many runs of the minute job the bot's log shows finished."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return sum(1 for line in lines if JOB_NAME in line and "executed successfully" in line)


def _follow_messages(client: httpx.Client, chat: int) -> list[Message]:
    return [m for m in _sent(client, chat) if "Words you follow" in str(m["text"])]


def test_an_early_publish_by_repost_reaches_the_follower_once_in_the_running_bot(
    fake_url: str, tmp_path: Path
) -> None:
    now = dt.datetime.now(ZoneInfo(ZONE))
    if now.hour == 23 and now.minute >= 50:
        pytest.skip("too close to midnight in the digest's zone: the days would turn mid-test")
    today = now.date()
    tomorrow = today + dt.timedelta(days=1)
    config = write_config(
        tmp_path, base_url=fake_url + "/bot", channels=[str(CHANNEL)], schedule=True,
        post_time="00:00", days=[],
    )  # fmt: skip
    # the real dates: today's issue is out since 00:00, tomorrow's is in the archive, not out
    archive = tmp_path / "archive"
    shutil.copy(ARCHIVE / f"{TODAY}.txt", archive / f"{today}.txt")
    shutil.copy(ARCHIVE / f"{TODAY + dt.timedelta(days=1)}.txt", archive / f"{tomorrow}.txt")
    # at debug the scheduler logs each finished job run: what the restart below waits for
    config.write_text(config.read_text().replace('log_level = "INFO"', 'log_level = "DEBUG"'))
    log = tmp_path / "bot.log"

    with httpx.Client(base_url=fake_url) as client:

        def command(user: int, text: str) -> Message:
            before = len(_sent(client, user))
            client.post(
                "/_fake/inject_message", json={"chat_id": user, "from_user": user, "text": text}
            )
            _until(lambda: len(_sent(client, user)) > before, 15, log, f"an answer to {text}")
            return _sent(client, user)[before]

        first = _bot(config, log)
        try:
            assert "已关注" in str(command(ANN, f"/follow {WORD}")["text"])
            assert "已关注" in str(command(BOB, f"/follow {ABSENT}")["text"])
            prompt = command(ADMIN, f"/repost {tomorrow}")
            markup = prompt["reply_markup"]["inline_keyboard"]
            before = len(_sent(client, ADMIN))
            client.post(
                "/_fake/inject_callback",
                json={
                    "chat_id": ADMIN,
                    "from_user": ADMIN,
                    "message_id": prompt["message_id"],
                    "data": markup[0][0]["callback_data"],
                },
            )
            _until(
                lambda: any("发送 / sent" in str(m["text"]) for m in _sent(client, ADMIN)[before:]),
                15, log, "the repost's summary",
            )  # fmt: skip
            assert f"the issue of {tomorrow} was published early" in log.read_text()
            # the minute job comes round and tells Ann, once
            _until(lambda: bool(_follow_messages(client, ANN)), MINUTE_JOB, log, "a follow message")
            (message,) = _follow_messages(client, ANN)
            assert f"{tomorrow}" in str(message["text"]) and f"“{WORD}”" in str(message["text"])
            assert BRIEF_URL in str(message["text"])
        finally:
            _stop(first, log)
        # a restart: its minute job runs at once and sends nothing again
        runs = _job_runs(log)
        second = _bot(config, log)
        try:
            _until(lambda: _job_runs(log) > runs, 30, log, "the minute job's run at the restart")
        finally:
            _stop(second, log)
        assert len(_follow_messages(client, ANN)) == 1
        assert _follow_messages(client, BOB) == []
