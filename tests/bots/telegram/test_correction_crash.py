"""SIGKILL mid-correction: the real `digest-bot correct` as a subprocess, the double standalone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bots.cli import EXIT_OK, main
from digest_core.clock import SystemClock
from digest_core.delivery import Ledger
from tests import forkserver
from tests.bots.telegram.harness import REPO, TODAY, until_answered, write_config
from tests.bots.telegram.test_crash import CHANNELS, SUBSCRIBERS, fake_url  # noqa: F401
from tests.fakes.telegram_api import DEFAULT_TOKEN

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]

BRIEF = "单根“针”的检索测试已经很难拉开模型差距。"
NEW = "单根“针”的检索测试已经无法拉开模型之间的差距。"
READERS = SUBSCRIBERS[:20]
#: a subscriber whose edit hangs at the double past the kill (and then takes effect); PTB's
#: one connection makes the edits behind it wait in flight too
SLOW = READERS[6:7]
SLOW_S = 3.0


def _correct(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN}
    with log.open("ab") as out:
        return forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "correct", "--config", str(config),
             "--date", str(TODAY)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip


def _sent(client: httpx.Client) -> list[dict[str, object]]:
    result: list[dict[str, object]] = client.get("/_fake/sent").json()["result"]
    return result


def _corrected(sent: list[dict[str, object]]) -> list[dict[str, object]]:
    return [m for m in sent if "已经无法拉开模型之间的差距" in str(m["text"])]


def _edit_requests(client: httpx.Client) -> int:
    requests = client.get("/_fake/requests").json()["result"]
    return sum(1 for r in requests if r["method"].lower() == "editmessagetext")


def test_sigkill_mid_correction_then_a_rerun_completes_it(
    fake_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = write_config(
        tmp_path, base_url=fake_url + "/bot", channels=[str(c) for c in CHANNELS], days=[TODAY]
    )
    db = tmp_path / "digest.db"

    async def subscribe() -> None:
        async with Ledger.open(f"sqlite+aiosqlite:///{db}", clock=SystemClock()) as ledger:
            for user in READERS:
                await ledger.subscribe("telegram", str(user))

    asyncio.run(subscribe())
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
    chats = len(CHANNELS) + len(READERS)
    assert main(["post", "--config", str(config), "--date", str(TODAY)]) == EXIT_OK
    issue = tmp_path / "archive" / f"{TODAY}.txt"
    issue.write_text(issue.read_text(encoding="utf-8").replace(BRIEF, NEW), encoding="utf-8")
    log = tmp_path / "correct.log"

    with httpx.Client(base_url=fake_url) as client:
        posted = _sent(client)
        assert len(posted) == 2 * chats
        for user in SLOW:
            client.post(
                "/_fake/fail_next",
                json={
                    "chat_id": user,
                    "kind": "slow",
                    "delay": SLOW_S,
                    "method": "editMessageText",
                },
            )
        first = _correct(config, log)
        try:
            deadline = time.monotonic() + 30
            # kill once some edits landed and the slow reader's edit hangs in flight (waiting
            # on a count of edits alone let the slow edit finish, or not start, first)
            while len(_corrected(_sent(client))) < 10 or _in_flight(db) < 1:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                assert first.poll() is None, log.read_text()[-3000:]
                time.sleep(0.02)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        assert len(_corrected(_sent(client))) < chats, "the kill did not land mid-correction"
        assert _in_flight(db) >= 1, "the kill found no edit in flight"

        # a post meanwhile (the catch-up of `run`, a /repost) leaves the cut correction alone:
        # nothing of it goes out as new messages
        assert main(["post", "--config", str(config), "--date", str(TODAY)]) == EXIT_OK
        assert len(_sent(client)) == 2 * chats

        second = _correct(config, log)
        assert second.wait(60) == 0, log.read_text()[-3000:]
        # let the killed run's hung edits land
        until_answered(client, within=SLOW_S + 10)
        sent = _sent(client)
        edits = _edit_requests(client)

        assert main(["correct", "--config", str(config), "--date", str(TODAY)]) == EXIT_OK
        assert _edit_requests(client) == edits  # nothing left to change: no request at all
        assert _sent(client) == sent

    assert len(sent) == 2 * chats  # nothing was sent anew
    corrected = _corrected(sent)
    assert {int(m["chat_id"]) for m in corrected} == {*CHANNELS, *READERS}  # type: ignore[call-overload]
    for message in corrected:
        # one edit each: a resumed edit that had landed is "not modified" at the double
        assert len(message["edits"]) == 1, message  # type: ignore[arg-type]
        assert "已更正 / corrected" in str(message["text"])
    # the first parts were never touched
    assert all(not m["edits"] for m in sent if m not in corrected)


def _in_flight(db: Path) -> int:
    """Correction rows committed in flight (an edit sent, its answer not yet recorded)."""
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM parts JOIN deliveries ON deliveries.id = parts.delivery_id "
            "WHERE deliveries.generation < 0 AND parts.state = 'in_flight'"
        ).fetchone()
    return int(count)
