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


def zoned_text(at: dt.datetime, *, day: bool = True) -> str:
    """``2026-12-03 08:00 (Asia/Shanghai)`` (``08:00 (Asia/Shanghai)`` without ``day``): the
    zone by its name, since abbreviations are ambiguous (CST is China's and the US Central
    time). A zone without a name (a fixed offset) is shown as its offset, ``UTC+08:00``."""
    zone = at.tzinfo
    name = getattr(zone, "key", None)
    if name is None:
        offset = at.utcoffset()
        name = at.tzname() if offset is None else _offset_name(offset)
    return f"{at:%Y-%m-%d %H:%M} ({name})" if day else f"{at:%H:%M} ({name})"


def _offset_name(offset: dt.timedelta) -> str:
    if not offset:
        return "UTC"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{mins:02d}"
