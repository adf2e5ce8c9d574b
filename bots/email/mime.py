"""One reader's mail as the exact bytes sent: headers, both parts, the optional DKIM signature.

The bytes are assembled directly (the stdlib's ``email`` generator cost ~5 ms a mail, most
of the budget of a 10,000-reader post): CRLF line ends; non-ASCII headers (the subject, the
sender's name) RFC 2047-encoded once per text; bodies base64 in 76-character lines, so no
8-bit data and no line over 998 characters and no relay needs SMTPUTF8 or 8BITMIME, and no
line starts with a dot (``transfer.py`` sends them as they are). What every reader's mail of
one message shares is built once; per reader, only its headers and its link's lines. Then the
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


#: bytes of text per base64 line (76 characters, RFC 2045 section 6.8)
_LINE = 57
_PLAIN = b'Content-Type: text/plain; charset="utf-8"\r\nContent-Transfer-Encoding: base64\r\n'
_HTML = b'Content-Type: text/html; charset="utf-8"\r\nContent-Transfer-Encoding: base64\r\n'


def _base64(raw: bytes) -> bytes:
    return base64.encodebytes(raw).replace(b"\n", b"\r\n")


@dataclass(frozen=True)
class _Body:
    """One part's text as its base64 lines, most of them encoded once per issue and format:
    ``done`` is every whole line before the first unsubscribe marker; ``left`` (the bytes
    after the last whole line), the reader's link and ``after`` (the text after the marker)
    are encoded per reader. Encoding the text in pieces cut at whole lines gives exactly the
    lines of encoding it at once."""

    done: bytes
    left: bytes = b""
    #: the text after the first marker; None: there is no marker, ``done`` is all of it
    after: str | None = None

    def encoded(self, link: str) -> bytes:
        """The part's base64 lines with ``link`` for every marker."""
        if self.after is None:
            return self.done
        rest = link + self.after.replace(UNSUBSCRIBE_MARKER, link)
        return self.done + _base64(self.left + rest.encode("utf-8"))


@functools.lru_cache(maxsize=64)
def _body(text: str) -> _Body:
    """``text`` split for :class:`_Body` (cached: a delivery mails the same text again and
    again, and a text's hash is computed once)."""
    head, marker, after = text.partition(UNSUBSCRIBE_MARKER)
    raw = head.encode("utf-8")
    if not marker:
        return _Body(_base64(raw))
    whole = len(raw) - len(raw) % _LINE
    return _Body(_base64(raw[:whole]), raw[whole:], after)


@functools.lru_cache(maxsize=64)
def _fixed(sender: str, reply_to: str | None, subject: str, list_id: str) -> tuple[str, str, str]:
    """The headers every reader's mail of a message shares, in three runs around theirs:
    From; Reply-To and Subject; List-Id."""
    middle = f"Reply-To: {_address(reply_to)}\r\n" if reply_to else ""
    middle += f"Subject: {_encoded('Subject', subject)}\r\n"
    return (
        f"From: {_address(sender)}\r\n",
        middle,
        f"List-Id: {_encoded('List-Id', list_id)}\r\n",
    )


def _unsubscribe(url: str | None, mailto: str | None, rid: str) -> str:
    """``List-Unsubscribe`` (RFC 2369) with the https URL and the mailto, and
    ``List-Unsubscribe-Post`` (RFC 8058) when there is a URL; "" when there is neither."""
    targets = [f"<{url}>"] if url else []
    if mailto:
        targets.append(f"<mailto:{mailto}?subject=unsubscribe%20{urllib.parse.quote(rid)}>")
    if not targets:
        return ""
    lines = "List-Unsubscribe: " + ",\r\n ".join(targets) + "\r\n"
    return lines + ("List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" if url else "")


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
    ``html`` it is multipart/alternative, the text first. What every reader's mail of one
    message shares is built once (:func:`_fixed`, :func:`_body`); per reader, only the
    envelope's headers and the last lines of each part.
    """
    payload = message.payload
    link = unsubscribe_url or (f"mailto:{unsubscribe_mailto}" if unsubscribe_mailto else "")
    first, middle, last = _fixed(sender, reply_to, str(payload["subject"]), list_id)
    head = (
        f"{first}To: {recipient}\r\n{middle}Date: {email.utils.format_datetime(now)}\r\n"
        f"Message-ID: {msgid}\r\n{last}"
        f"{_unsubscribe(unsubscribe_url, unsubscribe_mailto, rid)}MIME-Version: 1.0\r\n"
    )
    text = _body(str(payload["text"])).encoded(link)
    page = str(payload.get("html") or "")
    if not page:
        data = head.encode("ascii") + _PLAIN + b"\r\n" + text
    else:
        # '=_' occurs in no base64 text: the boundary cannot appear inside a part
        boundary = "=_" + hashlib.sha256(msgid.encode()).hexdigest()[:24]
        head += f'Content-Type: multipart/alternative; boundary="{boundary}"\r\n\r\n'
        mark = f"--{boundary}\r\n".encode()
        data = b"".join((
            head.encode("ascii"), mark, _PLAIN, b"\r\n", text, b"\r\n", mark, _HTML, b"\r\n",
            _body(page).encoded(html.escape(link)), f"\r\n--{boundary}--\r\n".encode(),
        ))  # fmt: skip
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
