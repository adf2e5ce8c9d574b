"""`digest-bot email export|forget ADDRESS`: a reader's data, and its erasure; `email bounces`:
the bounce mailbox read once; `email notify-correction DATE`: a correction notice to the
readers an earlier revision reached. The ledger side of the email platform, outside its
folder: adapters never reach into the core.

Kept apart from aiosmtplib: only ``bounces`` and ``notify-correction`` build the email
adapter, when they run, and only ``notify-correction`` sends mail. Addresses are printed only
by ``export`` (to its operator, on standard output); logs name reader ids.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from digest_core.settings import Settings

log = logging.getLogger(__name__)


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``email export|forget ADDRESS``, ``email bounces`` and ``email notify-correction DATE``
    under ``email`` (:data:`bots.cli.PLATFORM_COMMANDS`)."""
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
    n = sub.add_parser(
        "notify-correction",
        parents=[common],
        help="mail a short, linked correction notice to the readers who got an earlier "
        "revision of DATE's issue (mail cannot be edited; nothing is resent otherwise)",
    )
    n.add_argument("date", type=_date, metavar="YYYY-MM-DD")
    n.set_defaults(handler=_notify)


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
    """Read the bounce mailbox once and act on it, as the running bot does every
    ``email.bounce_check_seconds`` (:meth:`bots.email.adapter.EmailAdapter.read_bounces`): a
    hard bounce, a complaint or an unsubscribe mail ends the reader's subscription and forgets
    the address; soft bounces are counted and end it at ``email.soft_bounce_limit``. Counts by
    kind, and ``deactivated``."""
    from bots.email.adapter import EmailAdapter
    from bots.runtime import open_service

    async with open_service(settings, only="email", out=io.StringIO()) as service:
        adapter = service.platforms["email"]
        assert isinstance(adapter, EmailAdapter)
        await adapter.start(service, receive=False)
        try:
            return await adapter.read_bounces()
        finally:
            await adapter.stop()


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def _notify(args: argparse.Namespace, settings: Settings) -> int:
    sent, readers = asyncio.run(notify_correction(settings, args.date))
    print(f"correction notice: sent {sent} of {readers} readers")
    return 0 if sent == readers else 1


class _Notices:
    """The email platform seen by the ledger as ``email~correction``: its own rows (so a
    rerun sends each reader one notice), the platform's sends and pacing."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name + "~correction"
        self.paced_as = inner.name
        self.limits = inner.limits
        self.post_options = inner.post_options

    @property
    def flavor(self) -> Any:
        return self.inner.flavor

    async def send(self, target: Any, message: Any, *, key: Any = None) -> str:
        import dataclasses

        from digest_core.platform import Target

        to = Target(self.inner.name, target.id, target.kind)
        moved = None if key is None else dataclasses.replace(key, target=to)
        return str(await self.inner.send(to, message, key=moved))


async def notify_correction(settings: Settings, day: dt.date) -> tuple[int, int]:
    """Mail the correction notice of ``day``'s current revision to every reader still
    subscribed who was sent an earlier revision; (readers who have it now, readers). Through
    the ledger: a rerun (or a crash and a rerun) sends each reader the notice once.

    Raises:
        IssueNotFound: no issue for ``day``.
    """
    from bots.email.settings import EmailSettings
    from bots.runtime import open_service
    from digest_core.delivery import PartState
    from digest_core.models import IssueRef
    from digest_core.platform import Target, TargetKind
    from digest_core.rendering import Message
    from digest_core.rendering.email import TEXT_FOOTER, subject
    from digest_core.site.links import issue_url

    section = settings.platforms["email"]
    assert isinstance(section, EmailSettings)
    async with open_service(settings, only="email", out=io.StringIO()) as service:
        issue = service.archive.on(day)
        adapter = service.platforms["email"]
        sent = await service.ledger.records(platform="email", states=[PartState.SENT])
        earlier = {r.target for r in sent if r.issue_date == day and r.revision != issue.revision}
        current = {t.id for t in await service.ledger.subscribers("email")}
        readers = sorted(earlier & current)
        if not readers:
            return 0, 0
        base = settings.site.base_url or section.public_url
        link = issue_url(base, day) if base else ""
        text = (
            f"{day.month}月{day.day}日的日报已更正，请以网页版为准：{link}\n\n"
            f"The issue of {day.isoformat()} was corrected; the web page has it: {link}\n\n"
            + TEXT_FOOTER
        )
        notice = [Message({"subject": f"更正 / Correction: {subject(issue)}", "text": text})]
        await adapter.start(service)
        try:
            report = await service.engine.deliver(
                IssueRef(date=day, revision=f"correction-{issue.revision}"),
                _Notices(adapter),
                notice,
                [Target("email~correction", rid, TargetKind.PRIVATE) for rid in readers],
            )
        finally:
            await adapter.stop()
    log.info("correction notice of %s: %d of %d readers", day, report.sent, len(readers))
    return sum(1 for t in report.targets if t.complete), len(readers)


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
