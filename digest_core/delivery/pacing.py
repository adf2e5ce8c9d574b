"""Pacing: token buckets per platform and per target, retry-after deferral, and backoff."""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import overload

from digest_core.clock import Clock
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


class SendSlot:
    """The platform-wide turn of one request: :meth:`wait` for it, send, then :meth:`done`
    once the answer (or the error) is back. A caller whose :meth:`wait` returned MUST call
    :meth:`done` however the send ends, cancelled or not: later turns wait for it (a
    cancelled :meth:`wait` marks it done itself)."""

    __slots__ = (
        "_at",
        "_began",
        "_company",
        "_ended",
        "_gate",
        "_grace",
        "_slack",
        "_window",
        "end",
        "start",
    )

    def __init__(
        self,
        at: float,
        *,
        gate: SendSlot | None = None,
        window: float = 0.0,
        grace: float = 0.0,
        company: tuple[SendSlot, ...] = (),
        slack: float = 0.0,
    ) -> None:
        """``at``: not before this time; ``gate``: nor before ``window`` seconds after the
        answer to that turn. ``company``: the turns whose answers the turns that go out with
        this one wait for; an answer of theirs back within ``slack`` seconds of the gate's
        holds this one as long as it holds them, so they go out together again (a turn that
        went late, by ``slack`` at most, does not split its clump for good)."""
        self._at = at
        self._gate = gate
        self._company = company
        self._slack = slack
        self._window = window
        self._grace = grace
        self._began: asyncio.Future[None] | None = None
        self._ended: asyncio.Future[None] | None = None
        #: when this turn began (no later than its request arrived) and when its answer was
        #: back (no earlier than the platform counted it); None until then
        self.start: float | None = None
        self.end: float | None = None

    async def wait(self, clock: Clock) -> float:
        """Wait for this turn; the clock seconds waited."""
        began = clock.monotonic()
        try:
            # (let go of the turns before: each holds its own gate and company)
            at, gate, company = self._at, self._gate, self._company
            self._gate, self._company = None, ()
            if gate is not None:
                answered = await gate._answer(clock)
                at = max(at, answered + self._window)
                for other in company:
                    late = await other._answer(clock, by=answered + self._slack)
                    if late is not None:
                        at = max(at, late + self._window)
            delay = at - clock.monotonic()
            if delay > 0:
                await clock.sleep(delay)
        except BaseException:
            self.done(clock.monotonic())  # cancelled: it never went (later turns go on)
            raise
        self.begin(clock.monotonic())
        return clock.monotonic() - began

    def begin_if_due(self, now: float) -> bool:
        """Begin this turn at ``now`` if it waits for nothing (no turn before it to hear
        from, and due by then): what :meth:`wait` would do without sleeping, and without a
        coroutine (one per message, with pacing that lets it go at once). False: it has to
        :meth:`wait`."""
        if self._gate is None and self._at <= now:
            self.begin(now)
            return True
        return False

    def begin(self, now: float) -> None:
        """This turn's request goes out at ``now`` (:meth:`wait` says so itself)."""
        if self.start is None:
            self.start = now
            _settle(self._began)

    def done(self, now: float) -> None:
        """The answer to this turn's request is back (or it never went) at ``now``."""
        self._gate, self._company = None, ()
        if self.end is None:
            self.end = now if self.start is None else max(now, self.start)
            _settle(self._began)
            _settle(self._ended)

    @overload
    async def _answer(self, clock: Clock) -> float: ...
    @overload
    async def _answer(self, clock: Clock, by: float) -> float | None: ...

    async def _answer(self, clock: Clock, by: float | None = None) -> float | None:
        """When this turn's answer was back: waited for, at most ``grace`` seconds after the
        turn began (an answer overdue by then counts as arrived by then). With ``by``: nor
        past that time; None if the answer was not back by then."""
        if self.end is None and self.start is None:
            # its own wait is still ahead of it
            self._began = _future(self._began)
            if by is None:
                await asyncio.shield(self._began)
            elif not await _settled_by(clock, self._began, by):
                return None
        if self.end is not None:
            return self.end
        assert self.start is not None
        overdue = self.start + self._grace
        self._ended = _future(self._ended)
        await _settled_by(clock, self._ended, overdue if by is None else min(overdue, by))
        if self.end is not None:
            return self.end
        return overdue if by is None or overdue <= by else None


async def _settled_by(clock: Clock, future: asyncio.Future[None], until: float) -> bool:
    """Wait for ``future`` until the clock's ``until`` at most (it is not cancelled);
    whether it is done."""
    left = until - clock.monotonic()
    if left > 0 and not future.done():
        sleeper = asyncio.ensure_future(clock.sleep(left))
        try:
            await asyncio.wait((sleeper, future), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
    return future.done()


def _future(existing: asyncio.Future[None] | None) -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future() if existing is None else existing


def _settle(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


def clump_size(count: int) -> int:
    """The turns of a :class:`SendWindow` of ``count`` that go out together: about a sixth of
    ``count``, and a divisor of it, so a window holds whole clumps and a clump's turns wait
    for the answers of one clump before them (clumps of 8 in Discord's 50 went at 0.96 of the
    limit, 5 at 0.99; clumps of 3 in Telegram's 30 cost 0.95 CPU ms a message, 5 cost 0.61:
    benchmarks/telegram_fanout.py, benchmarks/discord_fanout.py)."""
    most = max(1, count // 6)
    return next(n for n in range(most, 0, -1) if count % n == 0)


class SendWindow:
    """At most ``count`` requests in any ``window`` seconds as the platform counts them (when
    each arrives), whatever the latency.

    A platform counts a request somewhere between the moment it leaves and the moment its
    answer is back. So each turn is stamped twice: when it begins (no later than the request
    arrives) and when its answer is back (no earlier than it arrived); a turn begins only
    ``window`` seconds after the answer of the turn ``count`` before it. Any ``window``-long
    span of the platform's clock then holds at most ``count`` arrivals, with no margin lost
    to timing jitter.

    Turns go out in clumps of ``spread`` (by default :func:`clump_size`: 5 of Telegram's 30
    and of Discord's 50), one clump every ``spread / count`` of the window, so ``count /
    window`` a second:

    * not a whole window's burst at once: it queues in the client (the first answer is read
      only once every request of the burst is written), and that latency, lost once per
      window as the window waits for the answer, is many times one request's;
    * nor one turn at a time: a clump's turns share one time, and the answers they wait for
      (those of the clump ``count`` turns before, sent together) come back within a
      millisecond or so of each other, so they go out in one wake-up of the event loop, and
      their answers, records and next claims come together too. At a paced rate a wake-up
      costs more CPU than the code it runs; one a turn was most of a message's cost
      (benchmarks/telegram_fanout.py).

    A turn that comes while a clump has room and the next is not yet due joins it (going at
    once if the clump's time has passed), so a lone target's parts need not wait for a clump
    each.

    An answer overdue by ``grace`` seconds (a hung request) counts as arrived by then, so a
    slow request holds the platform up for at most that long.
    """

    __slots__ = (
        "_at",
        "_company",
        "_count",
        "_grace",
        "_interval",
        "_left",
        "_turns",
        "_window",
        "spread",
    )

    def __init__(
        self,
        count: int,
        window: float,
        *,
        now: float,
        grace: float | None = None,
        spread: int | None = None,
    ) -> None:
        if count < 1 or window <= 0:
            raise ValueError(f"a send window needs count >= 1 and window > 0, not {count}/{window}")
        self._count = count
        self._window = window
        self._grace = 2 * window if grace is None else grace
        #: the turns a clump holds, and the time between two clumps
        self.spread = min(count, spread or clump_size(count))
        self._interval = self.spread * window / count
        #: the last ``count`` turns, the oldest first
        self._turns: deque[SendSlot] = deque()
        #: the current clump: its time (the next may go an interval later), the turns it has
        #: room for and those its turns wait for
        self._at = now - self._interval
        self._left = 0
        self._company: tuple[SendSlot, ...] = ()

    def reserve(self, now: float) -> SendSlot:
        """The next turn, in order: it waits for the one ``count`` turns before it."""
        turns = self._turns
        due = self._at + self._interval
        if self._left == 0 or now >= due:  # a new clump
            self._at = max(now, due)
            self._left = self.spread
            # the turns its turns wait for (n0-count ..., those there are)
            waits_for = len(turns) - self._count + self.spread
            self._company = tuple(itertools.islice(turns, max(0, waits_for)))
        self._left -= 1
        gate = turns.popleft() if len(turns) >= self._count else None
        slot = SendSlot(
            max(self._at, now),
            gate=gate,
            window=self._window,
            grace=self._grace,
            company=self._company,
            slack=self._interval,
        )
        turns.append(slot)
        return slot


class Pacer:
    """The pacing model of one platform: an overall bucket, one bucket per target, and a
    "not before" time per target set by a 429's retry-after (that target only).

    The overall rate is kept twice: when a send is dispatched (:meth:`take`, which meters
    how fast sends start) and when it goes out (:meth:`send_slot`). Between the two a
    send waits for the ledger (its claim, the record of the part before it); sends held up
    by a stalled ledger (a write lock, a full disk) would otherwise reach the platform
    together once it answers. An overall rate with a ``window`` is kept as it goes out by a
    :class:`SendWindow` ("``burst`` per ``window``" as the platform counts it); without
    one, by a token bucket.

    All times are the clock's ``monotonic()`` seconds.
    """

    def __init__(self, limits: PlatformLimits, *, now: float) -> None:
        self.limits = limits
        overall = limits.overall
        self._window: SendWindow | None = None
        dispatch, ahead = overall, 1
        if overall.window is not None:
            self._window = SendWindow(overall.burst, overall.window, now=now)
            # sends are dispatched as the window spreads them, a clump at once (so a target's
            # next part is not dispatched behind a whole window's burst)
            ahead = self._window.spread
            dispatch = Rate(overall.burst / overall.window, burst=ahead)
        self._overall = TokenBucket(dispatch, now=now)
        #: how far ahead of its time a send's end may take the dispatch bucket's next turn
        #: (``Fanout._take_at_end``): one clump of the window's turns (they go out together),
        #: one turn without a window
        self.take_ahead = ahead / dispatch.per_second
        self._sending = TokenBucket(overall, now=now)
        self._buckets: dict[Target, TokenBucket] = {}
        self._not_before: dict[Target, float] = {}

    def overall_delay(self, now: float) -> float:
        """Seconds until the platform as a whole may send again."""
        return self._overall.delay(now)

    def send_slot(self, now: float) -> SendSlot:
        """The platform-wide turn of a send about to go out: wait for it, send, then mark
        it done (see :class:`SendSlot`)."""
        if self._window is not None:
            return self._window.reserve(now)
        return SendSlot(now + self._sending.reserve(now))

    def account(self, target: Target, now: float) -> None:
        """Account one message to ``target`` that goes out at once, unpaced (its answer is
        counted a whole window later, as if that slow)."""
        self.take(target, now)
        slot = self.send_slot(now)
        slot.begin(now)
        slot.done(now + (self.limits.overall.window or 0.0))

    def counted(self, now: float, requests: int) -> None:
        """``requests`` the platform answered by ``now`` outside the pacing (logging in),
        counted against the overall limit: sends that follow at once share its window."""
        for _ in range(requests):
            self._overall.take(now)
            slot = self.send_slot(now)
            slot.begin(now)
            slot.done(now)

    def ready_at(self, target: Target, now: float) -> float:
        """The earliest time ``target`` may get its next message (the overall bucket aside)."""
        bucket = self._buckets.get(target)
        at = now if bucket is None else now + bucket.delay(now)
        if not self._not_before:  # (no target deferred: most deliveries)
            return at
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

    def forget_idle_steps(self, now: float, *, step: int = 1000) -> Iterator[None]:
        """Drop state of targets that are back to a full bucket and no deferral (bounds
        memory), in steps of ``step`` targets, yielding between them (a caller in the event
        loop sleeps there: 100k targets' state is not dropped in one go)."""
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
