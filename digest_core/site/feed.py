"""The Atom feed (``feed.xml``): the newest issues in full, built with feedgen."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Sequence

from feedgen.feed import FeedGenerator

from digest_core.models import Issue
from digest_core.site.links import issue_path

log = logging.getLogger(__name__)

#: How many issues the feed holds, newest first.
FEED_ISSUES = 30
#: Entry ids are ``urn:uuid:`` names derived from this namespace, the masthead and the date:
#: the same issue keeps its id across rebuilds, corrections and a move of the site.
_ID_NAMESPACE = uuid.UUID("6f1d2c55-5a8e-4f5e-9a53-3c1f0d7b2a41")


def entry_id(issue: Issue) -> str:
    """The stable Atom id of ``issue``'s entry."""
    return "urn:uuid:" + str(uuid.uuid5(_ID_NAMESPACE, f"{issue.masthead}\n{issue.date}"))


def build_feed(
    issues: Sequence[Issue],
    *,
    title: str,
    base_url: str | None,
    published: Callable[[dt.date], dt.datetime],
    content: Callable[[Issue], str],
) -> bytes:
    """The Atom feed of the newest :data:`FEED_ISSUES` of ``issues`` (all already public).

    Each entry has a stable id (:func:`entry_id`), ``published`` and ``updated`` equal to the
    issue's publishing time (``published(date)``: the feed is the same bytes for the same
    archive), the issue's page as its link (absolute under ``base_url``, else relative to the
    feed) and ``content(issue)`` as HTML content. The feed's ``updated`` is its newest entry's
    (the Unix epoch for an empty feed).
    """
    newest = sorted(issues, key=lambda i: i.date, reverse=True)[:FEED_ISSUES]
    root = base_url or ""
    fg = FeedGenerator()
    fg.id(entry_id_feed(title, base_url))
    fg.title(title)
    fg.subtitle(f"{title}：每日 AI 技术要闻 / a daily AI technology digest")
    fg.language("zh-CN")
    fg.link(href=root or "./", rel="alternate", type="text/html")
    fg.link(href=f"{root}feed.xml", rel="self", type="application/atom+xml")
    fg.generator("digest-bot")
    updated = [published(i.date) for i in newest]
    fg.updated(max(updated) if updated else dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
    for issue, when in zip(reversed(newest), reversed(updated), strict=True):
        entry = fg.add_entry()  # feedgen puts the entry added last first
        entry.id(entry_id(issue))
        entry.title(f"{issue.masthead} · {issue.date.isoformat()} · {issue.headline.title}")
        entry.link(href=root + issue_path(issue.date), rel="alternate", type="text/html")
        entry.published(when)
        entry.updated(when)
        entry.author(name=issue.masthead)
        if issue.lede:
            entry.summary(issue.lede)
        entry.content(content(issue), type="html")
    out: bytes = fg.atom_str(pretty=True)
    return out


def entry_id_feed(title: str, base_url: str | None) -> str:
    """The feed's own id: stable for one site (its base URL, else its title)."""
    return "urn:uuid:" + str(uuid.uuid5(_ID_NAMESPACE, f"feed\n{base_url or title}"))
