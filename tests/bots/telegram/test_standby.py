"""A Telegram bot that is not the leader: it never polls; in webhook mode it answers commands."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bots.runtime import run
from digest_core.clock import SystemClock
from digest_core.delivery import Ledger
from digest_core.service.leadership import LEADER_LEASE, LOCK_POLL_SECONDS
from tests import ports
from tests.bots.telegram.harness import ANN, CHANNEL, settings_for, write_config
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow  # real processes, servers or a browser

LEADER = "leader-host.example:1:abcd"


class TriesClock(SystemClock):
    """The real clock, counting the standby's election tries by the sleeps between them."""

    def __init__(self) -> None:
        self.tries = 0

    async def sleep(self, seconds: float) -> None:
        if seconds == LOCK_POLL_SECONDS:
            self.tries += 1
        await super().sleep(seconds)


def free_port() -> int:
    return ports.free_port()


async def test_a_polling_standby_never_polls(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGEST_BOT_LEADER__LEASE_SECONDS", "3")  # a try every second
    settings = settings_for(
        write_config(tmp_path, base_url=fake.base_url, channels=[str(CHANNEL)]), fake, monkeypatch
    )
    clock = TriesClock()
    async with Ledger.open(settings.database_url, clock=SystemClock(), owner=LEADER) as other:
        await other.acquire_lease(LEADER_LEASE, ttl=600)
        stop = asyncio.Event()
        task = asyncio.create_task(run(settings, only="telegram", stop=stop, clock=clock))
        # several election tries (an SQLite ledger's leadership is an OS lock: tried every
        # LOCK_POLL_SECONDS), each followed by the standby's sleep until the next
        async with asyncio.timeout(30):
            while clock.tries < 3:
                assert not task.done(), task
                await asyncio.sleep(0.01)
        assert not task.done()
        # not even logged in: the leader holds the bot's connection
        assert fake.calls("getUpdates") == [] and fake.calls("getMe") == []
        await other.release_lease(LEADER_LEASE)  # the leader stops: this one takes over
        for _ in range(200):
            if fake.calls("getUpdates"):
                break
            await asyncio.sleep(0.05)
        assert fake.calls("getUpdates") and not [
            c for c in fake.calls("getUpdates") if c.status == 409
        ]
        stop.set()
        await asyncio.wait_for(task, 15)


async def test_a_webhook_standby_answers_commands(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tornado", reason="python-telegram-bot[webhooks] is not installed")
    port = free_port()
    config = write_config(
        tmp_path,
        base_url=fake.base_url,
        channels=[str(CHANNEL)],
        telegram={
            "mode": "webhook",
            "webhook_url": "https://bot.example.org/tg/hook",
            "webhook_port": port,
        },
    )
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__WEBHOOK_SECRET", "s3cret")
    settings = settings_for(config, fake, monkeypatch)
    async with Ledger.open(settings.database_url, clock=SystemClock(), owner=LEADER) as other:
        await other.acquire_lease(LEADER_LEASE, ttl=600)
        stop = asyncio.Event()
        task = asyncio.create_task(run(settings, only="telegram", stop=stop))
        try:
            for _ in range(200):
                if fake.webhook is not None:
                    break
                await asyncio.sleep(0.05)
            update = {
                "update_id": 1,
                "message": {
                    "message_id": 1, "date": 0, "text": "/classic",
                    "chat": {"id": ANN, "type": "private", "first_name": "Ann"},
                    "from": {"id": ANN, "is_bot": False, "first_name": "Ann"},
                    "entities": [{"type": "bot_command", "offset": 0, "length": 8}],
                },
            }  # fmt: skip
            async with httpx.AsyncClient() as client:
                answer = await client.post(
                    f"http://127.0.0.1:{port}/tg/hook",
                    json=update,
                    headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret"},
                )
            assert answer.status_code == 200
            # (the latest issue: today's is not in the archive, the note comes first)
            sent = await fake.wait_for_messages(ANN, 2)
            assert any("【经典回顾】" in m.text for m in sent)
            # a standby: it answers, but posts nothing and never polls
            assert fake.sent(CHANNEL) == [] and fake.calls("getUpdates") == []
            lease = await other.lease(LEADER_LEASE)
            assert lease is not None and lease.owner == LEADER
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
