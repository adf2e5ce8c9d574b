"""Two tests run in one pytest process by test_logs.py (no test_ prefix: not collected)."""

from __future__ import annotations

import logging
import threading

import pytest

from bots.logs import setup_logging


def test_a_digest_bot_run_sets_up_logging(capsys: pytest.CaptureFixture[str]) -> None:
    """What ``bots.cli.main`` does first: the root handler on the captured stderr."""
    setup_logging("DEBUG", debug_libs=True)
    logging.getLogger("bots.cli").info("set up")
    assert "set up" in capsys.readouterr().err


def test_a_later_record_from_a_worker_thread_is_no_logging_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The previous test's capture is closed now; aiosqlite's worker thread logs here."""
    worker = threading.Thread(target=logging.getLogger("aiosqlite").debug, args=("executing",))
    worker.start()
    worker.join()
    assert "Logging error" not in capsys.readouterr().err
