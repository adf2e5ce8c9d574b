"""Importable test helpers: a virtual clock, a scriptable FakePlatform, make_issue() and friends."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

from sqlalchemy import func, select

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.delivery.ledger import Ledger, PartState, deliveries, parts
from digest_core.delivery.ledger.queries import current_states, day_rows
from digest_core.models import Issue, IssueRef, Item
from digest_core.platform import PartKey, PlatformLimits, Rate, Target, TargetKind
from digest_core.rendering import Message, Renderer, RenderOptions, plain_renderer

log = logging.getLogger(__name__)

#: A fixed, aware start for virtual clocks.
DEFAULT_START = dt.datetime(2026, 10, 27, 8, 0, tzinfo=dt.UTC)


class ManualClock:
    """A virtual clock: time moves only through :meth:`advance` or, with ``autoadvance``, when
    every task is waiting, jumping straight to the earliest :meth:`sleep` deadline.

    So pacing tests that span minutes of virtual time run in milliseconds. Work the event loop
    cannot see (a database thread) must be declared with :meth:`watch`, or time could jump
    while it runs; :func:`open_ledger` does that for the ledger.
    """

    #: consecutive idle loop iterations before time may jump
    SETTLE_SPINS = 10
    #: real seconds to yield while watched work is busy
    BUSY_TICK = 0.0002

    def __init__(self, start: dt.datetime = DEFAULT_START, *, autoadvance: bool = True) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware start datetime")
        self._start = start
        self._t = 0.0
        self._autoadvance = autoadvance
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._driver: asyncio.Task[None] | None = None
        self._busy: list[Callable[[], bool]] = []

    def now(self) -> dt.datetime:
        return self._start + dt.timedelta(seconds=self._t)

    def monotonic(self) -> float:
        return self._t

    def watch(self, busy: Callable[[], bool]) -> None:
        """Do not advance time while ``busy()`` is true."""
        self._busy.append(busy)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper that is due."""
        if seconds < 0:
            raise ValueError("time does not go backwards")
        self._t += seconds
        while self._sleepers and self._sleepers[0][0] <= self._t:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._sleepers, (self._t + seconds, next(self._seq), fut))
        if self._autoadvance and (self._driver is None or self._driver.done()):
            self._driver = loop.create_task(self._drive(), name="manual-clock")
        await fut

    async def _drive(self) -> None:
        while True:
            idle = 0
            while idle < self.SETTLE_SPINS:
                if any(busy() for busy in self._busy):
                    idle = 0
                    await asyncio.sleep(self.BUSY_TICK)
                else:
                    idle += 1
                    await asyncio.sleep(0)
            while self._sleepers and self._sleepers[0][2].done():
                heapq.heappop(self._sleepers)  # cancelled sleeps
            if not self._sleepers:
                return
            self.advance(max(0.0, self._sleepers[0][0] - self._t))


#: ``ManualClock`` is also what the design calls the frozen clock.
FrozenClock = ManualClock


class PinnedClock:
    """Real monotonic time and real sleeps, but a wall clock that starts at ``start``: for
    end-to-end tests against doubles whose rate windows are real, on a chosen "today"."""

    def __init__(self, start: dt.datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("PinnedClock needs an aware start datetime")
        self._start = start
        self._t0 = time.monotonic()

    def now(self) -> dt.datetime:
        return self._start + dt.timedelta(seconds=time.monotonic() - self._t0)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class SettableClock(PinnedClock):
    """A :class:`PinnedClock` a test may move to another wall time (:meth:`set`): for
    end-to-end tests of what happens at readers' own times, days apart."""

    def set(self, when: dt.datetime) -> None:
        """Run the wall clock on from ``when`` (aware)."""
        if when.tzinfo is None:
            raise ValueError("SettableClock needs an aware datetime")
        self._start, self._t0 = when, time.monotonic()


@asynccontextmanager
async def open_ledger(
    clock: Clock, url: str = "sqlite+aiosqlite://", *, owner: str | None = None
) -> AsyncIterator[Ledger]:
    """A ledger (in memory by default) whose database work holds a :class:`ManualClock` still.

    Two ledgers on one file URL with different ``owner`` ids stand for two processes.
    """
    async with Ledger.open(url, clock=clock, owner=owner) as ledger:
        if isinstance(clock, ManualClock):
            clock.watch(lambda: ledger.busy)
        yield ledger


async def mark_sent(ledger: Ledger, row_id: int, message_id: str) -> None:
    """Record a claimed row sent with ``message_id`` and return once that is committed (as a
    delivery does: :meth:`Ledger.mark_sent_soon`, then waiting for it)."""
    await ledger.mark_sent_soon(row_id, message_id).wait()


async def part_counts(
    ledger: Ledger, ref: IssueRef, *, platform: str | None = None
) -> dict[PartState, int]:
    """How many rows of an issue revision (all generations) are in each state."""
    query = (
        select(parts.c.state, func.count())
        .join(deliveries, parts.c.delivery_id == deliveries.c.id)
        .where(deliveries.c.issue_date == ref.date, deliveries.c.revision == ref.revision)
        .group_by(parts.c.state)
    )
    if platform is not None:
        query = query.where(deliveries.c.platform == platform)
    async with ledger._tx() as conn:
        found = {PartState(state): int(n) for state, n in await conn.execute(query)}
    return {state: found.get(state, 0) for state in PartState}


async def day_part_counts(
    ledger: Ledger, day: dt.date, *, platform: str | None = None
) -> dict[PartState, int]:
    """How many of a day's current rows (see :meth:`Ledger.day_state`) are in each state,
    summed over platforms unless ``platform`` is given."""
    async with ledger._tx() as conn:
        found = await day_rows(conn, day, platform)
    totals = dict.fromkeys(PartState, 0)
    for states in current_states(found).values():
        for state in states:
            totals[state] += 1
    return totals


@dataclass(frozen=True)
class Slow:
    """A scripted step: the send takes ``seconds`` (on the platform's clock), then succeeds."""

    seconds: float


#: A scripted outcome of one send: an exception to raise, a Slow success, or None (succeed).
Step = BaseException | Slow | None


@dataclass(frozen=True)
class Sent:
    """One message the FakePlatform accepted."""

    target: Target
    message: Message
    message_id: str
    #: the clock's monotonic time when the send completed
    at: float


#: The default pacing of :class:`FakePlatform`: 29 sends/s overall, one at a time; private
#: chats 1/s after a burst of 3; groups and channels 17/min after a burst of 3.
FAKE_LIMITS = PlatformLimits(
    overall=Rate(29.0, burst=1),
    per_target={
        TargetKind.PRIVATE: Rate(1.0, burst=3),
        TargetKind.GROUP: Rate(17 / 60, burst=3),
        TargetKind.CHANNEL: Rate(17 / 60, burst=3),
    },
)


@dataclass
class FakePlatform:
    """A Platform double with scriptable outcomes per target and per call.

    ``script(target_id, *steps)`` queues outcomes for that target's next sends (an exception
    instance is raised, :class:`Slow` delays, ``None`` succeeds); when the queue is empty the
    ``always`` outcome for the target applies, else success after ``latency`` seconds.
    Successful sends are recorded in :attr:`sent` in order; every call in :attr:`calls`.
    """

    clock: Clock
    name: str = "fake"
    flavor: Renderer = field(default_factory=plain_renderer)
    limits: PlatformLimits = FAKE_LIMITS
    post_options: RenderOptions = field(default_factory=RenderOptions)
    latency: float = 0.0
    #: called after each successful send (the crash test appends to a file here)
    on_sent: Callable[[Sent], None] | None = None
    sent: list[Sent] = field(default_factory=list)
    calls: list[tuple[Target, Message, float]] = field(default_factory=list)
    #: the ``key`` of every call, in the order of :attr:`calls`
    keys: list[PartKey | None] = field(default_factory=list)
    _scripts: dict[str, deque[Step]] = field(default_factory=dict)
    _always: dict[str, BaseException] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def script(self, target_id: str, *steps: Step) -> None:
        self._scripts.setdefault(target_id, deque()).extend(steps)

    def always(self, target_id: str, error: BaseException | None) -> None:
        """Make every unscripted send to ``target_id`` raise ``error`` (None: succeed again)."""
        if error is None:
            self._always.pop(target_id, None)
        else:
            self._always[target_id] = error

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        self.calls.append((target, message, self.clock.monotonic()))
        self.keys.append(key)
        queue = self._scripts.get(target.id)
        step: Step = queue.popleft() if queue else self._always.get(target.id)
        if isinstance(step, BaseException):
            raise step
        await self.clock.sleep(step.seconds if isinstance(step, Slow) else self.latency)
        record = Sent(target, message, str(next(self._ids)), self.clock.monotonic())
        self.sent.append(record)
        if self.on_sent is not None:
            self.on_sent(record)
        return record.message_id

    def sent_to(self, target_id: str) -> list[Message]:
        """Messages delivered to one target, in order."""
        return [s.message for s in self.sent if s.target.id == target_id]

    def times(self, target_id: str | None = None) -> list[float]:
        """Completion times of the successful sends (to one target, or all)."""
        return [s.at for s in self.sent if target_id is None or s.target.id == target_id]


def make_messages(n: int, *, label: str = "part") -> list[Message]:
    """``n`` distinct messages whose payload says which part they are (``{"part": i}``)."""
    return [Message({"text": f"{label} {i + 1}/{n}", "part": i}) for i in range(n)]


def make_targets(
    n: int, *, platform: str = "fake", kind: TargetKind = TargetKind.PRIVATE, prefix: str = "c"
) -> list[Target]:
    return [Target(platform, f"{prefix}{i}", kind) for i in range(n)]


def make_issue(date: dt.date = dt.date(2026, 10, 27), *, briefs: int = 2) -> Issue:
    """A small valid issue: a headline, ``briefs`` briefs and a classic."""

    def item(title: str, n: int) -> Item:
        return Item(
            title=title,
            paragraphs=(f"{title}：第一段。", f"{title}：第二段。"),
            links=(f"https://example.com/{date.isoformat()}/{n}",),
            question=f"{title}意味着什么？",
        )

    return Issue(
        date=date,
        lede="今天的三件事。",
        headline=item("重点新闻", 0),
        briefs=tuple(item(f"简讯{i}", i) for i in range(1, briefs + 1)),
        classic=item("经典回顾", 99),
    )


def windows_exceeded(times: Sequence[float], *, window: float, limit: int) -> bool:
    """True if more than ``limit`` of ``times`` fall within some span of ``window`` seconds
    (shorter by more than a float's rounding: times a whole window apart, each computed as
    an earlier time plus a window, may differ by 0.999999999999999)."""
    ordered = sorted(times)
    span = window - 1e-9
    return any(ordered[i + limit] - ordered[i] < span for i in range(len(ordered) - limit))


# --- the product read the way only tests and benchmarks need ---------------------------------


def scaled_limits(limits: PlatformLimits, factor: float) -> PlatformLimits:
    """``limits`` with rates ``factor`` times higher and the same bursts: what our loopback
    doubles enforce when their windows are shortened ``factor`` times."""
    return replace(
        limits,
        overall=_faster(limits.overall, factor),
        per_target={k: _faster(r, factor) for k, r in limits.per_target.items()},
    )


def _faster(rate: Rate, factor: float) -> Rate:
    """``rate`` ``factor`` times higher with the same burst (a window ``factor`` times shorter)."""
    window = None if rate.window is None else rate.window / factor
    return Rate(rate.per_second * factor, rate.burst, window)


def time_scaled_limits(limits: PlatformLimits, factor: float) -> PlatformLimits:
    """``limits`` on a clock running ``factor`` times faster (the fan-out benchmark's): rates
    and bursts both scaled, so "29 per second, one at a time" becomes "2,900 per second, 100
    per 1/29 s" (a burst of 1 at 2,900/s would only measure the event loop's timer
    resolution)."""
    return replace(
        limits,
        overall=Rate(
            limits.overall.per_second * factor,
            max(1, round(limits.overall.burst * factor)),
            limits.overall.window,
        ),
        per_target={
            k: Rate(r.per_second * factor, max(1, round(r.burst * factor)), r.window)
            for k, r in limits.per_target.items()
        },
    )


def build_index(archive: Archive) -> int:
    """Bring ``archive``'s search index up to date with its folder in this thread (what
    :meth:`~digest_core.archive.Archive.index_in_background` does in another): every file it
    does not hold as it is now is read (a no-op without an index); how many files were read."""
    return archive._search.build()


def decode_days(posting: list[int] | str) -> list[int]:
    """The days of a year in a search index shard's posting, as the search page's script
    decodes what :func:`digest_core.site.search.encode_days` encoded."""
    if isinstance(posting, list):
        out, day = [], 0
        for gap in posting:
            day += gap
            out.append(day)
        return out
    bits = base64.b64decode(posting)
    return [d for d in range(len(bits) * 8) if bits[d >> 3] >> (d & 7) & 1]
