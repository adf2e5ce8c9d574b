"""The running bot reads the bounce mailbox itself: a real ``digest-bot run`` (its scheduler's
job every ``bounce_check_seconds``) against a real Dovecot, no ``digest-bot email bounces``.

A hard bounce waiting in the mailbox at the start deactivates its reader at once; a soft
bounce, a second one (the limit) and an unsubscribe mail delivered while the bot runs are read
by a later run of the job. ``/metrics`` counts readers and bounces (never addresses) as they
change, and afterwards the deactivated readers are unsubscribed and forgotten while the
others stay.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from email.message import EmailMessage
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import forkserver
from tests.bots.email.test_bounces import cli, report
from tests.bots.email.test_e2e import free_port
from tests.bots.email.test_exactly_once import READERS, env, subscribe_all, write_config
from tests.bots.workchat_helpers import ROOT
from tests.fakes.smtp import FakeRelay
from tests.imap import PASSWORD, USER, Mailbox, dovecot

pytestmark = pytest.mark.slow  # real processes and servers

Counts = dict[tuple[str, str], float]


async def scrape(http: aiohttp.ClientSession, url: str) -> Counts:
    """The email platform's own counts on /metrics: (metric, kind) -> value."""
    try:
        async with http.get(url) as answer:
            text = await answer.text()
    except aiohttp.ClientConnectionError:
        return {}
    return {
        (family.name, sample.labels["kind"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name in ("digest_readers", "digest_bounces")
        for sample in family.samples
        if sample.labels.get("platform") == "email"
    }


async def until(
    http: aiohttp.ClientSession, url: str, want: Counts, bot: asyncio.subprocess.Process
) -> Counts:
    got: Counts = {}
    for _ in range(600):  # at most 60 s
        got = await scrape(http, url)
        if all(got.get(k) == v for k, v in want.items()):
            return got
        assert bot.returncode is None, "the bot exited"
        await asyncio.sleep(0.1)
    raise AssertionError(f"/metrics never showed {want}; last {got}")


def unsubscribe_mail(rid: str) -> bytes:
    """What a mailbox provider's List-Unsubscribe mailto sends."""
    mail = EmailMessage()
    mail["From"] = "someone@example.net"
    mail["To"] = "digest@example.org"
    mail["Subject"] = f"unsubscribe {rid}"
    mail.set_content("")
    return mail.as_bytes()


def bounce(rid: str, *, status: str) -> bytes:
    action = "failed" if status.startswith("5") else "delayed"
    return report(
        "delivery-status", to=f"digest+{rid}@example.org", action=action, status=status,
        original=f"Message-ID: <2026-11-26.x.g1.p0.{rid}@example.org>",
    )  # fmt: skip


def configure(config: Path, box: Mailbox, tmp_path: Path, http_port: int) -> None:
    (tmp_path / "imap-pass").write_text(PASSWORD)
    with config.open("a", encoding="utf-8") as fh:
        fh.write(
            f'imap_host = "{box.host}"\nimap_port = {box.port}\nimap_security = "none"\n'
            f'imap_user = "{USER}"\nimap_password_file = "{tmp_path / "imap-pass"}"\n'
            "soft_bounce_limit = 2\nbounce_check_seconds = 1\n"
            f'[http]\nlisten = "127.0.0.1:{http_port}"\n'
        )


async def test_the_running_bot_reads_the_bounce_mailbox_every_few_seconds(
    tmp_path: Path,
) -> None:
    hard, soft, unsub, kept = READERS[:4]
    http_port = free_port()
    url = f"http://127.0.0.1:{http_port}/metrics"
    with dovecot() as box, FakeRelay(senders=set()) as relay:
        config = write_config(tmp_path, relay.port, rate=100)
        configure(config, box, tmp_path, http_port)
        ids = await subscribe_all(config, tmp_path)
        box.deliver(bounce(ids[hard], status="5.1.1"))  # waiting when the bot starts
        bot = await forkserver.create_subprocess_exec(
            sys.executable, "-m", "bots.cli", "run", "--config", str(config),
            cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            async with aiohttp.ClientSession() as http:
                first = await until(http, url, {("digest_bounces", "hard"): 1}, bot)
                assert first[("digest_readers", "confirmed")] == len(READERS) - 1
                assert first[("digest_readers", "deactivated")] == 1
                assert box.count() == 0
                # while it runs: read by a later run of its job
                box.deliver(bounce(ids[soft], status="4.2.2"))
                box.deliver(bounce(ids[soft], status="4.4.7"))
                box.deliver(unsubscribe_mail(ids[unsub]))
                later = {
                    ("digest_bounces", "soft"): 2,
                    ("digest_bounces", "unsubscribe"): 1,
                    ("digest_readers", "deactivated"): 3,
                    ("digest_readers", "confirmed"): len(READERS) - 3,
                }
                await until(http, url, later, bot)
                async with http.get(url) as answer:
                    exported = await answer.text()
                assert not any(a in exported for a in READERS)
        finally:
            if bot.returncode is None:
                bot.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(bot.communicate(), 30)
        assert bot.returncode == 0, err.decode()[-3000:]
        assert not any(a in err.decode() for a in READERS)
        for address, subscribed in ((hard, False), (soft, False), (unsub, False), (kept, True)):
            code, out = await cli(config, "email", "export", address)
            assert code == 0, out
            data = json.loads(out[out.index("{") :])
            assert data["subscribed"] is subscribed, address
            assert (data["address"] is not None) is subscribed, address
