"""One reader's mail as the exact bytes sent: headers, both parts, the optional DKIM signature.

The bytes are assembled directly (the stdlib's ``email`` generator cost ~5 ms a mail, most
of the budget of a 10,000-reader post): CRLF line ends; non-ASCII headers (the subject, the
sender's name) RFC 2047-encoded once per text; bodies base64 in 76-character lines, so no
8-bit data and no line over 998 characters and no relay needs SMTPUTF8 or 8BITMIME. Then the
bytes are signed: the signature covers them as they go out, and nothing re-serialises them
after (a header re-folded after signing breaks it). ``tests/bots/email`` parses what the
relay received with the stdlib parser and verifies the signature with dkimpy.
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import functools
import hashlib
import html
import logging
import urllib.parse
from dataclasses import dataclass
from email.header import Header

from digest_core.port import Message, PartKey
from digest_core.rendering.email import UNSUBSCRIBE_MARKER

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


@functools.lru_cache(maxsize=256)
def _encoded(name: str, value: str) -> str:
    """``value`` as a header's text: as is when ASCII, else RFC 2047 encoded words, folded."""
    if value.isascii() and len(name) + len(value) < 76:
        return value
    return Header(value, "utf-8", header_name=name).encode(linesep="\r\n")


@functools.lru_cache(maxsize=256)
def _address(value: str) -> str:
    """``Name <user@domain>`` with a non-ASCII name encoded."""
    name, address = email.utils.parseaddr(value)
    return email.utils.formataddr((name, address), charset="utf-8") if name else address


def _base64(text: str) -> bytes:
    return base64.encodebytes(text.encode("utf-8")).replace(b"\n", b"\r\n")


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
    """The mail of ``message`` (a mail renderer's payload) to one reader (an ASCII address).

    ``unsubscribe_url`` replaces the renderer's marker in both parts and, with the mailto,
    makes ``List-Unsubscribe`` (RFC 2369) and ``List-Unsubscribe-Post`` (RFC 8058). ``now`` is
    the Date, in the digest's zone. One part (``text`` only) is a text/plain mail; with
    ``html`` it is multipart/alternative, the text first.
    """
    payload = message.payload
    link = unsubscribe_url or (f"mailto:{unsubscribe_mailto}" if unsubscribe_mailto else "")
    headers = [("From", _address(sender)), ("To", recipient)]
    if reply_to:
        headers.append(("Reply-To", _address(reply_to)))
    headers += [
        ("Subject", _encoded("Subject", str(payload["subject"]))),
        ("Date", email.utils.format_datetime(now)),
        ("Message-ID", msgid),
        ("List-Id", _encoded("List-Id", list_id)),
    ]
    targets = []
    if unsubscribe_url:
        targets.append(f"<{unsubscribe_url}>")
    if unsubscribe_mailto:
        subject = urllib.parse.quote(f"unsubscribe {rid}")
        targets.append(f"<mailto:{unsubscribe_mailto}?subject={subject}>")
    if targets:
        headers.append(("List-Unsubscribe", ",\r\n ".join(targets)))
    if unsubscribe_url:
        headers.append(("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
    headers.append(("MIME-Version", "1.0"))
    text = _base64(str(payload["text"]).replace(UNSUBSCRIBE_MARKER, link))
    page = str(payload.get("html") or "")
    plain_type = b'Content-Type: text/plain; charset="utf-8"\r\n'
    encoding = b"Content-Transfer-Encoding: base64\r\n"
    if not page:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers).encode("ascii")
        data = head + plain_type + encoding + b"\r\n" + text
    else:
        # '=_' occurs in no base64 text: the boundary cannot appear inside a part
        boundary = "=_" + hashlib.sha256(msgid.encode()).hexdigest()[:24]
        headers.append(("Content-Type", f'multipart/alternative; boundary="{boundary}"'))
        head = "".join(f"{k}: {v}\r\n" for k, v in headers).encode("ascii")
        mark = f"--{boundary}\r\n".encode()
        data = (
            head
            + b"\r\n"
            + mark
            + plain_type
            + encoding
            + b"\r\n"
            + text
            + b"\r\n"
            + mark
            + b'Content-Type: text/html; charset="utf-8"\r\n'
            + encoding
            + b"\r\n"
            + _base64(page.replace(UNSUBSCRIBE_MARKER, html.escape(link)))
            + f"\r\n--{boundary}--\r\n".encode()
        )
    if dkim is not None:
        data = sign(data, dkim)
    return Envelope(verp(_bare(sender), rid), recipient, data)


@functools.lru_cache(maxsize=16)
def _bare(value: str) -> str:
    return email.utils.parseaddr(value)[1]


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
