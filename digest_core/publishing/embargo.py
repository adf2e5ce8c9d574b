"""The embargo: the one rule deciding from when readers may see an issue.

An issue is visible to readers from its *publish time*: the day's ``post_time`` in the digest's
zone, or the moment an admin published it early (a ``/repost`` or ``digest-bot post`` of a day
before its time), whichever comes first. Admins see everything.

Every reader surface asks this rule, never the archive directly: the commands go through
:meth:`Embargo.view`, an archive-like :class:`VisibleArchive` that holds back what readers may
not see yet; anything added later (web pages, feeds, inline mode) MUST read through a view too::

    view = service.embargo.view(service.archive)           # what readers may see now
    view.on(day)        # IssueNotFound ("not out yet") for an embargoed day
    view.latest()       # the newest visible issue
    view.dates()        # visible dates, oldest first
    view.search(word)   # hits in visible issues only

Early publishes are facts recorded in the ledger's audit log (action
:data:`EARLY_ACTION`); the service loads them on start and adds each new one.

A day the editors hold back (``[schedule] require_approval``, not approved at its post time:
:meth:`Embargo.hold`) is not public at its post time; the post that a late approval (or an
admin's post) makes is its publish time (:meth:`Embargo.release`).
"""

from __future__ import annotations

import builtins
import datetime as dt
import logging
from collections.abc import Iterable, Mapping

from digest_core.archive import Archive, ArchiveEntry, SearchHit, nearest_text
from digest_core.clock import Clock, zoned_text
from digest_core.errors import IssueNotFound
from digest_core.models import Issue

log = logging.getLogger(__name__)

#: the audit action recording that an admin published a day before its time (args: ``date``)
EARLY_ACTION = "publish_early"
#: the publish time of a day held back and not released: later than any real moment (and
#: still a datetime every zone can show)
NEVER = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)


class Embargo:
    """Publish times of issues, from the schedule, the injected clock and early publishes.

    ``early`` maps a day to the moment an admin published it before its time. Methods are cheap
    and thread-safe enough for reads from worker threads (the loop changes the maps one key at
    a time; readers that iterate one take a copy).
    """

    def __init__(
        self,
        *,
        zone: dt.tzinfo,
        post_time: dt.time,
        clock: Clock,
        early: Mapping[dt.date, dt.datetime] | None = None,
    ) -> None:
        self.zone = zone
        self.post_time = post_time
        self.clock = clock
        self._early: dict[dt.date, dt.datetime] = dict(early or {})
        #: days held back by the editors (not public at their post time), and when each held
        #: day was released (posted) after all
        self._held: set[dt.date] = set()
        self._released: dict[dt.date, dt.datetime] = {}

    def scheduled(self, day: dt.date) -> dt.datetime:
        """The aware moment of ``day``'s post time in the digest's zone (a nonexistent local
        time on a DST spring-forward day moves forward, as the scheduler's cron does)."""
        local = dt.datetime.combine(day, self.post_time).replace(tzinfo=self.zone)
        return local.astimezone(dt.UTC).astimezone(self.zone)

    def publish_time(self, day: dt.date) -> dt.datetime:
        """When readers may first see the issue of ``day``: its post time, or the moment an
        admin published it early if that came first; for a day held back, the moment it was
        released (:data:`NEVER` until then)."""
        scheduled = self.scheduled(day)
        early = self._early.get(day)
        if early is not None and early < scheduled:
            return early
        released = self._released.get(day)
        if released is not None:
            return max(released, scheduled)
        return NEVER if day in self._held else scheduled

    def hold(self, day: dt.date) -> bool:
        """Keep ``day`` from readers past its post time until :meth:`release` (an issue the
        editors have not approved, not posted yet: the caller knows). True when this changed
        anything: a day published early or released stays public."""
        if day in self._held or day in self._released or day in self._early:
            return False
        self._held.add(day)
        log.info("the issue of %s is held back from readers until it is approved", day)
        return True

    def unhold(self, day: dt.date) -> None:
        """``day`` is public at its post time again (approved before it)."""
        self._held.discard(day)

    def held(self, day: dt.date) -> bool:
        """True when ``day`` is held back from readers now (see :meth:`hold`)."""
        return day in self._held and day not in self._released and day not in self._early

    @property
    def released(self) -> Mapping[dt.date, dt.datetime]:
        """The days held back and then released, and when (their publish time unless their
        post time came later): a copy, safe to iterate in a worker thread."""
        return dict(self._released)

    def release(self, day: dt.date, at: dt.datetime) -> bool:
        """``day``, held back, was posted at ``at`` (a late approval, an admin's post): it is
        public from then. False when the day was not held."""
        if not self.held(day):
            return False
        self._released[day] = at
        log.info("the issue of %s, held back, was released at %s", day, at)
        return True

    def visible(self, day: dt.date, *, admin: bool = False) -> bool:
        """True when the issue of ``day`` may be shown (to an admin: always)."""
        return admin or self.publish_time(day) <= self.clock.now()

    def latest_visible(self) -> dt.date:
        """The latest day readers may see now (whether or not it has a file): today once its
        post time has come, else yesterday, or a later day an admin published early."""
        now = self.clock.now()
        today = now.astimezone(self.zone).date()
        latest = today if self.publish_time(today) <= now else today - dt.timedelta(days=1)
        for day, at in [*self._early.items(), *self._released.items()]:
            if day > latest and at <= now:
                latest = day
        return latest

    def published_early(self, day: dt.date, at: dt.datetime) -> bool:
        """Note that an admin published ``day`` at ``at``; True when this made it visible
        sooner than before (False for a day already public by then)."""
        if self.publish_time(day) <= at:
            return False
        self._early[day] = at
        log.info("the issue of %s was published early at %s", day, at)
        return True

    def not_yet(self, day: dt.date) -> str:
        """The reader's text for an embargoed day (the same whether a file exists or not)."""
        if self.held(day):
            return (
                f"{day} 的日报还没有发布（编辑尚未放行）。\n"
                f"The issue of {day} is not out yet (the editors have not released it)."
            )
        at = self.publish_time(day).astimezone(self.zone)
        return (
            f"{day} 的日报还没有发布（{at:%Y-%m-%d %H:%M} 发布）。\n"
            f"The issue of {day} is not out yet (it comes at {zoned_text(at)})."
        )

    def view(self, archive: Archive, *, admin: bool = False) -> VisibleArchive:
        """``archive`` as the given reader (``admin`` sees everything) may see it now."""
        return VisibleArchive(archive, self, admin=admin)


class VisibleArchive:
    """An :class:`~digest_core.archive.Archive` seen through an :class:`Embargo`.

    The same reading methods, answering only with issues visible now; an embargoed day is
    reported as not out yet (the same text whether or not its file exists). Blocking file I/O
    as the archive's: call from a worker thread.
    """

    def __init__(self, archive: Archive, embargo: Embargo, *, admin: bool = False) -> None:
        self.archive = archive
        self.embargo = embargo
        self.admin = admin

    def visible(self, day: dt.date) -> bool:
        return self.embargo.visible(day, admin=self.admin)

    def on(self, date: dt.date) -> Issue:
        """The issue of ``date``.

        Raises:
            IssueNotFound: embargoed (:meth:`Embargo.not_yet`), missing or broken.
        """
        if not self.visible(date):
            raise IssueNotFound(self.embargo.not_yet(date), date=date)
        try:
            return self.archive.on(date)
        except IssueNotFound as exc:
            if self.admin:
                raise
            # the archive names the nearest dates with an issue: only visible ones may be named
            shown = self.dates()
            before = max((d for d in shown if d < date), default=None)
            after = min((d for d in shown if d > date), default=None)
            if exc.__cause__ is None:
                zh, en = f"没有 {date} 的日报", f"No issue for {date}"
            else:
                zh, en = f"{date} 的日报暂时无法提供", f"The issue of {date} is not available now"
            raise IssueNotFound(nearest_text(zh, en, before, after), date=date) from exc.__cause__

    def latest(self, *, on_or_before: dt.date | None = None) -> Issue:
        """The newest visible issue (dated ``on_or_before`` a day, if given).

        Raises:
            IssueNotFound: none is visible on or before that day.
        """
        bound = on_or_before
        if not self.admin:
            last = self.embargo.latest_visible()
            bound = last if bound is None else min(bound, last)
        while True:
            issue = self.archive.latest(on_or_before=bound)
            if self.visible(issue.date):
                return issue
            bound = issue.date - dt.timedelta(days=1)  # a gap under an early-published day

    def dates(self) -> builtins.list[dt.date]:
        """The visible dates with an issue, oldest first."""
        return [d for d in self.archive.dates() if self.visible(d)]

    def neighbours(self, date: dt.date) -> tuple[dt.date | None, dt.date | None]:
        """The nearest visible dates before and after ``date`` that the archive serves an
        issue for (None where there is none). Loads only the files it tries, from the
        listing (:meth:`dates` loads every issue once: seconds for years of them)."""
        older, newer = self.archive.entry_dates_around(date)  # a date may repeat
        return self._first_served(older), self._first_served(newer)

    def _first_served(self, dates: Iterable[dt.date]) -> dt.date | None:
        for day in dates:
            if not self.visible(day):
                continue
            try:
                self.archive.on(day)
            except IssueNotFound:
                continue  # a broken or unreadable file: the next one
            return day
        return None

    def list(self) -> builtins.list[ArchiveEntry]:
        """The archive's entries for visible dates (see :meth:`Archive.list`)."""
        return [e for e in self.archive.list() if self.visible(e.date)]

    def search(self, word: str, *, limit: int = 20) -> builtins.list[SearchHit]:
        """Hits of ``word`` in visible issues, newest first, at most ``limit``."""
        if self.admin:
            return self.archive.search(word, limit=limit)
        last = self.embargo.latest_visible()
        hits = self.archive.search(word, limit=limit, on_or_before=last)
        if all(self.visible(h.date) for h in hits):
            return hits
        # a day under an early-published one is still embargoed: ask for all, then filter
        hits = self.archive.search(word, limit=10_000, on_or_before=last)
        return [h for h in hits if self.visible(h.date)][:limit]
