"""The per-user flood limit on reader commands and button presses, the same on every platform."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from enum import Enum
from typing import Protocol, Self

from digest_core.clock import Clock
from digest_core.delivery.pacing import TokenBucket
from digest_core.platform import Rate

log = logging.getLogger(__name__)

#: Users whose rate-limit state is kept before full (idle) buckets are forgotten.
MAX_TRACKED_USERS = 10_000


class Verdict(Enum):
    """What to do with one command or press of a user."""

    ALLOW = "allow"
    #: over the limit for the first time in this burst: say "slow down" once
    WARN = "warn"
    #: over the limit again: ignore silently
    DROP = "drop"


class CommandLimit(Protocol):
    """Where a platform's table sets its per-user command limit."""

    @property
    def command_burst(self) -> int: ...

    @property
    def command_window_seconds(self) -> float: ...


class UserRateLimiter:
    """A token bucket per user: ``burst`` commands, refilled over ``window`` seconds.

    Users are any hashable key (a platform's user id); at most :data:`MAX_TRACKED_USERS`
    are tracked before idle ones are forgotten. Admins are the adapter's to exempt.
    """

    def __init__(self, *, burst: int, window: float, clock: Clock) -> None:
        self.burst = burst
        self.window = window
        self.rate = Rate(burst / window, burst=burst)
        self.clock = clock
        self._buckets: dict[Hashable, TokenBucket] = {}
        self._warned: set[Hashable] = set()

    @classmethod
    def of(cls, settings: CommandLimit, clock: Clock) -> Self:
        """The limit ``settings`` set: ``command_burst`` commands per
        ``command_window_seconds``."""
        return cls(
            burst=settings.command_burst, window=settings.command_window_seconds, clock=clock
        )

    def check(self, user: Hashable) -> Verdict:
        """Take one token for ``user`` if there is one."""
        now = self.clock.monotonic()
        bucket = self._buckets.get(user)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED_USERS:
                self._forget_idle(now)
            bucket = self._buckets[user] = TokenBucket(self.rate, now=now)
        if bucket.delay(now) <= 0:
            bucket.take(now)
            self._warned.discard(user)
            return Verdict.ALLOW
        if user in self._warned:
            return Verdict.DROP
        self._warned.add(user)
        return Verdict.WARN

    def slow_down(self) -> str:
        """The one-time warning for a user over the limit (Chinese and English)."""
        window = f"{self.window:g}"
        return (
            f"请慢一点：每 {window} 秒最多 {self.burst} 条命令。\n"
            f"Slow down, please: at most {self.burst} commands per {window} s."
        )

    def _forget_idle(self, now: float) -> None:
        for user, bucket in list(self._buckets.items()):
            bucket.delay(now)  # refills
            if bucket.full:
                del self._buckets[user]
                self._warned.discard(user)
