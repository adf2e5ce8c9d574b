"""The narrow port: what an adapter may ask of the core (Port) and is to the core (Adapter).

Adapters get a :class:`Port` in :meth:`Adapter.start`, never the service: commands and section
buttons, the confirmation flow, the archive's dates, the deactivated targets, and replies paced
with the deliveries. The service's archive, ledger and engine stay the core's
(tests/bots/test_port.py checks that no adapter reaches for them).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.commands import Commands, Reply, Request
from digest_core.confirmation import Confirmations
from digest_core.delivery import DeliveryEngine, InactiveTarget, Ledger
from digest_core.embargo import Embargo
from digest_core.greeting import greeting
from digest_core.inline import Article, articles
from digest_core.models import Section
from digest_core.personal import Visibility
from digest_core.platform import Platform, Target
from digest_core.rendering import Message
from digest_core.replies import SendOnce, send_replies
from digest_core.scheduling import DailyPoster
from digest_core.uploads import IssueUploads


class Port(Protocol):
    """What an adapter may ask of the core. Every method is safe to call from the event loop
    (file and database work happens off it or asynchronously)."""

    @property
    def clock(self) -> Clock:
        """The core's clock (the flood limit and pacing run on it)."""
        ...

    @property
    def command_names(self) -> Sequence[str]:
        """The names of the core's commands (an adapter ignores others' commands in groups)."""
        ...

    @property
    def confirmations(self) -> Confirmations:
        """The confirmation flow of admin actions (prompts, presses)."""
        ...

    async def handle(self, request: Request) -> Reply:
        """Run one command (never raises for bad input)."""
        ...

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        """What a section button of the post of ``date`` answers."""
        ...

    async def archive_dates(self, *, admin: bool = False) -> list[dt.date]:
        """The dates the archive serves an issue for that the user may see (readers: only
        published ones, see :mod:`digest_core.embargo`), oldest first (autocompletion)."""
        ...

    async def receive_issue_file(
        self,
        request: Request,
        *,
        name: str,
        size: int | None,
        download: Callable[[], Awaitable[bytes]],
    ) -> Reply:
        """An issue file sent to the bot privately (``request`` names the sender, their
        capabilities and the words sent with it): checked, stored as ``digest-bot archive add``
        does, and answered (privately) with the errors or the preview. ``download`` is awaited
        only when the file is taken (an admin's, at most 1 MiB) and raises
        :class:`~digest_core.errors.TransientError` when the platform cannot give the file
        (:class:`digest_core.uploads.IssueUploads`)."""
        ...

    async def greeting(self) -> str:
        """A terminal's start-up block: the current issue, the next post (in the digest's
        zone and the host's), what to type (:func:`digest_core.greeting.greeting`)."""
        ...

    async def inactive_targets(self, platform: str) -> list[InactiveTarget]:
        """The targets of ``platform`` deactivated as gone, latest first (autocompletion)."""
        ...

    async def inline(self, query: str) -> list[Article]:
        """Inline search: items of published issues matching ``query`` (the newest headline
        for a blank one), never an embargoed issue's."""
        ...

    async def reply(
        self,
        platform: Platform,
        target: Target,
        messages: Sequence[Message],
        *,
        send: SendOnce | None = None,
        paced: list[float] | None = None,
    ) -> list[str]:
        """Send ``messages`` to ``target`` as a reply (not a ledgered delivery), paced under
        the same budget as ``platform``'s deliveries, short 429s waited out
        (:func:`digest_core.replies.send_replies`); their message ids. ``send`` is one send of
        one message (default ``platform.send`` without a part key).

        Raises:
            DeliveryError: a message could not be sent (the rest are not attempted).
        """
        ...

    def account(self, platform: Platform, target: Target) -> None:
        """Count a message sent at once, without waiting for the budget (a notice during a
        shutdown), against ``platform``'s pacing."""
        ...


@runtime_checkable
class Adapter(Platform, Protocol):
    """A Platform that also talks with people: receives commands, knows its channels.

    The runtime calls :meth:`start` once the service is ready and :meth:`stop` on shutdown;
    both MUST return promptly (long-running receive loops run as tasks the adapter owns).
    """

    async def start(self, port: Port, *, receive: bool = True) -> None:
        """Connect; with ``receive``, also begin answering commands through ``port`` (without
        it, only :meth:`send` is used: ``digest-bot post``)."""
        ...

    async def stop(self) -> None:
        """Stop receiving, finish what is being answered, disconnect."""
        ...

    def channel_targets(self) -> list[Target]:
        """Where the daily issue is posted (from config)."""
        ...

    async def alert_admins(self, text: str) -> None:
        """Tell this platform's admins something went wrong (best effort, never raises)."""
        ...


class ServicePort:
    """The :class:`Port` over the service's parts; :class:`~digest_core.service.DigestService`
    inherits it (its constructor sets these attributes)."""

    archive: Archive
    embargo: Embargo
    ledger: Ledger
    engine: DeliveryEngine
    clock: Clock
    commands: Commands
    confirmations: Confirmations
    poster: DailyPoster
    zone: dt.tzinfo
    visibility: Visibility

    @property
    def command_names(self) -> Sequence[str]:
        return self.commands.names

    async def handle(self, request: Request) -> Reply:
        return await self.commands.handle(request)

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        return await self.commands.section(request, date, section)

    async def archive_dates(self, *, admin: bool = False) -> list[dt.date]:
        view = self.embargo.view(self.archive, admin=admin)
        return await asyncio.to_thread(view.dates)  # file I/O

    async def receive_issue_file(
        self,
        request: Request,
        *,
        name: str,
        size: int | None,
        download: Callable[[], Awaitable[bytes]],
    ) -> Reply:
        uploads = IssueUploads(
            self.archive.root,
            # published = visible to readers: the one embargo rule (early publishes too)
            post_at=self.embargo.publish_time,
            now=self.clock.now,
            backend=self.commands.backend,
            post_options=self.commands.post_options,
        )
        return await uploads.take(request, name=name, size=size, download=download)

    async def greeting(self) -> str:
        return await asyncio.to_thread(greeting, self.archive, self.poster, zone=self.zone)

    async def inactive_targets(self, platform: str) -> list[InactiveTarget]:
        return await self.ledger.inactive_targets(platform)

    async def inline(self, query: str) -> list[Article]:
        return await asyncio.to_thread(articles, self.archive, self.visibility, query)  # file I/O

    async def reply(
        self,
        platform: Platform,
        target: Target,
        messages: Sequence[Message],
        *,
        send: SendOnce | None = None,
        paced: list[float] | None = None,
    ) -> list[str]:
        async def once(to: Target, message: Message) -> str:
            return await platform.send(to, message)

        return await send_replies(
            send or once,
            target,
            messages,
            pacer=self.engine.pacer(platform),
            clock=self.clock,
            paced=paced,
        )

    def account(self, platform: Platform, target: Target) -> None:
        self.engine.pacer(platform).take(target, self.clock.monotonic())
