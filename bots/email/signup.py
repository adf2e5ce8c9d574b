"""Double opt-in, one flow for the web form and the chats' ``/email ADDRESS``.

An address is checked with ``email-validator`` (its syntax, plain ASCII so that no relay needs
SMTPUTF8; nothing is looked up), then, unless requests for it or from the requester came too
often (:class:`Limiter`, one for both ways in), it is mailed a signed, expiring confirmation
link and counted pending (by reader id: the address is kept only once confirmed). The requester
is told the same whatever happened, and the log names the reader's id only.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bots.email.adapter import EmailAdapter

log = logging.getLogger(__name__)

#: seconds between two confirmation mails to one address, and per requester
ADDRESS_INTERVAL = 300.0
CLIENT_BURST = 5
CLIENT_WINDOW = 600.0
#: the formats a reader may choose (the core's /subscribe formats)
FORMATS = ("full", "compact", "headline")


class Limiter:
    """At most one confirmation mail per address per ADDRESS_INTERVAL and CLIENT_BURST
    requests per requester per CLIENT_WINDOW (in memory: a restart forgets)."""

    def __init__(self) -> None:
        self._addresses: dict[str, float] = {}
        self._clients: dict[str, list[float]] = {}

    def allow(self, rid: str, client: str, now: float) -> bool:
        hits = [t for t in self._clients.get(client, []) if now - t < CLIENT_WINDOW]
        if len(hits) >= CLIENT_BURST:
            self._clients[client] = hits
            return False
        self._clients[client] = [*hits, now]
        last = self._addresses.get(rid)
        if last is not None and now - last < ADDRESS_INTERVAL:
            return False
        self._addresses[rid] = now
        return True


def checked(text: str) -> str | None:
    """``text`` as the address mail goes to (email-validator's normalised form), or None."""
    from email_validator import EmailNotValidError, validate_email

    if len(text) > 320:
        return None
    try:
        address = validate_email(text, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError:
        return None
    return str(address.normalized)


async def request(adapter: EmailAdapter, address: str, *, fmt: str, requester: str) -> None:
    """Mail ``address`` (:func:`checked` already) its confirmation link, unless limited."""
    rid = adapter.book.id_of(address)
    if not adapter.limiter.allow(rid, requester, adapter.clock.monotonic()):
        log.info("confirmation for reader %s not sent: rate-limited", rid)
        return
    fmt = fmt if fmt in FORMATS else ""
    hours = adapter.settings.confirm_hours
    text = (
        f"请点击下面的链接确认订阅（{hours:g} 小时内有效）：\n"
        f"{adapter.confirm_url(address, fmt)}\n\n"
        "Confirm your subscription with the link above. "
        "If you did not ask for it, ignore this mail."
    )
    message = adapter.notice("确认订阅 / Confirm your subscription\n\n" + text)[0]
    try:
        await adapter.send_to(address, rid, message)
    except Exception as exc:  # the requester's answer is the same whatever happens
        log.warning("confirmation mail to reader %s failed: %s", rid, exc)
        return
    now = adapter.clock.now()
    await adapter.book.requested(rid, at=now, expired=now - dt.timedelta(hours=hours))
    log.info("confirmation mailed to reader %s", rid)
