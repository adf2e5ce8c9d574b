"""`digest-bot email export|forget ADDRESS`: a reader's data, and its erasure (the ledger side
of the email platform, outside its folder: adapters never reach into the core).

Kept apart from aiosmtplib: these commands send nothing. Addresses are printed only by
``export`` (to its operator, on standard output); logs name reader ids.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from digest_core.settings import Settings

log = logging.getLogger(__name__)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``email export ADDRESS`` and ``email forget ADDRESS``."""
    p = subparsers.add_parser("email", parents=[common], help="email readers: export, forget")
    sub = p.add_subparsers(title="email commands", metavar="ACTION", required=True)
    e = sub.add_parser(
        "export", parents=[common], help="print what is kept about one reader (JSON)"
    )
    e.add_argument("address")
    e.set_defaults(handler=_export)
    f = sub.add_parser(
        "forget",
        parents=[common],
        help="unsubscribe one reader and erase the address (the ledger keeps only counts)",
    )
    f.add_argument("address")
    f.set_defaults(handler=_forget)
    b = sub.add_parser(
        "bounces",
        parents=[common],
        help="read the bounce mailbox (IMAP): deactivate hard bounces, complaints and "
        "unsubscribe mails, count soft bounces",
    )
    b.set_defaults(handler=_bounces)


def _export(args: argparse.Namespace, settings: Settings) -> int:
    print(json.dumps(asyncio.run(export(settings, args.address)), ensure_ascii=False, indent=2))
    return 0


def _forget(args: argparse.Namespace, settings: Settings) -> int:
    found = asyncio.run(forget(settings, args.address))
    print("forgotten" if found else "no such reader (nothing was kept)")
    return 0


def _bounces(args: argparse.Namespace, settings: Settings) -> int:
    counts = asyncio.run(bounces(settings))
    print(", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


async def bounces(settings: Settings) -> dict[str, int]:
    """Read the bounce mailbox once and act on it: a hard bounce, a complaint or an
    unsubscribe mail ends the reader's subscription and forgets the address; soft bounces are
    counted and end it at ``email.soft_bounce_limit``. Counts by kind, and ``deactivated``."""
    from bots.email.bounces import Kind, read_mailbox
    from bots.email.settings import EmailSettings
    from bots.runtime import open_service

    section = settings.platforms["email"]
    assert isinstance(section, EmailSettings)
    events = await read_mailbox(section)
    book, _ = _book(settings)
    counts = {kind.value: 0 for kind in Kind}
    counts["deactivated"] = 0
    async with open_service(settings, only="email", out=io.StringIO()) as service:
        for event in events:
            counts[event.kind.value] += 1
            if event.kind is Kind.SOFT:
                seen = await book.soft_bounce(event.reader)
                if seen < section.soft_bounce_limit:
                    log.info("reader %s: soft bounce %d (%s)", event.reader, seen, event.status)
                    continue
            if await service.subscribe("email", event.reader, on=False):
                counts["deactivated"] += 1
            await book.remove(event.reader)
            log.info("reader %s deactivated: %s %s", event.reader, event.kind, event.status)
    book.close()
    return counts


def _book(settings: Settings) -> tuple[Any, str]:
    from bots.email.addresses import AddressBook
    from bots.email.settings import EmailSettings

    section = settings.platforms["email"]
    assert isinstance(section, EmailSettings)
    key = section.resolved_secret_key()
    book = AddressBook(section.address_book, key)
    return book, key


async def export(settings: Settings, address: str) -> dict[str, Any]:
    """Everything kept about ``address``: the address book's row, the subscription, and the
    ledger's parts sent to the reader (dates, states, Message-IDs)."""
    from bots.runtime import open_service

    book, _ = _book(settings)
    rid = book.id_of(address)
    stored = await book.address(rid)
    book.close()
    async with open_service(settings, only="email", out=io.StringIO()) as service:
        records = await service.ledger.records(platform="email", target=rid)
        subscribed = rid in {t.id for t in await service.ledger.subscribers("email")}
    return {
        "reader": rid,
        "address": stored,
        "subscribed": subscribed,
        "mails": [
            {
                "issue": r.issue_date.isoformat(),
                "state": str(r.state),
                "message_id": r.message_id,
                "at": r.updated_at.isoformat(),
            }
            for r in records
        ],
    }


async def forget(settings: Settings, address: str) -> bool:
    """Unsubscribe ``address`` and delete it from the address book. The ledger's rows name
    only the reader id, an HMAC no one can turn back into the address; they stay as counts.
    True when there was anything to forget."""
    from bots.runtime import open_service

    book, _ = _book(settings)
    rid = book.id_of(address)
    removed = await book.remove(rid)
    book.close()
    async with open_service(settings, only="email", out=io.StringIO()) as service:
        ended = await service.subscribe("email", rid, on=False)
    log.info("reader %s forgotten", rid)
    return bool(removed or ended)
