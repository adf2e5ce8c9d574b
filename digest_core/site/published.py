"""When an issue may be shown on the web: never before it is published (the embargo).

The site asks a :class:`PublishRule`: the project's one embargo rule,
:class:`digest_core.publishing.embargo.Embargo` (day D is public from its ``[schedule] post_time``
in the
digest's zone, or from the moment an admin published it early), satisfies it.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Protocol

log = logging.getLogger(__name__)


class PublishRule(Protocol):
    """Decides what readers may see, and since when."""

    def visible(self, day: dt.date) -> bool:
        """True when the issue of ``day`` may be shown now."""
        ...

    def publish_time(self, day: dt.date) -> dt.datetime:
        """The aware moment the issue of ``day`` is (or will be) published."""
        ...


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
