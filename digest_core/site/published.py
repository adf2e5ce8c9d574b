"""When an issue may be shown on the web: never before its own post time (the embargo)."""

from __future__ import annotations

import datetime as dt
import logging

log = logging.getLogger(__name__)


def published_at(date: dt.date, *, zone: dt.tzinfo, post_time: dt.time) -> dt.datetime:
    """The moment the issue of ``date`` goes public: ``post_time`` on that day in ``zone``."""
    return dt.datetime.combine(date, post_time, tzinfo=zone)


def is_published(date: dt.date, *, now: dt.datetime, zone: dt.tzinfo, post_time: dt.time) -> bool:
    """True once the issue of ``date`` may be shown: from ``post_time`` on ``date`` in the
    digest's ``zone`` (``now`` is aware). A future issue is never shown, whatever its file."""
    return now >= published_at(date, zone=zone, post_time=post_time)
