"""The service's side of the port: the :class:`~digest_core.port.Port` over the service's parts."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.commands import Reply, Request
from digest_core.commands.confirmation import Confirmations
from digest_core.commands.dispatch import Commands
from digest_core.commands.inline import Article, articles
from digest_core.commands.replies import SendOnce, send_replies
from digest_core.delivery import DeliveryEngine, InactiveTarget, Ledger
from digest_core.models import Section
from digest_core.platform import Platform, Target
from digest_core.publishing.embargo import Embargo
from digest_core.publishing.schedule import DailyPoster
from digest_core.publishing.uploads import IssueUploads
from digest_core.rendering import Message
from digest_core.service.engagement import Engagement
from digest_core.service.greeting import greeting
from digest_core.subscriptions import preferences
from digest_core.subscriptions.delivery import Visibility
from digest_core.subscriptions.preferences import ReaderPreferences


@dataclass
class Reception:
    """The :class:`~digest_core.port.Port` over the service's parts: what adapters ask,
    answered (:class:`~digest_core.service.root.DigestService` builds it and offers its
    methods as its own)."""

    commands: Commands
    archive: Archive
    embargo: Embargo
    ledger: Ledger
    engine: DeliveryEngine
    clock: Clock
    confirmations: Confirmations
    poster: DailyPoster
    zone: dt.tzinfo
    visibility: Visibility
    engagement: Engagement

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
            commands=self.commands,
        )
        return await uploads.take(request, name=name, size=size, download=download)

    async def greeting(self) -> str:
        return await asyncio.to_thread(greeting, self.archive, self.poster, zone=self.zone)

    async def inactive_targets(self, request: Request) -> list[InactiveTarget]:
        platform = request.platform
        return await self.commands.completions(
            request, lambda: self.ledger.inactive_targets(platform)
        )

    async def inline(self, query: str, *, platform: str = "", asker: str = "") -> list[Article]:
        found = await asyncio.to_thread(articles, self.archive, self.visibility, query)  # file I/O
        if platform:
            self.engagement.searches.heard(platform, asker, query, found)
        return found

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
        self.engine.pacer(platform).account(target, self.clock.monotonic())

    def counted(self, platform: Platform, requests: int) -> None:
        self.engine.pacer(platform).counted(self.clock.monotonic(), requests)

    async def preferences(self, platform: str, reader: str) -> ReaderPreferences:
        return await preferences.read(self.ledger, platform, reader)

    async def set_preferences(
        self,
        platform: str,
        reader: str,
        *,
        at: str,
        zone: str,
        format: str,
        follows: Sequence[str],
    ) -> ReaderPreferences:
        chosen = preferences.checked(at=at, zone=zone, format=format, follows=follows)
        return await preferences.store(self.ledger, platform, reader, chosen)
