"""One mail's SMTP transaction (bots/email/transfer.py) against a real SMTP server on loopback:
our mails go out as built (the relay receives exactly the bytes), a message that needs
dot-stuffing or has stray line ends goes through aiosmtplib's own DATA and arrives intact, and
a relay that takes the content and never answers is an outcome unknown, the connection
reopened for the next mail."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import aiosmtplib
import pytest

from bots.email import mime, transfer
from bots.email.settings import EmailSettings
from digest_core.errors import OutcomeUnknown
from digest_core.platform import PartKey, Target, TargetKind
from digest_core.rendering import RenderOptions
from digest_core.rendering import email as email_render
from digest_core.testing import ManualClock, make_issue
from tests.bots.email.helpers import adapter_for, settings
from tests.fakes.smtp import FakeRelay

NOW = dt.datetime(2026, 10, 27, 0, 5, tzinfo=dt.UTC)
SENDER = "digest+r1@example.org"


def test_what_can_go_out_as_it_is() -> None:
    assert transfer.transparent(b"Subject: x\r\n\r\nbody\r\n")
    assert not transfer.transparent(b"Subject: x\r\n\r\n.hidden\r\n")  # a dot line
    assert not transfer.transparent(b".\r\n")
    assert not transfer.transparent(b"Subject: x\r\n\r\nbare\nline\r\n")
    assert not transfer.transparent(b"Subject: x\r\n\r\nbare\rreturn\r\n")
    assert not transfer.transparent(b"Subject: x\r\n\r\nno end")


def test_every_mail_we_build_goes_out_as_it_is() -> None:
    [message] = email_render.render(
        make_issue(dt.date(2026, 10, 27)), options=RenderOptions(site_url="https://d.example/")
    )
    [notice] = email_render.notice("确认订阅 / Confirm\n\n.第一行是点\n" + "长" * 400)
    for m in (message, notice):
        built = mime.build(
            m, sender="AI 技术日报 <digest@example.org>", reply_to="e@example.org",
            recipient="a@example.net", rid="r1", list_id="<digest.example.org>",
            unsubscribe_url="https://d.example/email/unsubscribe?t=a.b", msgid="<m@example.org>",
            unsubscribe_mailto="digest@example.org", now=NOW,
        )  # fmt: skip
        assert transfer.transparent(built.data)


async def client_of(relay: FakeRelay) -> aiosmtplib.SMTP:
    client = aiosmtplib.SMTP(hostname="127.0.0.1", port=relay.port, timeout=5)
    await client.connect()
    return client


@pytest.mark.parametrize(
    ("sent", "received"),
    [
        (b"Subject: as built\r\n\r\nbody\r\n", b"Subject: as built\r\n\r\nbody\r\n"),
        # through SMTP.data: dot-stuffed on the way, unstuffed by the relay; line ends mended
        (
            b"Subject: x\r\n\r\n.dot\r\nbare\nline\r\n",
            b"Subject: x\r\n\r\n.dot\r\nbare\r\nline\r\n",
        ),
    ],
)
async def test_the_relay_receives_the_message(sent: bytes, received: bytes) -> None:
    with FakeRelay(senders={SENDER}) as relay:
        client = await client_of(relay)
        try:
            for _ in range(2):  # one connection, transaction after transaction
                await transfer.mail(client, SENDER)
                await transfer.rcpt(client, "a@example.net")
                await transfer.data(client, sent)
        finally:
            await client.quit()
        got = relay.received
    assert [g.data for g in got] == [received, received]
    assert got[0].sender == SENDER and got[0].recipients == ["a@example.net"]


async def test_refusals_raise_what_aiosmtplib_raises() -> None:
    with FakeRelay(senders={SENDER}) as relay:
        relay.handler.refuse_rcpt["gone@example.net"] = ["550 5.1.1 no such user"]
        client = await client_of(relay)
        try:
            with pytest.raises(aiosmtplib.SMTPSenderRefused) as sender:
                await transfer.mail(client, "other@example.org")
            await client.rset()
            await transfer.mail(client, SENDER)
            with pytest.raises(aiosmtplib.SMTPRecipientRefused) as recipient:
                await transfer.rcpt(client, "gone@example.net")
            await transfer.rcpt(client, "a@example.net")
            relay.handler.refuse_data.append("554 5.6.0 refused")
            with pytest.raises(aiosmtplib.SMTPDataError) as data:
                await transfer.data(client, b"Subject: x\r\n\r\nbody\r\n")
        finally:
            await client.quit()
    assert (sender.value.code, recipient.value.code, data.value.code) == (553, 550, 554)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_relay_silent_after_the_content_is_an_outcome_unknown(tmp_path: Path) -> None:
    [message] = email_render.render(make_issue(dt.date(2026, 10, 27)))
    with FakeRelay(senders=set()) as relay:
        quick = {**settings(tmp_path, relay.port).model_dump(by_alias=True), "timeout_seconds": 0.5}
        adapter = adapter_for(EmailSettings.model_validate(quick), clock=ManualClock(NOW))
        rid = await adapter.book.add("a@example.net", at=NOW)
        target = Target("email", rid, TargetKind.PRIVATE)
        key = PartKey(dt.date(2026, 10, 27), "rev1", 1, target, 0)
        relay.handler.senders = {f"digest+{rid}@example.org"}
        relay.handler.stall_data = 1
        try:
            with pytest.raises(OutcomeUnknown, match="at DATA"):
                await adapter.send(target, message, key=key)
            await adapter.send(target, message, key=key)  # a new connection
        finally:
            await adapter.stop()
        assert adapter.connections == 2
        assert len(relay.received) == 1
