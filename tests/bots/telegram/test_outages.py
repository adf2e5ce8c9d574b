"""Telegram outages end to end: the real PTB Application behind a fault-injecting proxy in
front of the Bot API double (real sockets: refused connections, answers cut after the
request reached the server)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from bots.cli.common import EXIT_FAILED
from bots.runtime import run
from digest_core.testing import PinnedClock, SettableClock
from tests import forkserver
from tests.bots.telegram.harness import (
    ADMIN,
    ARCHIVE,
    CHANNEL,
    REPO,
    TODAY,
    ZONE,
    local,
    running_bot,
    settings_for,
    write_config,
)
from tests.bots.test_http import free_port
from tests.fakes.proxy import FaultProxy
from tests.fakes.telegram_api import FakeTelegram, SentMessage

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]

BY_NAME = -1009999  # the channel configured as @ai_digest
PARTS = 2  # the issue of TODAY is two messages on Telegram


@pytest.fixture
async def proxy(fake: FakeTelegram) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(fake.port) as p:
        yield p


async def test_an_answer_cut_after_the_request_arrived_is_counted_possibly_twice(
    fake: FakeTelegram, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, base_url=f"{proxy.url}/bot", channels=[str(CHANNEL)])
    async with running_bot(settings_for(path, fake, monkeypatch), fake, scale=100) as bot:
        proxy.cut_answers(1)
        [report] = await bot.service.post(TODAY)
    assert proxy.cut == 1
    # Telegram got the first part twice (the answer to the first send was lost) ...
    texts = [m.text for m in fake.sent(CHANNEL)]
    assert len(texts) == PARTS + 1 and texts[0] == texts[1]
    # ... and the delivery says so: the resend is counted as possibly twice
    assert (report.sent, report.maybe_twice, report.failed) == (PARTS, 1, 0)
    assert report.ok


#: channels of the outage test: enough that the post is still under way when the API goes
CHANNELS = tuple(-1002000000000 - i for i in range(30))


async def test_an_outage_mid_post_heals_by_itself_and_the_alert_goes_out_after(
    fake: FakeTelegram,
    proxy: FaultProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API unreachable for seconds (every attempt of the engine fails many times over)
    while `digest-bot run` posts: nothing is given up, the running bot sends the rest once
    the API answers (no rerun), and the admin alert that could not go out is sent then."""
    for chat in CHANNELS:
        fake.add_chat(chat, "channel", title=f"channel {chat}")
    path = write_config(
        tmp_path,
        base_url=f"{proxy.url}/bot",
        channels=[str(c) for c in CHANNELS],
        schedule=True,
        delivery={
            "max_attempts": 3,
            "backoff_base_seconds": 0.2,
            "backoff_max_seconds": 1.0,
            "resume_check_seconds": 0.5,
        },
    )
    settings = settings_for(path, fake, monkeypatch)
    stop = asyncio.Event()
    bot = asyncio.create_task(
        run(settings, only="telegram", clock=PinnedClock(local(TODAY, 9)), stop=stop)
    )
    try:
        # the catch-up posts the day; the API goes away once the first parts are out
        await fake.wait_until(lambda: len(_posted(fake)) >= 6, timeout=20)  # the post started
        await proxy.go_down()
        before = len(_posted(fake))
        await asyncio.sleep(5)  # the outage: far longer than a delivery's own retries
        assert len(_posted(fake)) == before < len(CHANNELS) * PARTS  # it did cut the post
        assert fake.sent(ADMIN) == []  # nor could any alert go out
        await proxy.come_up()
        # every channel gets every part once the API answers again
        await fake.wait_until(
            lambda: all(len({m.text for m in fake.sent(c)}) == PARTS for c in CHANNELS),
            timeout=30,
        )
        # the alert about the waiting parts, kept while the API was down, is delivered
        await fake.wait_for_messages(ADMIN, 1, timeout=10)
        assert f"parts of the post of {TODAY} wait" in fake.sent(ADMIN)[0].text
    finally:
        stop.set()
        await asyncio.wait_for(bot, 15)
    # nothing lost, each part once (or more only where a cut send may have arrived)
    for chat in CHANNELS:
        texts = [m.text for m in fake.sent(chat)]
        assert len(texts) - PARTS <= proxy.resets
        assert list(dict.fromkeys(texts)) == [m.text for m in fake.sent(CHANNELS[0])][:PARTS]
    # one line per failure, not a traceback per failed attempt or poll
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


def _posted(fake: FakeTelegram) -> list[SentMessage]:
    return [m for c in CHANNELS for m in fake.sent(c)]


async def test_post_leaves_an_hour_long_429_waiting_and_the_running_bot_sends_it_when_due(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`digest-bot post` (a real process) does not wait an hour for one channel: it sends
    the others, leaves that channel's parts waiting with the reason and the time they are
    due, says so, alerts the admin and exits 1; `status` shows the wait; a running bot asks
    that channel nothing before it is due, then sends it."""
    # a day whose post time passed half an hour ago, by the real clock the `post` runs on
    start = dt.datetime.now(dt.UTC)
    posted = (start - dt.timedelta(minutes=30)).astimezone(ZoneInfo(ZONE))
    day = posted.date()
    path = write_config(
        tmp_path,
        base_url=fake.base_url,
        post_time=f"{posted:%H:%M}",
        schedule=True,
        days=[],
        delivery={"resume_check_seconds": 0.2},
    )
    shutil.copy(ARCHIVE / f"{TODAY}.txt", tmp_path / "archive" / f"{day}.txt")
    fake.fail_next(CHANNEL, "flood", retry_after=3600)
    env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": fake.token}
    post = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "post", "--config", str(path),
        "--platform", "telegram", "--date", str(day),
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(post.communicate(), 90)  # (not an hour)
    assert post.returncode == EXIT_FAILED
    said = out.decode()
    assert f"telegram {day}: 发送 / sent {PARTS}" in said and f"waiting {PARTS}" in said
    assert "first due" in said and "a running bot sends them then" in said
    assert len(fake.sent(BY_NAME)) == PARTS and fake.sent(CHANNEL) == []
    [alert] = fake.sent(ADMIN)
    assert f"parts of the post of {day} wait" in alert.text and str(CHANNEL) in alert.text
    status = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "status", "--config", str(path),
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    shown, _ = await asyncio.wait_for(status.communicate(), 60)
    shown_text = shown.decode()
    assert f"{CHANNEL}: 最近 / last —; 等待至 / waiting until" in shown_text
    assert "waiting to be sent again" in shown_text and "RateLimited" in shown_text

    port = free_port()
    with path.open("a", encoding="utf-8") as config:
        config.write(f'[http]\nlisten = "127.0.0.1:{port}"\n')
    settings = settings_for(path, fake, monkeypatch)
    clock = SettableClock(dt.datetime.now(dt.UTC))
    stop = asyncio.Event()
    bot = asyncio.create_task(run(settings, only="telegram", clock=clock, stop=stop))
    try:
        # the catch-up finds the day unfinished and the channel not due: the admin is told
        await fake.wait_for_messages(ADMIN, 2, timeout=30)
        asked = [r for r in fake.requests if r.method == "sendMessage" and r.chat_id == CHANNEL]
        assert len(asked) == 1  # only the `post`'s 429: nothing before it is due
        async with httpx.AsyncClient() as client:
            scraped = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
        assert f"digest_parts_waiting {PARTS:.1f}" in scraped
        [next_try] = [
            float(line.split()[1])
            for line in scraped.splitlines()
            if line.startswith("digest_waiting_next_try_timestamp_seconds ")
        ]
        assert next_try >= start.timestamp() + 3600
        clock.set(start + dt.timedelta(seconds=3600 + 120))  # an hour later
        await fake.wait_for_messages(CHANNEL, PARTS, timeout=30)
    finally:
        stop.set()
        await asyncio.wait_for(bot, 15)
    assert len(fake.sent(CHANNEL)) == PARTS and len(fake.sent(BY_NAME)) == PARTS
