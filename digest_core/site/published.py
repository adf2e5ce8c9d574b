"""When an issue may be shown on the web: never before it is published (the embargo).

The site asks a :class:`PublishRule`. Until the project's one embargo rule is available to it,
:class:`PostTimeRule` is that rule: an issue of day D is public from D at ``[schedule]
post_time`` in the digest's zone.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Protocol

from digest_core.clock import Clock

log = logging.getLogger(__name__)


class PublishRule(Protocol):
    """Decides what readers may see, and since when."""

    def visible(self, day: dt.date) -> bool:
        """True when the issue of ``day`` may be shown now."""
        ...

    def publish_time(self, day: dt.date) -> dt.datetime:
        """The aware moment the issue of ``day`` is (or will be) published."""
        ...


class PostTimeRule:
    """Day D is public from ``post_time`` on D in ``zone``, by ``clock``."""

    def __init__(self, *, zone: dt.tzinfo, post_time: dt.time, clock: Clock) -> None:
        self.zone = zone
        self.post_time = post_time
        self.clock = clock

    def publish_time(self, day: dt.date) -> dt.datetime:
        """``post_time`` on ``day`` in the zone (a time a DST change skips moves forward)."""
        local = dt.datetime.combine(day, self.post_time, tzinfo=self.zone)
        return local.astimezone(dt.UTC).astimezone(self.zone)

    def visible(self, day: dt.date) -> bool:
        return self.clock.now() >= self.publish_time(day)


class FixedClock:
    """A clock stopped at one moment (``digest-bot site build --now``)."""

    def __init__(self, now: dt.datetime) -> None:
        if now.tzinfo is None:
            raise ValueError("FixedClock needs an aware moment")
        self._now = now.astimezone(dt.UTC)

    def now(self) -> dt.datetime:
        return self._now

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        raise RuntimeError("a FixedClock does not sleep")
