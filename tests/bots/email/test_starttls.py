"""A relay that requires STARTTLS, as a submission port does: the adapter switches to TLS
before anything else, verifies the relay's certificate (a self-signed one made here, trusted
through ``email.tls_ca_file``), logs in only over TLS and mails. Without the CA the connection
is refused before any password is sent; with ``security = "none"`` the relay's 530 is a
refusal of our configuration, not of the reader."""

from __future__ import annotations

import datetime as dt
import ssl
import subprocess
from pathlib import Path

import pytest

from bots.email.adapter import EmailAdapter
from bots.email.settings import EmailSettings
from digest_core.errors import Rejected, TransientError
from digest_core.platform import PartKey, Target, TargetKind
from digest_core.rendering import email as email_render
from digest_core.testing import ManualClock, make_issue
from tests.bots.email.helpers import adapter_for, settings
from tests.fakes.smtp import FakeRelay

NOW = dt.datetime(2026, 10, 27, 0, 5, tzinfo=dt.UTC)
USER, PASSWORD = "digest@example.org", "relay-password-1"


def self_signed(tmp_path: Path) -> tuple[Path, ssl.SSLContext]:
    """(the certificate's PEM, the relay's server context): a certificate for 127.0.0.1."""
    cert, key = tmp_path / "relay.pem", tmp_path / "relay.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=relay.test",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context


def over_tls(tmp_path: Path, port: int, **changes: object) -> EmailSettings:
    base = settings(tmp_path, port).model_dump(by_alias=True)
    base.update(security="starttls", user=USER, password=PASSWORD, **changes)
    return EmailSettings.model_validate(base)


async def send_one(adapter: EmailAdapter) -> str:
    rid = await adapter.book.add("reader@example.net", at=NOW)
    target = Target("email", rid, TargetKind.PRIVATE)
    [message] = email_render.render(make_issue(dt.date(2026, 10, 27)))
    try:
        return await adapter.send(
            target, message, key=PartKey(dt.date(2026, 10, 27), "rev1", 1, target, 0)
        )
    finally:
        await adapter.stop()


async def test_a_relay_that_requires_starttls_gets_the_mail_over_tls(tmp_path: Path) -> None:
    cert, context = self_signed(tmp_path)
    with FakeRelay(senders=set(), starttls=context, logins={USER: PASSWORD}) as relay:
        adapter = adapter_for(
            over_tls(tmp_path, relay.port, tls_ca_file=cert), clock=ManualClock(NOW)
        )
        rid = adapter.book.id_of("reader@example.net")
        relay.handler.senders = {f"digest+{rid}@example.org"}
        msgid = await send_one(adapter)
    [got] = relay.received
    assert got.tls and got.user == USER  # TLS first, then the login, then the mail
    assert got.recipients == ["reader@example.net"] and msgid.encode() in got.data


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_an_unverified_certificate_is_refused_before_the_login(tmp_path: Path) -> None:
    _, context = self_signed(tmp_path)
    with FakeRelay(senders=set(), starttls=context, logins={USER: PASSWORD}) as relay:
        adapter = adapter_for(over_tls(tmp_path, relay.port), clock=ManualClock(NOW))
        with pytest.raises(TransientError, match="cannot reach the relay") as refused:
            await send_one(adapter)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    assert relay.received == [] and PASSWORD not in str(refused.value)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_plain_smtp_to_a_starttls_relay_is_our_configuration_refused(
    tmp_path: Path,
) -> None:
    _, context = self_signed(tmp_path)
    with FakeRelay(senders=set(), starttls=context) as relay:
        adapter = adapter_for(settings(tmp_path, relay.port), clock=ManualClock(NOW))
        with pytest.raises(Rejected, match="530"):
            await send_one(adapter)
    assert relay.received == []
