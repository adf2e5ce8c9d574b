"""Logging: zone-stamped human lines, JSON lines with a delivery's id, quiet libraries, flags."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bots import logs
from digest_core.delivery import DeliveryEngine
from digest_core.logcontext import log_fields
from digest_core.testing import FakePlatform, ManualClock, make_issue, make_messages, open_ledger
from tests import forkserver
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

SHANGHAI = ZoneInfo("Asia/Shanghai")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """A stream set up as the log's; the set-up is undone afterwards."""
    buf = io.StringIO()
    root = logging.getLogger()
    level = root.level
    yield buf
    for handler in [h for h in root.handlers if isinstance(h, logs._Handler)]:
        root.removeHandler(handler)
    root.setLevel(level)
    for name in logs.LIBRARY_LOGGERS + logs.QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logs._LIBRARY_LEVELS.get(name, logging.NOTSET))


def records(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_json_lines_carry_a_zone_aware_time_and_the_fields(stream: io.StringIO) -> None:
    logs.setup_logging("INFO", fmt="json", zone=SHANGHAI, stream=stream)
    before = dt.datetime.now(dt.UTC)
    log = logging.getLogger("digest_core.test")
    with log_fields(delivery_id=7, platform="telegram"):
        log.info("sent %d parts", 3)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("it broke: %s", "badly")
    log.debug("not shown at INFO")
    first, second = records(stream)
    assert first["msg"] == "sent 3 parts" and first["level"] == "INFO"
    assert first["logger"] == "digest_core.test"
    assert first["delivery_id"] == 7 and first["platform"] == "telegram"
    ts = dt.datetime.fromisoformat(str(first["ts"]))
    assert ts.utcoffset() == dt.timedelta(hours=8)
    assert abs(ts - before) < dt.timedelta(seconds=30)
    assert "delivery_id" not in second  # the fields end with their block
    assert "ValueError: boom" in str(second["exc"]) and second["msg"] == "it broke: badly"


def test_human_lines_show_the_digest_zone(stream: io.StringIO) -> None:
    logs.setup_logging("INFO", fmt="human", zone=SHANGHAI, stream=stream)
    with log_fields(delivery_id=3):
        logging.getLogger("bots.x").warning("hello")
    line = stream.getvalue().strip()
    stamp, rest = line[:30], line[31:]
    at = dt.datetime.fromisoformat(stamp.replace(" +", "+"))
    assert at.utcoffset() == dt.timedelta(hours=8)
    assert rest == "WARNING bots.x: hello [delivery_id=3]"


def test_debug_keeps_the_libraries_at_info_unless_asked(stream: io.StringIO) -> None:
    logs.setup_logging("DEBUG", fmt="json", stream=stream)
    logging.getLogger("aiosqlite").debug("executing a query")
    logging.getLogger("httpx").debug("an HTTP request")
    logging.getLogger("discord.gateway").debug("a gateway frame")
    logging.getLogger("sqlalchemy.engine.Engine").info("SELECT 1")
    logging.getLogger("httpx").info("HTTP Request: POST … 200")
    logging.getLogger("digest_core.delivery").debug("ours")
    assert [r["msg"] for r in records(stream)] == ["HTTP Request: POST … 200", "ours"]

    stream.truncate(0)
    stream.seek(0)
    logs.setup_logging("DEBUG", fmt="json", debug_libs=True, stream=stream)
    logging.getLogger("aiosqlite").debug("executing a query")
    assert [r["msg"] for r in records(stream)] == ["executing a query"]
    # one handler however often it is set up
    assert sum(isinstance(h, logs._Handler) for h in logging.getLogger().handlers) == 1


def test_routine_scheduler_runs_are_not_logged_at_info(stream: io.StringIO) -> None:
    logs.setup_logging("INFO", fmt="json", stream=stream)
    executor = logging.getLogger("apscheduler.executors.default")
    executor.info('Running job "Publishing.load" (scheduled at …)')
    executor.warning('Run time of job "post" was missed by 0:05:00')
    logging.getLogger("apscheduler.scheduler").info("Scheduler started")
    assert [r["msg"] for r in records(stream)] == [
        'Run time of job "post" was missed by 0:05:00',
        "Scheduler started",
    ]
    stream.truncate(0)
    stream.seek(0)
    logs.setup_logging("DEBUG", fmt="json", stream=stream)
    executor.info('Running job "Publishing.load" (scheduled at …)')
    assert len(records(stream)) == 1


def test_bad_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log level"):
        logs.setup_logging("LOUD")
    with pytest.raises(ValueError, match="log format"):
        logs.setup_logging("INFO", fmt="xml")


async def test_a_delivery_s_records_carry_its_id(stream: io.StringIO, tmp_path: Path) -> None:
    logs.setup_logging("DEBUG", fmt="json", stream=stream)
    clock = ManualClock()
    async with open_ledger(clock) as ledger:
        platform = FakePlatform(clock)
        from digest_core.testing import make_targets

        report = await DeliveryEngine(ledger, clock=clock).deliver(
            make_issue().ref, platform, make_messages(2), make_targets(2)
        )
    lines = [r for r in records(stream) if r["logger"] == "digest_core.delivery.fanout"]
    assert lines and all(r["delivery_id"] == report.delivery_id for r in lines)
    assert {r["platform"] for r in lines} == {platform.name}
    assert {r["issue_date"] for r in lines} == {"2026-10-27"}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    return forkserver.run(
        [sys.executable, "-m", "bots.cli", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_version() -> None:
    done = _cli("--version", cwd=ROOT)
    assert done.returncode == 0
    assert done.stdout.strip().startswith("digest-bot ") and done.stdout.split()[1][0].isdigit()


def test_cli_log_flags(tmp_path: Path) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        f'archive_dir = "{SAMPLE_ARCHIVE}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path}/ledger.db"\n'
        'timezone = "America/New_York"\n'
    )
    day = sorted(SAMPLE_ARCHIVE.glob("2026-*.txt"))[0].stem
    common = ("--config", str(config), "--log-format", "json", "--log-level")
    done = _cli("post", "--date", day, *common, "debug", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    ours = [r for r in lines if r["logger"] == "digest_core.delivery.fanout"]
    assert ours and all(r["delivery_id"] == 1 and r["issue_date"] == day for r in ours)
    assert not [r for r in lines if str(r["logger"]).startswith(("aiosqlite", "sqlalchemy"))]
    offsets = {dt.datetime.fromisoformat(str(r["ts"])).utcoffset() for r in lines}
    assert offsets <= {dt.timedelta(hours=-5), dt.timedelta(hours=-4)}

    loud = _cli("status", *common, "debug", "--debug-libs", cwd=tmp_path)
    assert any(json.loads(line)["logger"] == "aiosqlite" for line in loud.stderr.splitlines())

    quiet = _cli("status", *common, "warning", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""

    bad = _cli("status", "--config", str(config), "--log-level", "loud", cwd=tmp_path)
    assert bad.returncode == 2 and "--log-level" in bad.stderr


def test_a_test_running_digest_bot_leaves_no_handler_on_its_closed_capture() -> None:
    """tests/conftest.py undoes a test's logging set-up: before, every later record of the
    worker printed "--- Logging error ---" (I/O operation on closed file) into the output."""
    cases = Path(__file__).with_name("logs_isolation_cases.py")
    done = forkserver.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", str(cases)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert "Logging error" not in done.stdout + done.stderr
