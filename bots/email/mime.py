"""One reader's mail as the exact bytes sent: headers, both parts, the optional DKIM signature.

The bytes are built once with ``email.policy.SMTP`` (CRLF line ends, headers folded at 78,
non-ASCII headers RFC 2047-encoded, bodies base64: no 8-bit data and no line over 998
characters, so no relay needs SMTPUTF8 or 8BITMIME) and then signed: the signature covers the
bytes as they go out, and nothing re-serialises them after (a re-folded header breaks it).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import html
import logging
import urllib.parse
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP

from digest_core.platform import PartKey
from digest_core.rendering import Message
from digest_core.rendering.mail import UNSUBSCRIBE_MARKER

log = logging.getLogger(__name__)

#: the headers DKIM signs (those a relay must not change and a reader sees)
SIGNED_HEADERS = (
    b"from", b"to", b"subject", b"date", b"message-id", b"reply-to", b"list-id",
    b"list-unsubscribe", b"list-unsubscribe-post", b"mime-version", b"content-type",
)  # fmt: skip


@dataclass(frozen=True)
class Dkim:
    selector: str
    domain: str
    key: bytes


@dataclass(frozen=True)
class Envelope:
    """What the relay is told (MAIL FROM, RCPT TO) and the message's bytes."""

    sender: str
    recipient: str
    data: bytes


def message_id(key: PartKey | None, rid: str, domain: str, *, fallback: str) -> str:
    """``<2026-10-27.REVISION.g1.p0.READER@domain>``: the part's identity, so a resend after
    a crash is recognisably the same message (``fallback`` names one-off mails)."""
    if key is None:
        return f"<{fallback}.{rid}@{domain}>"
    return (
        f"<{key.issue_date.isoformat()}.{key.revision}.g{key.generation}.p{key.part}."
        f"{rid}@{domain}>"
    )


def verp(sender: str, rid: str) -> str:
    """The return path of one reader: ``digest+READER@example.org`` (bounces name the reader)."""
    local, _, domain = sender.rpartition("@")
    return f"{local}+{rid}@{domain}"


def build(
    message: Message,
    *,
    sender: str,
    reply_to: str | None,
    recipient: str,
    rid: str,
    list_id: str,
    unsubscribe_url: str | None,
    unsubscribe_mailto: str | None,
    msgid: str,
    now: dt.datetime,
    dkim: Dkim | None = None,
) -> Envelope:
    """The mail of ``message`` (a mail renderer's payload) to one reader.

    ``unsubscribe_url`` replaces the renderer's marker in both parts and, with the mailto,
    makes ``List-Unsubscribe`` (RFC 2369) and ``List-Unsubscribe-Post`` (RFC 8058). ``now`` is
    the Date, in the digest's zone.
    """
    payload = message.payload
    link = unsubscribe_url or (f"mailto:{unsubscribe_mailto}" if unsubscribe_mailto else "")
    mail = EmailMessage(policy=SMTP)
    mail["From"] = sender
    mail["To"] = recipient
    if reply_to:
        mail["Reply-To"] = reply_to
    mail["Subject"] = str(payload["subject"])
    mail["Date"] = email.utils.format_datetime(now)
    mail["Message-ID"] = msgid
    mail["List-Id"] = list_id
    targets = []
    if unsubscribe_url:
        targets.append(f"<{unsubscribe_url}>")
    if unsubscribe_mailto:
        subject = urllib.parse.quote(f"unsubscribe {rid}")
        targets.append(f"<mailto:{unsubscribe_mailto}?subject={subject}>")
    if targets:
        mail["List-Unsubscribe"] = ", ".join(targets)
    if unsubscribe_url:
        mail["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    text = str(payload["text"]).replace(UNSUBSCRIBE_MARKER, link)
    mail.set_content(text, subtype="plain", charset="utf-8", cte="base64")
    body = str(payload.get("html") or "")
    if body:
        mail.add_alternative(
            body.replace(UNSUBSCRIBE_MARKER, html.escape(link)),
            subtype="html",
            charset="utf-8",
            cte="base64",
        )
    data = mail.as_bytes(policy=SMTP)
    if dkim is not None:
        data = sign(data, dkim)
    return Envelope(verp(email.utils.parseaddr(sender)[1], rid), recipient, data)


def sign(data: bytes, key: Dkim) -> bytes:
    """``data`` with a DKIM-Signature header (relaxed/relaxed, rsa-sha256) in front."""
    import dkim

    signature = dkim.sign(
        data,
        key.selector.encode(),
        key.domain.encode(),
        key.key,
        canonicalize=(b"relaxed", b"relaxed"),
        include_headers=list(SIGNED_HEADERS),
        linesep=b"\r\n",
    )
    return bytes(signature) + data
