"""Issue 20, items 3 and 4: the console chat on a real terminal (a pty) and with piped input.

Item 3: no library INFO lines in the chat, a prompt, each typed line shown once and before what
it causes. Item 4: the operator is an admin who is told so, confirms a repost as on the chat
platforms, and can look as a reader with ``/as reader``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import logging
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from bots.console.platform import PROMPT
from bots.logs import quiet_libraries, route_to_terminal, setup_logging
from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.testing import ManualClock
from tests.bots.test_newcomer_run import BIN, Terminal
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

DAY = "2026-11-30"


class Chat(Terminal):
    """A terminal whose :meth:`expect` looks only at what came after the last match."""

    seen = 0

    def expect(self, pattern: str, *, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while (m := re.compile(pattern).search(self.output, self.seen)) is None:
            if not self._read(deadline - time.monotonic()):
                raise AssertionError(f"no {pattern!r} within {timeout} s; got:\n{self.output}")
        self.seen = m.end()


def _config(tmp_path: Path) -> Path:
    archive = tmp_path / "archive"
    archive.mkdir()
    for src in sorted(SAMPLE_ARCHIVE.glob("*.txt"))[-2:]:
        shutil.copy(src, archive / src.name)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'timezone = "Asia/Shanghai"\narchive_dir = "{archive}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path}/ledger.db"\n'
        '[schedule]\npost_time = "08:00"\n',
        encoding="utf-8",
    )
    return cfg


def _deliveries(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM deliveries").fetchone()[0])


@pytest.mark.skipif(not (BIN / "digest-bot").exists(), reason="needs an installed digest-bot")
def test_the_console_on_a_terminal_prompts_echoes_once_and_confirms_a_repost(
    tmp_path: Path,
) -> None:
    cfg = _config(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIGEST_BOT_", "MAKE"))}
    term = Chat([str(BIN / "digest-bot"), "run", "--config", str(cfg)], cwd=tmp_path, env=env)
    try:
        term.expect(r"you are an admin here.*/as reader", timeout=60)
        term.expect(PROMPT)
        term.type("/help\n")
        term.expect(r"/help\n(.*\n)+.*" + PROMPT)

        # item 4: a repost asks first; "n" cancels and nothing reaches the ledger
        term.type(f"/repost {DAY}\n")
        term.expect(r"Repost the issue of 2026-11-30\?(.*\n)+.*\[y/N\](.*\n)+.*" + PROMPT)
        term.type("n\n")
        term.expect(r"Cancelled\.(.*\n)+.*" + PROMPT)
        assert _deliveries(tmp_path / "ledger.db") == 0
        assert "── stdout #1 ──" not in term.output

        # "y" posts, and the answer comes in the order it was typed
        term.type(f"/repost {DAY}\n")
        term.expect(r"\[y/N\](.*\n)+.*" + PROMPT)
        term.type("y\n")
        term.expect(r"── stdout #1 ──(.*\n)+.*" + PROMPT)
        assert _deliveries(tmp_path / "ledger.db") == 1

        # the reader's view: the same command is refused
        term.type("/as reader\n")
        term.expect(r"you now see what a reader sees(.*\n)+.*" + PROMPT)
        term.type(f"/repost {DAY}\n")
        term.expect(r"Sorry, /repost is for admins only")
        term.type("\x03")
        term.wait(timeout=30)
    finally:
        term.kill()
    out = term.output
    lines = out.split("\n")
    # stopping puts the libraries' levels back as they were: no SQL statements at the end
    assert "sqlalchemy" not in out
    # item 3: the libraries' INFO records stay out of the chat (ours are still printed)
    assert "Added job" not in out and "apscheduler" not in out
    assert "INFO bots.runtime: digest-bot running on console" in out
    # each typed line once: the terminal's echo after the prompt, no "> /help" copy
    assert [ln for ln in lines if ln.rstrip().endswith("/help") and "every command" not in ln] == [
        f"{PROMPT}/help"
    ]
    assert not any(ln.startswith("> /") for ln in lines)
    assert out.index(f"{PROMPT}y\n") < out.index("── stdout #1 ──")


async def test_piped_input_is_echoed_once_before_what_it_causes(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    out = io.StringIO()
    typed = io.StringIO(f"hello\n/repost {DAY}\ny\n")
    clock = ManualClock(dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC), autoadvance=False)
    async with open_service(load_settings(cfg), clock=clock, out=out, stdin=typed) as service:
        console = service.platforms["console"]
        await console.start(service)
        task = console._task  # type: ignore[attr-defined]
        await asyncio.wait_for(task, 10)
    text = out.getvalue()
    assert PROMPT not in text  # no prompt without a terminal
    assert text.count(f"> /repost {DAY}") == 1
    # the echo, the question, the answer's echo, then the post it caused
    order = [f"> /repost {DAY}", "[y/N]", "> y", "── stdout #1 ──"]
    assert [text.index(s) for s in order] == sorted(text.index(s) for s in order)
    # item 10: the reply to a line that is not a command is bilingual
    assert "Commands start with a slash, e.g. /today or /help" in text


def test_an_asked_log_level_lets_the_libraries_info_into_the_chat() -> None:
    lib = logging.getLogger("apscheduler")
    try:
        setup_logging("INFO", stream=io.StringIO())
        quiet_libraries()
        assert lib.getEffectiveLevel() == logging.WARNING
        route_to_terminal(None)  # the console stopped
        assert lib.getEffectiveLevel() == logging.INFO
        setup_logging("INFO", stream=io.StringIO(), asked=True)  # --log-level info
        quiet_libraries()
        assert lib.getEffectiveLevel() == logging.INFO
    finally:
        route_to_terminal(None)
        setup_logging("WARNING", stream=io.StringIO())
