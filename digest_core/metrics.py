"""Metrics: the events the core reports to a sink, which the bots side exports.

The core calls a :class:`MetricsSink` at the moments an operator wants counted: a part's
outcome, a 429, a delivery's end, a command answered. Values that are states rather than
events (the next post, subscribers, ledger failures, leadership) are read by the exporter
when it is scraped, from the objects that keep them. Every method MUST return at once and
MUST NOT raise: metrics never hold up or break a delivery.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Protocol

log = logging.getLogger(__name__)

#: outcomes of one send attempt of one part, as reported by :meth:`MetricsSink.part`
SENT, FAILED, RETRIED, GONE, UNKNOWN, MOVED = (
    "sent",
    "failed",
    "retried",
    "gone",
    "unknown",
    "moved",
)


class MetricsSink(Protocol):
    """Where the core reports what it did."""

    def part(self, platform: str, outcome: str) -> None:
        """One send attempt of a part ended with ``outcome`` (:data:`SENT`, :data:`RETRIED`…)."""
        ...

    def rate_limited(self, platform: str) -> None:
        """The platform answered a send with 429 (retry after)."""
        ...

    def delivery(self, platform: str, seconds: float, *, ok: bool, at: dt.datetime) -> None:
        """A delivery on ``platform`` ended after ``seconds``; ``ok``: every target has the
        issue (then ``at``, aware, is the time of the last successful post there)."""
        ...

    def command(self, platform: str, command: str, seconds: float, *, status: str) -> None:
        """A command was answered in ``seconds`` (reply built, not yet sent) with ``status``."""
        ...


class NullMetrics:
    """The sink that counts nothing (the default)."""

    def part(self, platform: str, outcome: str) -> None:
        pass

    def rate_limited(self, platform: str) -> None:
        pass

    def delivery(self, platform: str, seconds: float, *, ok: bool, at: dt.datetime) -> None:
        pass

    def command(self, platform: str, command: str, seconds: float, *, status: str) -> None:
        pass


NULL_METRICS: MetricsSink = NullMetrics()


class Tee:
    """Every event to each of ``sinks`` in turn (the Prometheus exporter and the dashboard's
    counts, say)."""

    def __init__(self, *sinks: MetricsSink) -> None:
        self.sinks = sinks

    def part(self, platform: str, outcome: str) -> None:
        for sink in self.sinks:
            sink.part(platform, outcome)

    def rate_limited(self, platform: str) -> None:
        for sink in self.sinks:
            sink.rate_limited(platform)

    def delivery(self, platform: str, seconds: float, *, ok: bool, at: dt.datetime) -> None:
        for sink in self.sinks:
            sink.delivery(platform, seconds, ok=ok, at=at)

    def command(self, platform: str, command: str, seconds: float, *, status: str) -> None:
        for sink in self.sinks:
            sink.command(platform, command, seconds, status=status)


class ReadersSink(Protocol):
    """Where the core reports what readers looked at, for the dashboard's counts (never who:
    no method is given a reader). Every method MUST return at once and MUST NOT raise."""

    def section(self, platform: str, date: dt.date, section: str) -> None:
        """A section button of the post of ``date`` was pressed."""
        ...

    def found(self, platform: str, stories: list[tuple[dt.date, str]]) -> None:
        """A search showed these stories (issue date, ``headline`` / ``brief-3`` / ``classic``
        / ``lede``): ``/search`` and inline queries alike."""
        ...

    def left(self, platform: str, reason: str) -> None:
        """A reader's subscription ended, and why (:data:`digest_core.commands.requests.
        LEFT_REASONS`: the command, an email link, a mail to the unsubscribe address, a
        bounce, a complaint)."""
        ...


class NullReaders:
    """The sink that counts nothing (the default)."""

    def section(self, platform: str, date: dt.date, section: str) -> None:
        pass

    def found(self, platform: str, stories: list[tuple[dt.date, str]]) -> None:
        pass

    def left(self, platform: str, reason: str) -> None:
        pass


NULL_READERS: ReadersSink = NullReaders()
