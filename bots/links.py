"""Tracked links (``[analytics] track_links = true``): ``/r/<signed token>`` counts and redirects.

A token names an issue's date, a story (``headline``, ``brief-3``, ``classic``), the number of
the link in it (from 1) and the platform of the post, signed with ``[analytics] secret_key``
(itsdangerous); never a reader, so a click counts a story, not who read it. The redirect looks
the link up in the archive's issue of that day: the token carries no URL, so a token, even a
forged one, can only lead to a link an issue holds; anything else is 404, never an open
redirect. Clicks are counted per issue × story × link × platform × day (:class:`~digest_core.
service.engagement.Engagement`, flushed to the ledger's ``link_clicks``), once the issue is public.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from itsdangerous import BadSignature, URLSafeSerializer

from digest_core.errors import IssueNotFound
from digest_core.service.dashboard import stories_of

if TYPE_CHECKING:
    from aiohttp import web

    from bots.http import Probe, RouteInstaller
    from digest_core.service.root import DigestService
    from digest_core.settings import Settings

log = logging.getLogger(__name__)

_SALT = "digest-bot link"
#: where the redirects are, under the endpoint's public address
PREFIX = "r/"
_STORY = re.compile(r"headline|classic|brief-[1-9][0-9]{0,2}")
_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


class LinkTokens:
    """Signs and reads the tokens of tracked links."""

    def __init__(self, key: str) -> None:
        self._serializer = URLSafeSerializer(key, salt=_SALT)

    def token(self, date: dt.date, story: str, number: int, platform: str) -> str:
        return str(self._serializer.dumps([date.strftime("%Y%m%d"), story, number, platform]))

    def read(self, token: str) -> tuple[dt.date, str, int, str] | None:
        """(date, story, link number, platform) of a genuine token; None otherwise."""
        if len(token) > 300:
            return None
        try:
            value = self._serializer.loads(token)
        except BadSignature:
            return None
        if not (isinstance(value, list) and len(value) == 4):
            return None
        day, story, number, platform = value
        if not (isinstance(day, str) and isinstance(story, str) and isinstance(platform, str)):
            return None
        if not isinstance(number, int) or not _STORY.fullmatch(story) or not 0 < number < 100:
            return None
        try:
            date = dt.datetime.strptime(day, "%Y%m%d").date()  # noqa: DTZ007 (a date)
        except ValueError:
            return None
        return date, story, number, platform[:32]


@dataclass(frozen=True, eq=False)
class LinkTracker:
    """The :class:`~digest_core.rendering.LinkMap` of one platform's posts: every source link
    becomes ``<base>r/<token>``."""

    tokens: LinkTokens
    base: str
    platform: str

    def __call__(self, date: dt.date, story: str, number: int, url: str) -> str:
        return f"{self.base}{PREFIX}{self.tokens.token(date, story, number, self.platform)}"


def endpoint_routes(settings: Settings) -> list[RouteInstaller]:
    """The redirect of ``[analytics] track_links`` (empty when off)."""
    key = settings.analytics.resolved_secret_key()
    if not settings.analytics.track_links or key is None:
        return []
    tokens = LinkTokens(key)

    def install(app: web.Application, probe: Probe) -> None:
        from aiohttp import web

        service = probe.service

        async def follow(request: web.Request) -> web.Response:
            found = tokens.read(request.match_info["token"])
            url = None if found is None else await asyncio.to_thread(_link, service, found)
            if found is None or url is None:
                return web.Response(status=404, text="没有这个链接 / no such link\n",
                                    headers=_HEADERS)  # fmt: skip
            date, story, number, platform = found
            if service.embargo.visible(date):  # an admin's preview before the post: uncounted
                service.engagement.click(date, story, number, platform)
            raise web.HTTPFound(location=url, headers=_HEADERS)

        app.router.add_get("/" + PREFIX + "{token}", follow)

    return [install]


def _link(service: DigestService, found: tuple[dt.date, str, int, str]) -> str | None:
    """The URL a token names: link ``number`` of ``story`` in the archive's issue of that day
    (blocking: a worker thread)."""
    date, story, number, _ = found
    try:
        issue = service.archive.on(date)
    except IssueNotFound:
        return None
    for name, item in stories_of(issue):
        if name == story:
            return item.links[number - 1] if number <= len(item.links) else None
    return None
