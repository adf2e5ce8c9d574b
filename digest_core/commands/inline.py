"""Inline search (``@bot 关键词`` in any chat): shareable articles of published issues' items.

Platform-neutral results (:class:`Article`); the adapter turns them into its API's form. Only
issues readers may see count (:class:`~digest_core.subscriptions.delivery.Visibility`, the
embargo's one
rule); an empty query gives the newest visible issue's headline (:meth:`Visibility.newest`,
the same answer to "what is new" as follows and timed subscribers get).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
from dataclasses import dataclass

from digest_core.archive import Archive
from digest_core.archive.scan import SearchHit
from digest_core.errors import IssueNotFound
from digest_core.metrics import ReadersSink
from digest_core.models import Issue, Item, Section
from digest_core.site.links import anchor
from digest_core.subscriptions.delivery import Visibility

log = logging.getLogger(__name__)

#: results one query returns (Telegram allows 50)
MAX_RESULTS = 20
#: hits asked of the archive per query, before embargoed ones are dropped
_SEARCH_LIMIT = 200
#: the longest description shown under a result's title
MAX_DESCRIPTION = 160
#: how long a reader's inline query waits for the next one before its hits count (seconds)
SETTLE_SECONDS = 3.0
#: the readers' queries waiting so at most (beyond, the oldest counts at once)
MAX_WAITING = 10_000

_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=\.)\s")


@dataclass(frozen=True, slots=True)
class Article:
    """One result: an item of an issue, shareable as a message.

    ``id`` is unique among one answer's results and at most 64 bytes (``2026-11-27:b3``).
    """

    id: str
    title: str
    #: the item's first sentence
    description: str
    url: str | None
    date: dt.date
    #: where in the issue (``重点``, ``简讯 3``, ``经典回顾``)
    where: str
    #: the story's anchor (``headline``, ``brief-3``, ``classic``): what the dashboard counts
    story: str = ""


def first_sentence(item: Item) -> str:
    """The first sentence of ``item``'s first paragraph (cut at :data:`MAX_DESCRIPTION`)."""
    text = item.paragraphs[0].strip()
    head = _SENTENCE_END.split(text, maxsplit=1)[0].strip() or text
    return head if len(head) <= MAX_DESCRIPTION else head[: MAX_DESCRIPTION - 1] + "…"


def _article(issue: Issue, section: Section, index: int, item: Item) -> Article:
    code = {Section.HEADLINE: "h", Section.BRIEFS: "b", Section.CLASSIC: "c"}[section]
    where = f"{section.label} {index}" if section is Section.BRIEFS else section.label
    return Article(
        id=f"{issue.date.isoformat()}:{code}{index}",
        title=item.title,
        description=first_sentence(item),
        url=item.url,
        date=issue.date,
        where=where,
        story=anchor(section, index if section is Section.BRIEFS else None),
    )


def _of_hit(issue: Issue, hit: SearchHit) -> Article | None:
    if hit.section is Section.HEADLINE:
        return _article(issue, Section.HEADLINE, 1, issue.headline)
    if hit.section is Section.BRIEFS:
        return _article(issue, Section.BRIEFS, hit.index, issue.brief(hit.index))
    if hit.section is Section.CLASSIC and issue.classic is not None:
        return _article(issue, Section.CLASSIC, 1, issue.classic)
    return None  # the lede: the headline stands for it


def articles(
    archive: Archive, visibility: Visibility, query: str, *, limit: int = MAX_RESULTS
) -> list[Article]:
    """The items of visible issues matching ``query`` (newest first; runs file I/O: call it
    from a worker thread); for a blank query, the newest visible issue's headline."""
    word = query.strip()[:64]
    if not word:
        issue = visibility.newest(archive)
        return [] if issue is None else [_article(issue, Section.HEADLINE, 1, issue.headline)]
    found: list[Article] = []
    seen: set[str] = set()
    issues: dict[dt.date, Issue] = {}
    for hit in archive.search(word, limit=_SEARCH_LIMIT):
        if not visibility.visible(hit.date):
            continue  # embargoed: not out yet
        if hit.date not in issues:
            try:
                issues[hit.date] = archive.on(hit.date)
            except IssueNotFound:
                continue
        article = _of_hit(issues[hit.date], hit)
        if article is None or article.id in seen:
            continue
        seen.add(article.id)
        found.append(article)
        if len(found) >= limit:
            break
    return found


class InlineSearches:
    """The hits of inline queries, counted as searches (``readers.found``, as ``/search``'s).

    A client sends an inline query as the reader types (``推``, ``推理``, ``推理服务``): only
    the last of a reader's burst counts, once :data:`SETTLE_SECONDS` pass without another.
    The asker's key (platform and user) is held only that long, in memory, to tell one burst
    from another; the counts name no one. A blank query (the newest headline) is no search.
    """

    def __init__(self, readers: ReadersSink, *, settle: float = SETTLE_SECONDS) -> None:
        self.readers = readers
        self.settle = settle
        self._waiting: dict[tuple[str, str], tuple[asyncio.TimerHandle, list[Article]]] = {}

    def heard(self, platform: str, asker: str, query: str, found: list[Article]) -> None:
        """``asker`` on ``platform`` typed ``query`` and was shown ``found``."""
        key = (platform, asker)
        earlier = self._waiting.pop(key, None)
        if earlier is not None:
            earlier[0].cancel()  # typed on: the earlier query was a step of this one
        if not query.strip() or not found:
            return
        if len(self._waiting) >= MAX_WAITING:
            self._count(next(iter(self._waiting)))
        handle = asyncio.get_running_loop().call_later(self.settle, self._count, key)
        self._waiting[key] = (handle, found)

    def settle_all(self) -> None:
        """Count every waiting query now (at shutdown)."""
        for key in list(self._waiting):
            self._count(key)

    def _count(self, key: tuple[str, str]) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is None:
            return
        handle, found = waiting
        handle.cancel()
        self.readers.found(key[0], [(a.date, a.story) for a in found if a.story])
