"""Bounces over IMAP against a real Dovecot: ``digest-bot email bounces`` reads DSNs (RFC 3464),
an ARF complaint (RFC 5965) and an unsubscribe mail from the mailbox, deactivates the hard
bounce, the complaint, the unsubscriber and the reader past the soft-bounce limit, keeps the
reader with one soft bounce, empties the mailbox, and the next post skips the deactivated."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sqlite3
import sys
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

import pytest

from bots.email.addresses import reader_id
from tests import forkserver
from tests.bots.email.helpers import SECRET
from tests.bots.email.test_exactly_once import (
    READERS,
    env,
    start_post,
    subscribe_all,
    write_config,
)
from tests.bots.workchat_helpers import ROOT
from tests.fakes.smtp import FakeRelay
from tests.imap import PASSWORD, USER, dovecot

pytestmark = pytest.mark.slow  # real processes, servers or a browser


def report(kind: str, *, to: str, status: str = "", action: str = "", original: str) -> bytes:
    """A multipart/report as a receiving server writes one (RFC 3464 / RFC 5965)."""
    if kind == "delivery-status":
        machine = (
            "Content-Type: message/delivery-status\r\n\r\n"
            "Reporting-MTA: dns; mx.example.net\r\n\r\n"
            f"Final-Recipient: rfc822; someone@example.net\r\nAction: {action}\r\n"
            f"Status: {status}\r\nDiagnostic-Code: smtp; {status} mailbox problem\r\n"
        )
    else:
        machine = (
            "Content-Type: message/feedback-report\r\n\r\n"
            "Feedback-Type: abuse\r\nUser-Agent: test/1.0\r\nVersion: 1\r\n"
        )
    return (
        "From: MAILER-DAEMON@mx.example.net\r\n"
        f"To: {to}\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "MIME-Version: 1.0\r\n"
        f'Content-Type: multipart/report; report-type={kind}; boundary="=_r"\r\n\r\n'
        "--=_r\r\nContent-Type: text/plain\r\n\r\nThe mail system at mx.example.net.\r\n"
        f"--=_r\r\n{machine}"
        f"--=_r\r\nContent-Type: text/rfc822-headers\r\n\r\n{original}\r\n"
        "--=_r--\r\n"
    ).encode()


async def cli(config: Path, *args: str) -> tuple[int, str]:
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", *args, "--config", str(config),
        cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_bounces_from_a_real_imap_mailbox_deactivate_readers(tmp_path: Path) -> None:
    hard, complaint, soft_twice, soft_once, unsub = READERS[:5]
    with dovecot() as box, FakeRelay(senders=set()) as relay:
        config = write_config(tmp_path, relay.port, rate=100)
        with config.open("a") as fh:
            fh.write(
                f'imap_host = "{box.host}"\nimap_port = {box.port}\nimap_security = "none"\n'
                f'imap_user = "{USER}"\nimap_password_file = "{tmp_path / "imap-pass"}"\n'
                "soft_bounce_limit = 2\n"
            )
        (tmp_path / "imap-pass").write_text(PASSWORD)
        ids = await subscribe_all(config, tmp_path)
        relay.handler.senders = {f"digest+{rid}@example.org" for rid in ids.values()}
        post = await start_post(config)
        assert await post.wait() == 0
        sent = {r.recipients[0]: r for r in relay.received}

        def headers(address: str) -> str:
            return sent[address].data.split(b"\r\n\r\n", 1)[0].decode()

        def verp(address: str) -> str:
            return f"digest+{ids[address]}@example.org"

        box.deliver(report("delivery-status", to=verp(hard), action="failed",
                           status="5.1.1", original=headers(hard)))  # fmt: skip
        box.deliver(report("feedback-report", to="abuse-reports@example.org",
                           original=headers(complaint)))  # fmt: skip
        for _ in range(2):  # named only by the returned Message-ID
            box.deliver(report("delivery-status", to="digest@example.org", action="delayed",
                               status="4.2.2", original=headers(soft_twice)))  # fmt: skip
        box.deliver(report("delivery-status", to=verp(soft_once), action="failed",
                           status="4.4.7", original=headers(soft_once)))  # fmt: skip
        parsed = BytesParser(policy=policy.default).parsebytes(sent[unsub].data)
        mailto = str(parsed["List-Unsubscribe"]).split("<mailto:", 1)[1].split(">", 1)[0]
        subject = mailto.split("subject=", 1)[1].replace("%20", " ")
        request = EmailMessage()
        request["From"] = unsub
        request["To"] = mailto.split("?", 1)[0]
        request["Subject"] = subject
        request.set_content("")
        box.deliver(request.as_bytes())
        box.deliver(b"From: someone@example.net\r\nSubject: hello\r\n\r\nnot a bounce\r\n")

        code, out = await cli(config, "email", "bounces")
        assert code == 0, out
        assert "hard 1, soft 3, complaint 1, unsubscribe 1, deactivated 4" in out
        assert not any(a in out for a in READERS)  # counts and ids, never addresses
        # the dashboard's reasons: why each subscription ended, counted and naming no one
        with contextlib.closing(sqlite3.connect(tmp_path / "ledger.db")) as db:
            left = dict(db.execute("SELECT key, n FROM usage_counts WHERE kind = 'left'"))
        assert left == {"bounce": 2, "complaint": 1, "mailto": 1}
        assert box.count() == 0  # read once: a second run counts nothing again
        code, out = await cli(config, "email", "bounces")
        assert "hard 0, soft 0, complaint 0, unsubscribe 0, deactivated 0" in out

        before = len(relay.received)
        forced = await forkserver.create_subprocess_exec(
            sys.executable, "-m", "bots.cli", "post", "--config", str(config),
            "--platform", "email", "--date", "2026-11-26", "--force",
            cwd=ROOT, env=env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert await asyncio.wait_for(forced.wait(), 120) == 0
        again = collections.Counter(r.recipients[0] for r in relay.received[before:])
    assert set(again) == set(READERS) - {hard, complaint, soft_twice, unsub}
    assert ids[hard] == reader_id(hard, SECRET)
