"""The injected clock: aware UTC wall time, a monotonic clock for pacing, and sleep."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


@runtime_checkable
class Clock(Protocol):
    """What the core asks of time; tests inject :class:`digest_core.testing.ManualClock`.

    ``now()`` MUST return a timezone-aware datetime in UTC. ``monotonic()`` MUST never go
    backwards; only differences between its values mean anything. ``sleep(seconds)`` MUST return
    once ``monotonic()`` has advanced by at least ``seconds`` (immediately for ``seconds <= 0``)
    and MUST be cancellable.
    """

    def now(self) -> dt.datetime: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: ``datetime.now(UTC)``, ``time.monotonic`` and ``asyncio.sleep``."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
