"""The bounce mailbox: delivery-status notifications, complaints and unsubscribe mails, read
over IMAP (aioimaplib) and classified by the standards' own fields.

- A DSN (RFC 3464: ``multipart/report; report-type=delivery-status``) names the reader by the
  VERP return path it was sent to (``digest+READER@…`` in To / Delivered-To) or by the
  Message-ID of the returned message (``…READER@domain``); ``Action: failed`` with a 5.x.x
  ``Status`` is a hard bounce, a 4.x.x (or ``Action: delayed``) a soft one.
- An ARF complaint (RFC 5965: ``report-type=feedback-report``) is a complaint.
- A mail with the subject ``unsubscribe READER`` (the List-Unsubscribe mailto) unsubscribes.

Messages read are marked ``\\Seen`` and ``\\Deleted`` and expunged, so a second run does not
count them again. Known problem avoided: aioimaplib gives a FETCH's message as a bytearray
among the response lines (aioimaplib #72); each message is fetched alone by UID.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage, Message

from bots.email.addresses import AddressBook
from bots.email.settings import EmailSettings

log = logging.getLogger(__name__)

_RID = r"r[0-9a-f]{24}"
_VERP = re.compile(rf"\+({_RID})@")
_MSGID = re.compile(rf"\.({_RID})@")
_UNSUBSCRIBE = re.compile(rf"^\s*unsubscribe\s+({_RID})\s*$", re.IGNORECASE)
_STATUS = re.compile(r"^([245])\.\d{1,3}\.\d{1,3}$")


class Kind(enum.StrEnum):
    HARD = "hard"
    SOFT = "soft"
    COMPLAINT = "complaint"
    UNSUBSCRIBE = "unsubscribe"


#: why a subscription ends, per kind of mail (the dashboard's reasons: ``LEFT_REASONS``)
_WHY = {
    Kind.HARD: "bounce",
    Kind.SOFT: "bounce",
    Kind.COMPLAINT: "complaint",
    Kind.UNSUBSCRIBE: "mailto",
}


@dataclass(frozen=True)
class Event:
    """What one mail of the bounce mailbox says about one reader."""

    kind: Kind
    reader: str
    #: the DSN's Status (``5.1.1``), or empty
    status: str = ""


def classify(raw: bytes) -> Event | None:
    """The event one mail of the bounce mailbox carries, or None (not ours, or no reader)."""
    mail = message_from_bytes(raw, policy=policy.default)
    assert isinstance(mail, EmailMessage)
    subject = str(mail.get("Subject", ""))
    if (m := _UNSUBSCRIBE.match(subject)) is not None:
        return Event(Kind.UNSUBSCRIBE, m.group(1))
    if mail.get_content_type() != "multipart/report":
        return None
    report = str(mail.get_param("report-type", "")).lower()
    reader = _reader(mail)
    if reader is None:
        return None
    if report == "feedback-report":
        return Event(Kind.COMPLAINT, reader)
    if report != "delivery-status":
        return None
    action, status = _delivery_status(mail)
    m = _STATUS.match(status)
    if action == "failed" and m is not None and m.group(1) == "5":
        return Event(Kind.HARD, reader, status)
    if action in ("failed", "delayed"):
        return Event(Kind.SOFT, reader, status)
    return None


def _reader(mail: Message) -> str | None:
    for header in ("Delivered-To", "X-Original-To", "To"):
        for value in mail.get_all(header, []):
            if (m := _VERP.search(str(value))) is not None:
                return m.group(1)
    for part in mail.walk():
        if part.get_content_type() in ("message/rfc822", "text/rfc822-headers"):
            payload = part.get_payload()
            text = str(payload[0]) if isinstance(payload, list) and payload else str(payload)
            for line in text.splitlines():
                m = _MSGID.search(line) if line.lower().startswith("message-id:") else None
                if m is not None:
                    return m.group(1)
    return None


def _delivery_status(mail: Message) -> tuple[str, str]:
    """(Action, Status) of the first recipient of the report's message/delivery-status."""
    for part in mail.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        payload = part.get_payload()
        blocks = payload if isinstance(payload, list) else []
        fields: dict[str, str] = {}
        for block in blocks[1:] or blocks:  # per-message fields first, then per-recipient
            if not isinstance(block, Message):
                continue
            for key in ("Action", "Status"):
                value = block.get(key)
                if value is not None and key not in fields:
                    fields[key] = str(value).strip().split()[0].lower()
        return fields.get("Action", ""), fields.get("Status", "")
    return "", ""


async def read_mailbox(settings: EmailSettings) -> list[Event]:
    """Every event in the bounce mailbox; the mails read are deleted.

    Raises:
        ConfigError: no mailbox is configured (``email.imap_host``) or its password is
            unreadable.
        OSError, TimeoutError, aioimaplib.Abort: the server cannot be reached or refused us.
    """
    import aioimaplib

    from digest_core.port import ConfigError

    if not settings.imap_host or not settings.imap_user:
        raise ConfigError(
            "set email.imap_host and email.imap_user (and DIGEST_BOT_EMAIL__IMAP_PASSWORD): "
            "the bounce mailbox",
            key="email.imap_host",
        )
    cls = aioimaplib.IMAP4_SSL if settings.imap_security == "tls" else aioimaplib.IMAP4
    client = cls(host=settings.imap_host, port=settings.imap_port, timeout=30)
    await client.wait_hello_from_server()
    answer = await client.login(settings.imap_user, settings.resolved_imap_password() or "")
    if answer.result != "OK":
        raise ConfigError(
            f"the bounce mailbox {settings.imap_host} refused the login of {settings.imap_user!r}",
            key="email.imap_user",
        )
    events: list[Event] = []
    try:
        await client.select(settings.imap_mailbox)
        found = await client.uid_search("ALL")
        uids = found.lines[0].split() if found.result == "OK" and found.lines else []
        for uid in uids:
            fetched = await client.uid("fetch", uid.decode(), "(BODY.PEEK[])")
            raw = next((bytes(x) for x in fetched.lines if isinstance(x, bytearray)), None)
            if raw is not None and (event := classify(raw)) is not None:
                events.append(event)
            await client.uid("store", uid.decode(), "+FLAGS", r"(\Seen \Deleted)")
        if uids:
            await client.expunge()
    finally:
        await client.logout()
    log.info("bounce mailbox: %d mails, %d events", len(uids), len(events))
    return events


async def apply(
    events: list[Event],
    book: AddressBook,
    *,
    end: Callable[[str, str], Awaitable[None]],
    soft_limit: int,
) -> dict[str, int]:
    """Act on ``events``: a hard bounce, a complaint or an unsubscribe mail ends the reader's
    subscription (``end(reader, why)``: the core's /unsubscribe, which forgets the address
    too; ``why`` its reason: ``bounce``, ``complaint``, ``mailto``); soft
    bounces are counted and end it at ``soft_limit``. Counts by kind, and ``deactivated``
    (readers whose address was kept until now), added to the book's tallies too."""
    counts = {kind.value: 0 for kind in Kind}
    counts["deactivated"] = 0
    for event in events:
        counts[event.kind.value] += 1
        if event.kind is Kind.SOFT:
            seen = await book.soft_bounce(event.reader)
            if seen < soft_limit:
                log.info("reader %s: soft bounce %d (%s)", event.reader, seen, event.status)
                continue
        kept = await book.address(event.reader) is not None
        await end(event.reader, _WHY[event.kind])
        await book.remove(event.reader)
        if kept:
            counts["deactivated"] += 1
        log.info("reader %s deactivated: %s %s", event.reader, event.kind, event.status)
    await book.tally(counts)
    return counts
