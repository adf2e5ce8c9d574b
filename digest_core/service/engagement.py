"""Engagement: what readers did, counted for the editor's dashboard, and a post's live sends.

A :class:`~digest_core.metrics.MetricsSink` (commands answered; parts sent, retried, 429s)
and a :class:`~digest_core.metrics.ReadersSink` (section buttons, search hits), plus the
clicks of tracked links. Counts are per day (the digest's zone), platform and key, never per
reader: no method is given one. They gather in memory and :meth:`Engagement.flush` adds them to
the ledger in one upsert per table (every few seconds, and before the dashboard reads them);
a flush the ledger refuses keeps them for the next.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
from dataclasses import dataclass, field

from digest_core import metrics
from digest_core.clock import Clock
from digest_core.commands.inline import InlineSearches
from digest_core.delivery import Ledger

log = logging.getLogger(__name__)

#: the kinds of ``usage_counts`` rows
COMMAND, SECTION, FOUND, LEFT = "command", "section", "found", "left"
#: the ``platform`` of the dashboard's own requests: admins' buttons, not readers' commands
DASHBOARD = "dashboard"


@dataclass
class Live:
    """One platform's sends since the bot started: what the dashboard shows while a post runs."""

    sent: int = 0
    retried: int = 0
    rate_limited: int = 0
    failed: int = 0
    #: monotonic times of the last sends (the live messages-per-second)
    recent: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=4096))


class Engagement:
    """See the module docstring."""

    def __init__(self, *, clock: Clock, zone: dt.tzinfo) -> None:
        self.clock = clock
        self.zone = zone
        self._counts: collections.Counter[tuple[dt.date, str, str, str]] = collections.Counter()
        self._clicks: collections.Counter[tuple[dt.date, str, int, str, dt.date]] = (
            collections.Counter()
        )
        self.live: dict[str, Live] = {}
        self._flushing = asyncio.Lock()
        #: inline queries' hits, counted as searches once the reader stops typing
        self.searches = InlineSearches(self)

    def _today(self) -> dt.date:
        return self.clock.now().astimezone(self.zone).date()

    def _live(self, platform: str) -> Live:
        return self.live.setdefault(platform, Live())

    # ------------------------------------------------------------ MetricsSink

    def part(self, platform: str, outcome: str) -> None:
        live = self._live(platform)
        if outcome == metrics.SENT:
            live.sent += 1
            live.recent.append(self.clock.monotonic())
        elif outcome == metrics.RETRIED:
            live.retried += 1
        elif outcome == metrics.FAILED:
            live.failed += 1

    def rate_limited(self, platform: str) -> None:
        self._live(platform).rate_limited += 1

    def delivery(self, platform: str, seconds: float, *, ok: bool, at: dt.datetime) -> None:
        pass

    def command(self, platform: str, command: str, seconds: float, *, status: str) -> None:
        if platform == DASHBOARD:
            return  # an admin's button (the audit log has it), not a reader's command
        self._counts[(self._today(), platform, COMMAND, command)] += 1

    # ------------------------------------------------------------ ReadersSink

    def section(self, platform: str, date: dt.date, section: str) -> None:
        self._counts[(self._today(), platform, SECTION, f"{date.isoformat()}:{section}")] += 1

    def found(self, platform: str, stories: list[tuple[dt.date, str]]) -> None:
        today = self._today()
        for date, story in stories:
            self._counts[(today, platform, FOUND, f"{date.isoformat()}:{story}")] += 1

    def left(self, platform: str, reason: str) -> None:
        self._counts[(self._today(), platform, LEFT, reason)] += 1

    def click(self, date: dt.date, story: str, link: int, platform: str) -> None:
        """A reader followed link ``link`` (from 1) of ``story`` in the issue of ``date``,
        posted on ``platform``."""
        self._clicks[(date, story, link, platform, self._today())] += 1

    # ------------------------------------------------------------ to the ledger

    async def flush(self, ledger: Ledger) -> None:
        """Add what was counted since the last flush to the ledger; kept for the next one if
        the ledger refuses (never raises)."""
        async with self._flushing:
            counts, self._counts = self._counts, collections.Counter()
            clicks, self._clicks = self._clicks, collections.Counter()
            try:
                await ledger.add_engagement(counts)
                counts = collections.Counter()
                await ledger.add_clicks(clicks)
            except Exception as exc:
                log.warning("engagement counts kept for later: the ledger refused them: %s", exc)
                self._counts.update(counts)
                self._clicks.update(clicks)

    def rate(self, platform: str, *, seconds: float = 5.0) -> float:
        """The sends per second of ``platform`` over the last ``seconds``."""
        now = self.clock.monotonic()
        recent = self._live(platform).recent
        return sum(1 for t in recent if now - t <= seconds) / seconds
