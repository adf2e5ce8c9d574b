"""A reader's mail is a ledger part: a real ``digest-bot post`` killed with SIGKILL while it
mails 40 readers (paced at 10/s), then run again, leaves every reader with the issue, a mail
twice only when it was in flight (and then with the same Message-ID); a 4xx answer is retried
by the core's backoff and the reader gets the issue once."""

from __future__ import annotations

import asyncio
import collections
import io
import os
import signal
import sys
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest

from bots import registry
from bots.email.addresses import AddressBook
from bots.runtime import open_service
from digest_core.clock import SystemClock
from tests import forkserver
from tests.bots.email.helpers import SECRET, SENDER
from tests.bots.workchat_helpers import ARCHIVE, ROOT
from tests.fakes.smtp import FakeRelay

pytestmark = pytest.mark.slow  # real processes, servers or a browser

DAY = "2026-11-26"
READERS = [f"reader{n:02d}@example.net" for n in range(40)]


def write_config(tmp_path: Path, port: int, *, rate: float = 10) -> Path:
    """The bot's config for the relay at ``port``; ``rate``: mails a second (10: a post to
    the 40 readers takes 4 s, long enough to be killed mid-send; tests that kill nothing send
    faster)."""
    config = tmp_path / "digest-bot.toml"
    config.write_text(
        f'archive_dir = "{ARCHIVE}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n'
        'timezone = "Asia/Shanghai"\n'
        f'[email]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
        f'from = "AI 技术日报 <{SENDER}>"\npublic_url = "https://digest.example.org/"\n'
        f'address_book = "{tmp_path / "readers.sqlite3"}"\nrate_per_second = {rate}\n',
        encoding="utf-8",
    )
    return config


async def subscribe_all(config: Path, tmp_path: Path) -> dict[str, str]:
    """Confirmed readers as the web flow leaves them: in the address book and subscribed."""
    os.environ["DIGEST_BOT_EMAIL__SECRET_KEY"] = SECRET
    try:
        settings = registry.load_settings(config)
    finally:
        del os.environ["DIGEST_BOT_EMAIL__SECRET_KEY"]
    book = AddressBook(tmp_path / "readers.sqlite3", SECRET)
    ids: dict[str, str] = {}
    async with open_service(settings, clock=SystemClock(), out=io.StringIO()) as service:
        for address in READERS:
            rid = await book.add(address, at=SystemClock().now())
            await service.subscribe("email", rid, on=True)
            ids[address] = rid
    return ids


def env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")},
        "DIGEST_BOT_EMAIL__SECRET_KEY": SECRET,
    }


async def start_post(config: Path) -> asyncio.subprocess.Process:
    return await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "post", "--config", str(config),
        "--platform", "email", "--date", DAY,
        cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_sigkill_mid_send_and_a_rerun_lose_nothing(tmp_path: Path) -> None:
    with FakeRelay(senders=set()) as relay:
        config = write_config(tmp_path, relay.port)
        ids = await subscribe_all(config, tmp_path)
        relay.handler.senders = {f"digest+{rid}@example.org" for rid in ids.values()}
        first = await start_post(config)
        await asyncio.to_thread(relay.wait_for, 10, 60)
        first.send_signal(signal.SIGKILL)
        await first.wait()
        cut = len(relay.received)
        assert cut < len(READERS)  # killed mid-delivery
        second = await start_post(config)
        _, err = await asyncio.wait_for(second.communicate(), 120)
        assert second.returncode == 0, err.decode()[-2000:]
        got = relay.received
    per_reader = collections.Counter(r.recipients[0] for r in got)
    assert set(per_reader) == set(READERS)  # nothing lost
    twice = [a for a, n in per_reader.items() if n > 1]
    assert all(per_reader[a] == 2 for a in twice)
    assert len(twice) <= 2, twice  # only the mails in flight when it was killed
    for address in twice:
        ids_seen = {
            BytesParser(policy=policy.default).parsebytes(r.data)["Message-ID"]
            for r in got
            if r.recipients == [address]
        }
        assert len(ids_seen) == 1  # a resend is recognisably the same message


async def test_a_4xx_is_retried_by_the_core_and_arrives_once(tmp_path: Path) -> None:
    with FakeRelay(senders=set()) as relay:
        config = write_config(tmp_path, relay.port)
        ids = await subscribe_all(config, tmp_path)
        relay.handler.senders = {f"digest+{rid}@example.org" for rid in ids.values()}
        relay.handler.refuse_rcpt[READERS[3]] = ["451 4.7.1 greylisted, try again"]
        relay.handler.refuse_rcpt[READERS[5]] = ["550 5.1.1 no such user"]
        post = await start_post(config)
        _, err = await asyncio.wait_for(post.communicate(), 120)
        got = relay.received
    per_reader = collections.Counter(r.recipients[0] for r in got)
    assert per_reader[READERS[3]] == 1  # retried after the 451, once
    assert READERS[5] not in per_reader  # refused for good: never retried
    assert all(per_reader[a] == 1 for a in READERS if a != READERS[5])
    assert relay.handler.refuse_rcpt[READERS[3]] == []
    # the CLI's exit for a delivery with a gone target; the report counts it
    assert post.returncode == 1 and "sent 39 (0 possibly twice), failed 0, gone 1" in err.decode()
    assert READERS[5] not in err.decode() and READERS[3] not in err.decode()
