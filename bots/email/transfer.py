"""One mail's transaction on an open aiosmtplib connection, without re-reading what we built.

``aiosmtplib.SMTP.data`` rewrites every line end and dot-stuffs every line of each message
with two regular expressions over all of it, and ``mail``/``rcpt`` parse each address with
the stdlib's RFC 5322 parser: together about 0.4 ms of CPU a mail, more than everything else
the bot does for one (``benchmarks/email.py``). Our mails need neither: ``mime.build`` writes
CRLF line ends only and no line that starts with a dot (headers, base64 and ``--`` boundaries),
and the adapter sends only plain ASCII addresses without ``<>`` or line breaks. So these send
the same commands through aiosmtplib's public ``execute_command`` and its protocol's ``write``
and ``read_response``, raising the exceptions ``SMTP.mail``/``rcpt``/``data`` raise. A message
that is not so (checked at the cost of two scans for a byte) goes through ``SMTP.data``.

The connection MUST be used by one caller at a time (the adapter's pool hands each one out
alone): the DATA's content is written outside aiosmtplib's command lock.
"""

from __future__ import annotations

import logging

import aiosmtplib

log = logging.getLogger(__name__)


async def mail(client: aiosmtplib.SMTP, sender: str) -> None:
    """``MAIL FROM:<sender>`` (after an ``EHLO`` on a connection that has had none, as
    ``SMTP.mail`` sends one).

    Raises:
        aiosmtplib.SMTPSenderRefused: the relay answered other than 250.
        aiosmtplib.SMTPHeloError: the relay refused the EHLO.
        aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError: the connection.
    """
    if client.is_ehlo_or_helo_needed:
        await client.ehlo()
    response = await client.execute_command(b"MAIL", b"FROM:<" + sender.encode("ascii") + b">")
    if response.code != 250:
        raise aiosmtplib.SMTPSenderRefused(response.code, response.message, sender)


async def rcpt(client: aiosmtplib.SMTP, recipient: str) -> None:
    """``RCPT TO:<recipient>``.

    Raises:
        aiosmtplib.SMTPRecipientRefused: the relay answered other than 250 or 251.
        aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError: the connection.
    """
    response = await client.execute_command(b"RCPT", b"TO:<" + recipient.encode("ascii") + b">")
    if response.code not in (250, 251):
        raise aiosmtplib.SMTPRecipientRefused(response.code, response.message, recipient)


def transparent(data: bytes) -> bool:
    """``data`` can go out as it is: it ends with CRLF, no line starts with a dot (RFC 5321
    section 4.5.2), and it has as many CRs as LFs (our builder writes them only as CRLF; a
    stray one makes the counts differ). Single-byte counts and one search: ~40 µs for a
    30 KB mail, where the two substitutions cost ~400 µs."""
    return (
        data.endswith(b"\r\n")
        and not data.startswith(b".")
        and b"\n." not in data
        and data.count(b"\n") == data.count(b"\r")
    )


async def data(client: aiosmtplib.SMTP, message: bytes) -> None:
    """``DATA`` with ``message``, then the final dot.

    Raises:
        aiosmtplib.SMTPDataError: the relay answered DATA other than 354, or the message
            other than 250.
        aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError: the connection (the
            client is closed, as ``SMTP.data`` closes it).
    """
    if not transparent(message):
        log.debug("a message that needs dot-stuffing: through SMTP.data")
        await client.data(message)
        return
    start = await client.execute_command(b"DATA")
    if start.code != 354:
        raise aiosmtplib.SMTPDataError(start.code, start.message)
    protocol = client.protocol
    if protocol is None:
        raise aiosmtplib.SMTPServerDisconnected("Connection lost")
    try:
        protocol.write(message + b".\r\n")
        response = await protocol.read_response(timeout=client.timeout)
    except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError):
        client.close()
        raise
    if response.code != 250:
        raise aiosmtplib.SMTPDataError(response.code, response.message)
