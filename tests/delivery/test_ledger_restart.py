"""A real PostgreSQL restarted (``pg_ctl restart -m fast``) while a post runs: the post waits and
completes, nothing lost or sent twice; a post that found the server down is reported as failed
and resumes by itself once the server answers."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from digest_core.archive import Archive
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.health import RetryPolicy
from digest_core.platform import PlatformLimits, Rate, Target, TargetKind
from digest_core.publishing.schedule import ScheduleConfig
from digest_core.rendering import Part, render
from digest_core.rendering import plain as plain_render
from digest_core.service.root import DigestService
from tests import forkserver
from tests.bots.telegram.harness import ARCHIVE, REPO, TODAY, write_config
from tests.bots.telegram.harness import ZONE as TG_ZONE
from tests.delivery.test_ledger_small_disk import control, sent_keys, wait_until
from tests.delivery.test_ledger_trouble import DAY, ZONE, AlertingPlatform, wait_for
from tests.fakes.telegram_api import DEFAULT_TOKEN
from tests.pg import PgServer, PgUnavailable
from tests.samples import SAMPLE_ARCHIVE

CHANNELS = 150

#: each starts a PostgreSQL server of its own
pytestmark = pytest.mark.slow


class Deliveries:
    """The MetricsSink's deliveries, as /metrics counts them."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, bool]] = []

    def part(self, platform: str, outcome: str) -> None:
        return None

    def rate_limited(self, platform: str) -> None:
        return None

    def delivery(self, platform: str, seconds: float, *, ok: bool, at: dt.datetime) -> None:
        self.outcomes.append((platform, ok))

    def command(self, platform: str, command: str, seconds: float, *, status: str) -> None:
        return None


@pytest.fixture(scope="module")
def module_server() -> Iterator[PgServer]:
    """A server of this module's own: restarting the session's would cut other tests."""
    try:
        server = PgServer.start()
    except PgUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_server(module_server: PgServer) -> PgServer:
    """The module's server, running when the test starts (a test before may have stopped it);
    each test makes a database of its own on it."""
    if module_server.proc.poll() is not None:
        module_server.start_again()
    return module_server


@pytest.fixture
async def bot(own_server: PgServer, tmp_path: Path) -> AsyncIterator[tuple[DigestService, Any]]:
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copy(SAMPLE_ARCHIVE / f"{DAY}.txt", archive)
    clock = SystemClock()
    platform = AlertingPlatform(
        clock,
        flavor=plain_render,
        limits=PlatformLimits(overall=Rate(1000.0, 100), per_target={}),
        latency=0.05,
        channels=[Target("fake", f"c{i}", TargetKind.CHANNEL) for i in range(CHANNELS)],
    )
    metrics = Deliveries()
    url = own_server.url(own_server.create_database())
    async with Ledger.open(url, clock=clock) as ledger:
        ledger.retry_policy = RetryPolicy(base=0.05, cap=0.3)  # quick to see it come back
        service = DigestService(
            archive=Archive(archive),
            ledger=ledger,
            engine=DeliveryEngine(ledger, clock=clock, max_in_flight=4, metrics=metrics),
            clock=clock,
            zone=ZONE,
            schedule=ScheduleConfig(zone=ZONE, post_time=dt.time(8, 0)),
            platforms=[platform],
            metrics=metrics,
        )
        service.resume_after_trouble = True  # as `digest-bot run` does
        service.test_metrics = metrics  # type: ignore[attr-defined]
        yield service, platform


def all_sent_once(service: DigestService, platform: AlertingPlatform) -> None:
    expected = render(service.archive.on(DAY), plain_render, Part.ALL)
    sent = Counter((s.target.id, s.message.payload["text"]) for s in platform.sent)
    assert len(sent) == CHANNELS * len(expected), "parts lost"
    assert max(sent.values()) == 1, f"{sum(n - 1 for n in sent.values())} parts sent twice"
    for i in range(CHANNELS):  # in order for every reader
        texts = [m.payload["text"] for m in platform.sent_to(f"c{i}")]
        assert texts == [m.payload["text"] for m in expected]


async def test_a_post_waits_out_a_postgresql_restart_and_completes(
    own_server: PgServer, bot: tuple[DigestService, AlertingPlatform]
) -> None:
    service, platform = bot
    total = CHANNELS * len(render(service.archive.on(DAY), plain_render, Part.ALL))
    post = asyncio.create_task(service.post(DAY))
    await wait_for(lambda: len(platform.sent) >= total // 4, "a quarter of the post")

    # sessions ended (57P01), then "the database system is shutting down" (57P03) while its
    # checkpoint runs, then a refused port, then the server again
    health = service.ledger.health
    with own_server.shutting_down():
        await wait_for(
            lambda: post.done() or (health.trouble and "shutting down" in health.trouble.error),
            "a new connection refused by the server shutting down",
        )
        assert not post.done(), "the post ended instead of waiting for the server"
    # the port closed: refused connections, waited out too
    await wait_for(
        lambda: post.done() or health.failures.get("ConnectionRefusedError", 0) >= 2,
        "connections refused by the closed port, tried again",
    )
    assert not post.done(), "the post ended instead of waiting for the server"
    own_server.start_again()

    (report,) = await asyncio.wait_for(post, 60)
    assert report.ok and report.failed == 0
    all_sent_once(service, platform)
    assert platform.alerts and "ledger trouble since" in platform.alerts[0]
    assert "answers again" in platform.alerts[-1]
    status = await service.status()
    assert "ledger trouble" not in status and "failed" not in status
    assert service.test_metrics.outcomes == [("fake", True)]  # type: ignore[attr-defined]


async def test_a_post_that_found_postgresql_down_is_reported_and_resumes(
    own_server: PgServer, bot: tuple[DigestService, AlertingPlatform]
) -> None:
    service, platform = bot
    await asyncio.to_thread(own_server.shut_down)
    with pytest.raises(OSError):  # the port is closed: connection refused
        await asyncio.wait_for(service.post(DAY), 30)
    status = await service.status()
    assert f"fake {DAY}" in status and "failed" in status, status
    assert ("fake", False) in service.test_metrics.outcomes  # type: ignore[attr-defined]

    own_server.start_again()
    # nobody posts again: the bot resumes the post once the ledger answers
    total = CHANNELS * len(render(service.archive.on(DAY), plain_render, Part.ALL))
    await wait_for(lambda: len(platform.sent) >= total, "the resumed post", seconds=60)
    await wait_for(lambda: not service.ledger.busy, "the last records")
    all_sent_once(service, platform)
    await wait_for(lambda: "went on" in platform.alerts[-1], "the all-clear")
    assert "resume now" in "".join(platform.alerts)  # not "deliveries go on"
    assert f"sent {total}, 失败 / failed 0" in platform.alerts[-1]
    status = await service.status()
    assert "failed" not in status, status


@pytest.mark.timeout(300)
def test_the_real_bot_rides_out_a_postgresql_restart(own_server: PgServer, tmp_path: Path) -> None:
    """The issue's case: `digest-bot run` posting to channels of the Telegram double while its
    PostgreSQL restarts; every part arrives once, with no rerun. The double holds the sends
    after the first 60 until the server is shutting down, so the post is under way whatever
    the machine's speed, and the records of the held sends meet the shutdown."""
    channels = [-1005000000 - i for i in range(60)]
    double = forkserver.Popen(
        [sys.executable, "-m", "tests.fakes.telegram_api"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    bot: subprocess.Popen[bytes] | None = None
    log = tmp_path / "bot.log"
    try:
        assert double.stdout is not None
        root = double.stdout.readline().strip().removesuffix("/bot")
        with httpx.Client(base_url=root) as client:
            for chat in channels:
                client.post("/_fake/add_chat", json={"id": chat, "type": "channel"})
        today = dt.datetime.now(ZoneInfo(TG_ZONE)).date()
        config = write_config(
            tmp_path, base_url=root + "/bot", channels=[str(c) for c in channels],
            schedule=True, post_time="00:00", days=[],
        )  # fmt: skip
        shutil.copy(ARCHIVE / f"{TODAY}.txt", tmp_path / "archive" / f"{today}.txt")
        text = config.read_text().replace("catch_up_hours = 6", "catch_up_hours = 24")
        url = own_server.url(own_server.create_database())
        config.write_text(text.replace(f"sqlite+aiosqlite:///{tmp_path / 'digest.db'}", url))
        env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN}
        with log.open("ab") as out:
            bot = forkserver.Popen(
                [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        expected = {(chat, part) for chat in channels for part in range(2)}
        wait_until(lambda: len(sent_keys(root)) >= 60, "the post to start", log, seconds=60)
        control(root, "hold", method="sendMessage")
        wait_until(lambda: control(root, "state")["held"] > 0, "a send held", log, seconds=30)
        with own_server.shutting_down():
            control(root, "release", method="sendMessage")
            wait_until(
                lambda: "the database system is shutting down" in log.read_text(),
                "the bot to meet the shutdown",
                log,
                seconds=30,
            )
        own_server.start_again()
        wait_until(lambda: set(sent_keys(root)) >= expected, "the whole post", log, seconds=120)
        copies = Counter(sent_keys(root))
        assert set(copies) == expected
        assert max(copies.values()) == 1, "sent twice"
        text = log.read_text()
        assert "delivery on telegram failed" not in text and "changes failed" not in text
        bot.send_signal(signal.SIGTERM)
        assert bot.wait(20) == 0, log.read_text()[-3000:]
    finally:
        if bot is not None and bot.poll() is None:
            bot.kill()
            bot.wait()
        double.send_signal(signal.SIGTERM)
        double.wait(10)
