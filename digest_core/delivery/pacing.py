"""Pacing: token buckets per platform and per target, retry-after deferral, and backoff."""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from digest_core.platform import PlatformLimits, Rate, Target

log = logging.getLogger(__name__)

_EPSILON = 1e-9


class TokenBucket:
    """A token bucket on a monotonic clock that says exactly how long to wait (no polling).

    With a :attr:`Rate.window`, it also keeps the times of its last ``burst`` takes and waits
    until the oldest is ``window`` seconds old, so no sliding window of that length ever holds
    more than ``burst`` messages.
    """

    __slots__ = ("_burst", "_rate", "_recent", "_stamp", "_tokens", "_window")

    def __init__(self, rate: Rate, *, now: float) -> None:
        if rate.per_second <= 0 or rate.burst < 1:
            raise ValueError(f"a rate needs per_second > 0 and burst >= 1, not {rate!r}")
        if rate.window is not None and rate.window <= 0:
            raise ValueError(f"a rate's window must be positive, not {rate!r}")
        self._rate = rate.per_second
        self._burst = float(rate.burst)
        self._tokens = self._burst
        self._stamp = now
        self._window = rate.window
        self._recent: deque[float] | None = None if rate.window is None else deque()

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now

    def delay(self, now: float) -> float:
        """Seconds from ``now`` until one token is available (0.0 if one is)."""
        self._refill(now)
        # float rounding can leave 0.9999999999 after waiting exactly the computed delay; a
        # second, sub-ulp wait would never advance the clock
        wait = 0.0 if self._tokens >= 1.0 - _EPSILON else (1.0 - self._tokens) / self._rate
        recent = self._recent
        if recent is not None and self._window is not None:
            while recent and recent[0] <= now - self._window + _EPSILON:
                recent.popleft()
            if len(recent) >= self._burst:
                wait = max(wait, recent[0] + self._window - now)
        return wait

    def take(self, now: float) -> None:
        """Use one token. Callers SHOULD wait for :meth:`delay` first; early takes go into debt."""
        self._refill(now)
        self._tokens -= 1.0
        if self._recent is not None:
            self._recent.append(now)
            while len(self._recent) > self._burst:
                self._recent.popleft()

    def reserve(self, now: float) -> float:
        """Take one token now for a message that goes once the returned seconds have passed
        (0.0: at once): a later reservation waits behind it, so messages reserved together
        go out paced, each waiting once."""
        wait = self.delay(now)
        self.take(now)
        if self._recent is not None:
            self._recent[-1] = now + wait  # (the window counts it when it goes)
        return wait

    @property
    def full(self) -> bool:
        """Back to its whole burst (as of the last :meth:`delay`: that drops aged takes)."""
        return self._tokens >= self._burst and not self._recent


class Pacer:
    """The pacing model of one platform: an overall bucket, one bucket per target, and a
    "not before" time per target set by a 429's retry-after (that target only).

    The overall rate is kept twice: when a send is dispatched (:meth:`take`, which meters
    how fast sends start) and when it goes out (:meth:`reserve_send`). Between the two a
    send waits for the ledger (its claim, the record of the part before it); sends held up
    by a stalled ledger (a write lock, a full disk) would otherwise reach the platform
    together once it answers.

    All times are the clock's ``monotonic()`` seconds.
    """

    def __init__(self, limits: PlatformLimits, *, now: float) -> None:
        self.limits = limits
        self._overall = TokenBucket(limits.overall, now=now)
        self._sending = TokenBucket(limits.overall, now=now)
        self._buckets: dict[Target, TokenBucket] = {}
        self._not_before: dict[Target, float] = {}

    def overall_delay(self, now: float) -> float:
        """Seconds until the platform as a whole may send again."""
        return self._overall.delay(now)

    def reserve_send(self, now: float) -> float:
        """Reserve the platform-wide slot of a send about to go out: seconds to wait first."""
        return self._sending.reserve(now)

    def ready_at(self, target: Target, now: float) -> float:
        """The earliest time ``target`` may get its next message (the overall bucket aside)."""
        bucket = self._buckets.get(target)
        at = now if bucket is None else now + bucket.delay(now)
        return max(at, self._not_before.get(target, at))

    def take(self, target: Target, now: float) -> None:
        """Account one message to ``target`` sent at ``now``."""
        self._overall.take(now)
        bucket = self._buckets.get(target)
        if bucket is None:
            bucket = self._buckets[target] = TokenBucket(self.limits.for_kind(target.kind), now=now)
        bucket.take(now)

    def defer(self, target: Target, until: float) -> None:
        """Send nothing to ``target`` before ``until`` (a 429's retry-after)."""
        self._not_before[target] = max(until, self._not_before.get(target, until))

    def wait_until(self, target: Target, until: float) -> None:
        """Send nothing to ``target`` before ``until``, replacing an earlier deferral (the
        ledger's record of when a target is due is the one that counts)."""
        self._not_before[target] = until

    def forget_idle(self, now: float) -> None:
        """Drop state of targets that are back to a full bucket and no deferral (bounds memory)."""
        for _ in self.forget_idle_steps(now):
            pass

    def forget_idle_steps(self, now: float, *, step: int = 1000) -> Iterator[None]:
        """:meth:`forget_idle` in steps of ``step`` targets, yielding between them (a caller
        in the event loop sleeps there: 100k targets' state is not dropped in one go)."""
        # (a list of the keys, not of items: 100k (target, bucket) tuples made at once set off
        # the collector's passes, a full one among them, with the loop stalled)
        for i, target in enumerate(list(self._buckets), start=1):
            bucket = self._buckets[target]
            bucket.delay(now)
            if bucket.full and self._not_before.get(target, now) <= now:
                del self._buckets[target]
                self._not_before.pop(target, None)
            if i % step == 0:
                yield


@dataclass(frozen=True)
class Backoff:
    """Retry policy: exponential backoff with full jitter (delay uniform in [0, min(cap,
    base * 2**(attempt-1))]), at most ``max_attempts`` sends of one part.

    See https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/.
    """

    base: float = 1.0
    cap: float = 60.0
    #: sends of one part, 429s included; the part fails after the last
    max_attempts: int = 6

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The wait after failed attempt number ``attempt`` (from 1)."""
        return rng.uniform(0.0, min(self.cap, self.base * 2.0 ** max(0, attempt - 1)))
