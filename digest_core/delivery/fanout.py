"""Fan-out: deliver rendered parts to many targets, paced, in order, retried, and recorded."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import functools
import heapq
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from digest_core import metrics
from digest_core.clock import Clock, SystemClock
from digest_core.delivery.ledger import (
    DEFAULT_LEASE_TTL,
    FULL_VARIANT,
    MAYBE_SENT,
    Ledger,
    PartState,
    Plan,
    PlannedPart,
    Recorded,
    delivery_lease,
)
from digest_core.delivery.pacing import Backoff, Pacer
from digest_core.delivery.reports import (  # re-exported: the engine returns them
    DeliveryReport,
    PartOutcome,
    ProgressCallback,
    TargetReport,
    due_of,
    waiting_error,
)
from digest_core.delivery.threads import Step, Threading
from digest_core.errors import (
    DeliveryBusy,
    DeliveryError,
    OutcomeUnknown,
    RateLimited,
    TargetGone,
    TargetMoved,
    TransientError,
)
from digest_core.heap import frozen_heap, refreeze
from digest_core.logcontext import log_fields
from digest_core.metrics import NULL_METRICS, MetricsSink
from digest_core.models import IssueRef
from digest_core.platform import Opened, PartKey, Platform, Target
from digest_core.rendering import Message

log = logging.getLogger(__name__)

#: sends in flight at once by default: Telegram's paid broadcast allows 1,000 messages a second,
#: and at 0.1-0.3 s a request that takes 100-300 sends in flight (100 capped it near 330/s at
#: 0.3 s); the ledger's group commit also writes bigger batches (benchmarks/scale.py)
MAX_IN_FLIGHT = 500

#: the longest a delivery waits for one target by default (a 429's retry_after): a target
#: due later is left pending with the reason and the time it is due, and the delivery ends
#: (a one-shot ``post`` must not wait an hour for one channel; a running bot resumes it)
MAX_WAIT = 300.0

#: loops over every target yield to the event loop this often (a post's and a correction's:
#: building their runs, dropping them in slices of this many)
YIELD_EVERY = 500


@dataclass(eq=False, slots=True)
class TargetRun:
    """One target's parts as a fan-out sends them: in order, one at a time, with where it got
    to and what it claimed (a post's runs are built by :class:`DeliveryEngine`, a
    correction's by :mod:`digest_core.publishing.corrections`)."""

    order: int
    target: Target
    parts: Sequence[PlannedPart]
    report: TargetReport
    pos: int = 0
    attempts: int = 0
    moves: int = 0
    #: the last row this run claimed (a row left in flight is resumed only once). A run
    #: claims its rows in order and moves on only once one is settled, so only its current
    #: row can have been claimed by it before (a set per run was 22 MB at 100k targets)
    claimed: int | None = None
    #: rows that may have arrived already: planned in flight or unknown, or an attempt of
    #: this run was cut (OutcomeUnknown); None while there is none
    uncertain: set[int] | None = None
    #: the commit of the "sent" record of the part before the current one, while pending:
    #: the current part is claimed only after it, so a crash leaves at most one part of a
    #: target in flight (as when senders waited for their records)
    recorded: Recorded | None = None

    def was_claimed(self, row_id: int) -> bool:
        return self.claimed == row_id

    def mark_claimed(self, row_id: int) -> None:
        self.claimed = row_id

    def is_uncertain(self, row_id: int) -> bool:
        return self.uncertain is not None and row_id in self.uncertain

    def mark_uncertain(self, row_id: int) -> None:
        if self.uncertain is None:
            self.uncertain = set()
        self.uncertain.add(row_id)


class DeliveryEngine:
    """Delivers issues through platforms, pacing each platform under its limits.

    The engine keeps one :class:`~digest_core.delivery.pacing.Pacer` per platform name for its
    lifetime, so successive or concurrent deliveries share the budget. Deliveries to several
    platforms run concurrently with ``asyncio.gather`` (or a TaskGroup) of :meth:`deliver` calls.

    A delivery holds the ledger's lease ``deliver:<platform>`` (renewed every ``lease_ttl``/3
    seconds on the clock), so another process cannot deliver on that platform meanwhile; in
    this process, deliveries of one issue may overlap and still send each part once.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        clock: Clock,
        backoff: Backoff | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_moves: int = 3,
        rng: random.Random | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        metrics: MetricsSink = NULL_METRICS,
        max_wait: float = MAX_WAIT,
    ) -> None:
        """``max_wait``: the longest one target is waited for (:data:`MAX_WAIT`)."""
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if lease_ttl <= 0:
            raise ValueError("lease_ttl must be positive")
        self.ledger = ledger
        self.clock = clock
        self.backoff = backoff or Backoff()
        self.max_in_flight = max_in_flight
        self.max_moves = max_moves
        self.rng = rng or random.Random()
        self.lease_ttl = lease_ttl
        self.metrics = metrics
        self.max_wait = max_wait
        self._pacers: dict[str, Pacer] = {}

    def pacer(self, platform: Platform) -> Pacer:
        """The pacing state of ``platform`` (created from its limits on first use)."""
        # a platform seen under another ledger key (a reader's follow messages) names the
        # platform whose budget it shares
        name = getattr(platform, "paced_as", platform.name)
        pacer = self._pacers.get(name)
        if pacer is None:
            pacer = self._pacers[name] = Pacer(platform.limits, now=self.clock.monotonic())
        return pacer

    async def deliver(
        self,
        ref: IssueRef,
        platform: Platform,
        messages: Sequence[Message],
        targets: Sequence[Target],
        *,
        force: bool = False,
        progress: ProgressCallback | None = None,
        variant: str = FULL_VARIANT,
        title: str | None = None,
    ) -> DeliveryReport:
        """Send ``messages`` (the rendered parts of ``ref``, in order) to every target.

        ``variant`` names the format ``messages`` are in (``"full"``: the channels'; a
        subscriber's ``"compact"``…): the ledger records it with the rows and the digests of
        each variant of a delivery, so a correction edits each message in its own format.

        Only parts the ledger lacks are sent (``force``: all of them, as a new generation).
        Each part is committed in flight before its send and sent after it. Parts keep their
        order per target. A target's failure never stops another: transient errors retry with
        backoff, a 429 defers that target only, ``TargetGone`` deactivates it, ``TargetMoved``
        follows the move, ``Rejected`` fails the part; after a failed part, that target's later
        parts are skipped (marked failed) so a rerun sends them in order. A part another
        delivery claimed first is left to it, with the rest of that target's parts.

        Nothing transient is given up: a part whose attempts ran out on transient errors, or
        whose target asks for a wait longer than ``max_wait``, is left pending (of unknown
        outcome if a cut attempt may have sent it) with the reason and the time it is due
        (:func:`~digest_core.delivery.reports.due_of` reads it back), its later parts pending
        behind it; the report counts them ``waiting`` and the next delivery sends them.

        On a platform with threads (:class:`~digest_core.platform.Threads`), a target that
        gets a thread per post has it opened by part 0, named ``title`` (default: the date),
        once however the delivery is cut and resumed (:mod:`digest_core.delivery.threads`);
        its later parts go into it.

        Raises:
            ValueError: ``messages`` is empty or a target is on another platform.
            DeliveryBusy: another process holds this platform's delivery lease.
            sqlalchemy.exc.SQLAlchemyError: the ledger failed; nothing more is sent.
        """
        if not messages:
            raise ValueError("nothing to deliver: no messages")
        async with self.holding_lease(platform.name):
            started = self.clock.monotonic()
            with frozen_heap():
                report = await self._deliver(
                    ref, platform, messages, targets, force, progress, variant, title
                )
            self.metrics.delivery(
                platform.name,
                self.clock.monotonic() - started,
                ok=report.ok,
                at=self.clock.now(),
            )
            return report

    @contextlib.asynccontextmanager
    async def holding_lease(self, platform: str) -> AsyncIterator[None]:
        """Hold ``platform``'s delivery lease while the block runs (renewed every
        ``lease_ttl``/3 seconds), released after it: a post's, or a correction's.

        Raises:
            DeliveryBusy: another process holds it.
        """
        name = delivery_lease(platform)
        lease = await self.ledger.acquire_lease(name, ttl=self.lease_ttl)
        if lease.owner != self.ledger.owner:
            raise DeliveryBusy(platform, holder=lease.owner, expires_at=lease.expires_at)
        renewer = asyncio.create_task(self._renew(name), name=f"renew {name}")
        try:
            yield
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            await self.ledger.release_lease(name)

    async def _renew(self, name: str) -> None:
        while True:
            await self.clock.sleep(self.lease_ttl / 3)
            try:
                held = await self.ledger.renew_lease(name, ttl=self.lease_ttl)
            except Exception:  # the next renewal may work; the claims stay conditional
                log.exception("could not renew lease %s", name)
                continue
            if not held:
                log.error("lost lease %s: another process took it over", name)
                return

    async def _deliver(
        self,
        ref: IssueRef,
        platform: Platform,
        messages: Sequence[Message],
        targets: Sequence[Target],
        force: bool,
        progress: ProgressCallback | None,
        variant: str = FULL_VARIANT,
        title: str | None = None,
    ) -> DeliveryReport:
        plan = await self.ledger.plan(
            ref, platform.name, targets, len(messages), force=force, variant=variant
        )
        # what each part shows, so a correction edits only the messages that change
        await self.ledger.record_digests(
            plan.delivery_id, [m.digest for m in messages], variant=variant
        )
        await self._honour_waits(ref, platform)
        with log_fields(
            delivery_id=plan.delivery_id, platform=platform.name, issue_date=str(ref.date)
        ):
            threading = await Threading.of(
                self.ledger, platform, plan.delivery_id, title or ref.date.isoformat()
            )
            return await self._run_plan(plan, ref, platform, messages, progress, threading)

    async def _honour_waits(self, ref: IssueRef, platform: Platform) -> None:
        """Targets an earlier delivery left waiting (a long 429, perhaps in another process:
        the due time is in the ledger) are not asked again before they are due."""
        rows = await self.ledger.waiting(ref.date, platform=platform.name, limit=10_000)
        pacer = self.pacer(platform)
        now, mono = self.clock.now(), self.clock.monotonic()
        seen: set[str] = set()
        for row in rows:  # newest first: a target's latest wait decides
            due = due_of(row.last_error)
            if due is None or row.target in seen:
                continue
            seen.add(row.target)
            target = Target(platform.name, row.target, row.kind)
            pacer.wait_until(target, mono + (due - now).total_seconds())

    async def _run_plan(
        self,
        plan: Plan,
        ref: IssueRef,
        platform: Platform,
        messages: Sequence[Message],
        progress: ProgressCallback | None,
        threading: Threading | None = None,
    ) -> DeliveryReport:
        reports: list[TargetReport] = []
        runs: list[TargetRun] = []
        for i, tp in enumerate(plan.target_plans()):
            if i % YIELD_EVERY == 0:
                refreeze()  # what is built here lives as long as the delivery
                await asyncio.sleep(0)  # 100k subscribers must not stall the loop
            told = TargetReport(
                tp.requested,
                already_sent=tp.already_sent,
                in_progress=tp.in_progress,
                sent_revision=tp.sent_revision,
            )
            reports.append(told)
            if tp.rows:
                todo = tp.parts  # the plan's own tuples: not copied
                uncertain = {p.id for p in todo if p.state in MAYBE_SENT} or None
                runs.append(TargetRun(i, tp.target, todo, told, uncertain=uncertain))
        delivery_id, generation, inactive = plan.delivery_id, plan.generation, plan.inactive
        del plan  # its entries are copied into the runs: 100k targets' worth of tuples
        resumed = sum(len(r.uncertain or ()) for r in runs)
        log.info(
            "%s %s rev %s generation %d: %d parts to %d targets (%d may have arrived)",
            platform.name,
            ref.date,
            ref.revision,
            generation,
            sum(len(r.parts) for r in runs),
            len(runs),
            resumed,
        )
        key = functools.partial(PartKey, ref.date, ref.revision, generation)
        fanout = Fanout(self, platform, messages, progress, key, threading)
        await fanout.run(runs)
        for reason, (waiting, parts, due) in fanout.waits.items():
            # one line per reason, however many targets (an outage is not 150 tracebacks)
            log.warning(
                "%s %s: %d part(s) to %d target(s) wait (first due %s): %s",
                platform.name,
                ref.date,
                parts,
                waiting,
                f"{due:%H:%M:%S %Z}",
                reason,
            )
        for _ in fanout.pacer.forget_idle_steps(self.clock.monotonic()):
            await asyncio.sleep(0)
        del fanout
        # dropped in slices, and before the heap is given back to the collector: freeing
        # 100k targets' runs at once held the loop for a few hundred ms
        while runs:
            del runs[-YIELD_EVERY:]
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        report = await DeliveryReport(
            ref, platform.name, delivery_id, generation, reports, list(inactive)
        ).tally(YIELD_EVERY)
        log.info(
            "%s %s: sent %d (%d possibly twice), failed %d, gone %d, outcome unknown %d, "
            "waiting %d",
            platform.name,
            ref.date,
            report.sent,
            report.maybe_twice,
            report.failed,
            len(report.gone),
            report.unknown,
            report.waiting,
        )
        return report


def _whole_second(at: dt.datetime) -> dt.datetime:
    """``at`` rounded up to a whole second (as the ledger records a due time)."""
    whole = at.replace(microsecond=0)
    return whole if whole == at else whole + dt.timedelta(seconds=1)


class _Alarm:
    """A timer on the clock that can be moved or cancelled without waking anyone: calls
    ``callback`` once the seconds it was last :meth:`set` to have passed.

    On the real clock (one whose ``sleep`` is :meth:`SystemClock.sleep`, ``asyncio.sleep``)
    it is one of the event loop's timers; on any other clock (a test's virtual one) a task
    sleeping on it, cancelled when the alarm moves."""

    __slots__ = ("_callback", "_clock", "_deadline", "_handle", "_loop_timers")

    def __init__(self, clock: Clock, callback: Callable[[], None]) -> None:
        self._clock = clock
        self._callback = callback
        self._loop_timers = getattr(type(clock), "sleep", None) is SystemClock.sleep
        self._handle: asyncio.TimerHandle | asyncio.Future[None] | None = None
        #: the clock time it rings at (while set)
        self._deadline = 0.0

    def set(self, seconds: float) -> None:
        """Ring once ``seconds`` have passed (instead of when it was set to)."""
        deadline = self._clock.monotonic() + seconds
        handle = self._handle
        if handle is not None and not (isinstance(handle, asyncio.Future) and handle.done()):
            if abs(deadline - self._deadline) <= _SAME_TIME:
                return  # (kept: a task sleeping on the clock is not replaced for nothing)
            handle.cancel()
        self._deadline = deadline
        if self._loop_timers:
            self._handle = asyncio.get_running_loop().call_later(seconds, self._ring)
        else:
            self._handle = asyncio.ensure_future(self._clock.sleep(seconds))
            self._handle.add_done_callback(self._rang)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _ring(self) -> None:
        self._handle = None
        self._callback()

    def _rang(self, sleep: asyncio.Future[None]) -> None:
        if sleep is self._handle and not sleep.cancelled():
            self._ring()


#: deadlines closer than this are the same time (recomputed from the same bucket they differ
#: by float rounding)
_SAME_TIME = 1e-6


class Fanout:
    """One delivery's scheduler (a post's, or a correction's through a platform that edits):
    a heap of waiting targets (by ready time) and the ready ones taken in request order (so
    each target gets its parts together), feeding at most ``max_in_flight`` sends at once at
    the overall bucket's pace. Only the scheduler sleeps.

    Each send runs in a sender task that, once its send is over, waits for the scheduler to
    hand it the next one: a new task is started only when no sender is free, so there are at
    most ``max_in_flight`` of them (a task per send, its start, registration and end, was
    about a tenth of a delivery's CPU at 100k subscribers)."""

    def __init__(
        self,
        engine: DeliveryEngine,
        platform: Platform,
        messages: Sequence[Message],
        progress: ProgressCallback | None,
        key: Callable[[Target, int], PartKey],
        threading: Threading | None = None,
    ) -> None:
        """``threading``: the delivery's threads, on a platform with threads."""
        self._engine = engine
        self._ledger = engine.ledger
        self._clock = engine.clock
        self._platform = platform
        self._messages = messages
        self._progress = progress
        self._key = key
        self._threading = threading
        self.pacer = engine.pacer(platform)
        self._waiting: list[tuple[float, int, TargetRun]] = []
        #: the ready targets: those pushed in request order after the last one here (at the
        #: start, every target: a heap of 100k was most of the scheduler's time), and a heap
        #: of the others (a target's next part); the next is the first of either
        self._fresh: collections.deque[TargetRun] = collections.deque()
        self._ready: list[tuple[int, TargetRun]] = []
        self._active = 0
        self._started = 0
        #: senders free for another send: each waits for its future's result (None: the
        #: delivery is done)
        self._free: list[asyncio.Future[TargetRun | None]] = []
        #: what the dispatcher waits on while it waits (see :meth:`_nap`): a send's end, a
        #: failed record or its alarm settles it
        self._waker: asyncio.Future[None] | None = None
        self._alarm = _Alarm(self._clock, self._ring)
        #: the dispatcher waits for the overall bucket's next turn (see :meth:`_take_at_end`)
        self._turn_nap = False
        #: how early a send's end may take the next send's turn of the overall bucket (see
        #: :meth:`_take_at_end`): one clump of turns of the send window (one turn without one)
        self._early = self.pacer.take_ahead
        #: records of sends not yet committed (a sender does not wait for its own: see
        #: ``Ledger.mark_sent_soon``), by the future of the writer's batch they settle with;
        #: and the first of them that failed
        self._unsettled: dict[asyncio.Future[Any], list[Recorded]] = {}
        self._broken: BaseException | None = None
        #: why targets were left waiting: reason -> (targets, parts, first due)
        self.waits: dict[str, tuple[int, int, dt.datetime]] = {}

    async def run(self, runs: list[TargetRun]) -> None:
        """Send every run's parts; returns once each send's record is committed.

        Raises:
            LedgerLost, LedgerError: the ledger failed (nothing more is sent).
        """
        now = self._clock.monotonic()
        for i, run in enumerate(runs):
            if i % YIELD_EVERY == 0:
                refreeze()
                await asyncio.sleep(0)
            self._push(run, now)
        try:
            try:
                async with asyncio.TaskGroup() as tasks:
                    await self._dispatch(tasks)
            finally:
                if self._unsettled:
                    for records in self._unsettled.values():
                        records[0].hurry()  # (the writer holds them for company otherwise)
                    await asyncio.wait(self._unsettled)
        except ExceptionGroup as group:
            # a ledger failure: surface the first cause, not the group wrapper
            raise group.exceptions[0] from group
        if self._broken is not None:
            raise self._broken

    def _settled(self, done: asyncio.Future[Any]) -> None:
        for recorded in self._unsettled.pop(done, ()):
            if recorded.error is not None and self._broken is None:
                self._broken = recorded.error
                self._ring()

    async def _dispatch(self, tasks: asyncio.TaskGroup) -> None:
        clock, pacer = self._clock, self.pacer
        try:
            while self._waiting or self._fresh or self._ready or self._active:
                if self._broken is not None:
                    raise self._broken
                now = clock.monotonic()
                self._promote(now)
                if not (self._fresh or self._ready):
                    # a send's end may push its target's next part before the first waiting
                    await self._nap(self._waiting[0][0] - now if self._waiting else None)
                    continue
                if self._active >= self._engine.max_in_flight:
                    await self._nap(None)
                    continue
                delay = pacer.overall_delay(now)
                if delay > 0:
                    # (a send's end may take that turn: see _take_at_end)
                    await self._nap(delay, turn=True)
                    continue
                run = self._take(now)
                while self._free:
                    turn = self._free.pop()
                    if not turn.done():  # (a sender cancelled meanwhile is gone)
                        turn.set_result(run)
                        break
                else:
                    tasks.create_task(self._sender(run))
        finally:
            self._alarm.cancel()
        # nothing is left to send: the free senders end
        for turn in self._free:
            if not turn.done():
                turn.set_result(None)
        self._free.clear()

    def _take(self, now: float) -> TargetRun:
        """The next ready target (there is one), its send started: counted in flight and
        against the pacing."""
        run = self._next_ready()
        self.pacer.take(run.target, now)
        self._active += 1
        self._started += 1
        if self._started % YIELD_EVERY == 0:
            refreeze()  # the pacer's per-target state, kept for the delivery
        return run

    def _take_at_end(self) -> TargetRun | None:
        """At the end of a send, the next send for the same sender to start at once, if one
        may start now or within ``Pacer.take_ahead`` of the overall bucket's turn (a turn
        taken early, not an extra one: the bucket is in debt by at most one clump of the
        send window, and the send itself waits for its platform-wide turn as every send
        does). So its claim shares the transaction of the record of the send that just
        ended, and the dispatcher is not woken for it (its alarm for that turn is moved to
        the next): at a paced rate a transaction and two wake-ups less per message. The
        sends of one clump end together, so each takes its next at once, and their records
        and claims share one transaction. None: this sender is free; the dispatcher is
        woken."""
        if self._broken is None and (self._fresh or self._ready or self._waiting):
            now = self._clock.monotonic()
            self._promote(now)
            if (self._fresh or self._ready) and self.pacer.overall_delay(now) <= self._early:
                self._active -= 1  # (the ending send's place: see _take)
                run = self._take(now)
                if self._turn_nap:  # its turn was taken: the dispatcher waits for the next
                    self._alarm.set(self.pacer.overall_delay(now))
                else:
                    self._ring()
                return run
        self._active -= 1
        self._ring()
        return None

    def _ring(self) -> None:
        """Wake the dispatcher if it waits (see :meth:`_nap`)."""
        waker = self._waker
        if waker is not None and not waker.done():
            waker.set_result(None)

    async def _nap(self, seconds: float | None, *, turn: bool = False) -> None:
        """Wait until ``seconds`` pass (None: no time), a send ends or a record fails;
        ``turn``: for the overall bucket's next turn. The alarm is kept for the next nap if
        it rings at the same time, and moved otherwise, never left to wake the loop for a
        time that passed (at a paced rate the turn is mostly taken by a send's end)."""
        self._waker = asyncio.get_running_loop().create_future()
        self._turn_nap = turn
        if seconds is None:
            self._alarm.cancel()
        else:
            self._alarm.set(seconds)
        try:
            await self._waker
        finally:
            self._waker = None
            self._turn_nap = False

    def _push(self, run: TargetRun, now: float) -> None:
        at = self.pacer.ready_at(run.target, now)
        if at - now > self._engine.max_wait:
            # deferred past what a delivery waits (another delivery's long 429): its rows
            # stay as they are, for the delivery after that time
            due = _whole_second(self._clock.now() + dt.timedelta(seconds=at - now))
            row = run.parts[run.pos]
            self._waited("asked to wait by an earlier answer", len(run.parts) - run.pos, due)
            run.report.waiting += len(run.parts) - run.pos
            run.report.due = due if run.report.due is None else min(run.report.due, due)
            run.report.errors += (
                f"part {row.part}: {waiting_error('the platform asked to wait', due)}",
            )
            return
        if at <= now:
            if not self._fresh or self._fresh[-1].order < run.order:
                self._fresh.append(run)  # (still in request order)
            else:
                heapq.heappush(self._ready, (run.order, run))
        else:
            heapq.heappush(self._waiting, (at, run.order, run))

    def _next_ready(self) -> TargetRun:
        """The ready target first in request order (there is one)."""
        fresh, ready = self._fresh, self._ready
        if fresh and (not ready or fresh[0].order < ready[0][0]):
            return fresh.popleft()
        return heapq.heappop(ready)[1]

    def _waited(self, reason: str, parts: int, due: dt.datetime) -> None:
        """Count a target left waiting under ``reason`` (logged once per reason)."""
        targets, total, first = self.waits.get(reason, (0, 0, due))
        self.waits[reason] = (targets + 1, total + parts, min(first, due))

    def _promote(self, now: float) -> None:
        while self._waiting and self._waiting[0][0] <= now:
            _, _, run = heapq.heappop(self._waiting)
            self._push(run, now)  # re-checked: another delivery may have deferred the target

    async def _sender(self, run: TargetRun | None) -> None:
        """Send ``run``'s current part, then the next one if it may start at once (see
        :meth:`_take_at_end`), else each one the scheduler hands this sender next, until it
        hands it None."""
        loop = asyncio.get_running_loop()
        while run is not None:
            try:
                await self._attempt(run)
            except BaseException:
                self._active -= 1
                self._ring()
                raise
            run = self._take_at_end()
            if run is None:
                turn: asyncio.Future[TargetRun | None] = loop.create_future()
                self._free.append(turn)
                run = await turn

    async def _attempt(self, run: TargetRun) -> None:
        row = run.parts[run.pos]
        target = run.target
        resumed = row.attempts if row.state is PartState.IN_FLIGHT else None
        if run.was_claimed(row.id):
            resumed = None  # released by this run since: pending
        # the part before is recorded sent first, or with the claim (a failure stops it)
        recorded, run.recorded = run.recorded, None
        if not await self._ledger.claim(row.id, resumed_attempts=resumed, after=recorded):
            # another delivery has it: it sends this target's later parts too, in order
            left = len(run.parts) - run.pos
            log.info("%s: part %d is being sent by another delivery", target, row.part)
            run.report.in_progress += left
            return
        run.mark_claimed(row.id)
        # paced again as it goes: the ledger may have held it past its slot (see Pacer)
        now = self._clock.monotonic()
        slot = self.pacer.send_slot(now)
        if not slot.begin_if_due(now):
            await slot.wait(self._clock)
        run.attempts += 1
        key = self._key(target, row.part)  # the row's identity: the same after a restart
        try:
            # part 0 of a threaded target: the intent to open its thread, recorded first
            step = (
                None if self._threading is None else await self._threading.prepare(target, row.part)
            )
        except BaseException:
            slot.done(self._clock.monotonic())  # later turns wait for this one's end
            raise
        try:
            try:
                message_id = await self._send_part(target, row.part, key, step)
            finally:
                slot.done(self._clock.monotonic())  # its answer is back: the window moves on
        except asyncio.CancelledError:
            self._ledger.abandon(row.id)  # the send may have happened: like a crash
            raise
        except RateLimited as exc:
            self._engine.metrics.rate_limited(self._platform.name)
            self.pacer.defer(target, self._clock.monotonic() + exc.retry_after)
            if exc.retry_after > self._engine.max_wait:
                await self._wait(run, row, exc, exc.retry_after)
                return
            log.info("%s: rate limited, retry after %.1f s", target, exc.retry_after)
            await self._retry(run, row, exc, backoff=False)
        except OutcomeUnknown as exc:
            log.warning("%s part %d: outcome unknown, will send again: %s", target, row.part, exc)
            run.mark_uncertain(row.id)
            await self._retry(run, row, exc, backoff=True)
        except TransientError as exc:
            await self._retry(run, row, exc, backoff=True)
        except TargetGone as exc:
            await self._gone(run, exc)
        except TargetMoved as exc:
            await self._moved(run, row, exc)
        except DeliveryError as exc:  # Rejected, or an adapter's bare DeliveryError
            await self._fail(run, row, exc)
        except Exception as exc:
            log.exception("%s: %s.send broke its contract", target, self._platform.name)
            await self._fail(run, row, exc)
        else:
            if isinstance(message_id, Opened):
                assert step is not None and self._threading is not None
                message_id = await self._threading.settle(step, message_id)
            self._sent(run, row, message_id)

    async def _send_part(
        self, target: Target, part: int, key: PartKey, step: Step | None
    ) -> str | Opened:
        """Part ``part`` sent to ``target``: part 0 of a threaded target opens (or finds) its
        thread (``step``), a later part goes into it."""
        message = self._messages[part]
        if self._threading is None:
            return await self._platform.send(target, message, key=key)
        if step is not None:
            return await self._threading.open(step, message, key)
        return await self._platform.send(self._threading.placed(target, part), message, key=key)

    def _sent(self, run: TargetRun, row: PlannedPart, message_id: str) -> None:
        """``row`` went out as ``message_id``: recorded soon, the target's next part pushed."""
        target = run.target
        # the record is committed with the next batch; the slot is free for the next send
        recorded = self._ledger.mark_sent_soon(
            row.id, message_id, linger=self._platform.limits.idempotent_creates
        )
        if (mine := self._unsettled.get(recorded.done)) is None:
            # the first of this fan-out's records in the writer's batch
            self._unsettled[recorded.done] = mine = []
            recorded.done.add_done_callback(self._settled)
        mine.append(recorded)
        self._engine.metrics.part(self._platform.name, metrics.SENT)
        run.report.sent += 1
        if run.is_uncertain(row.id):
            run.report.maybe_twice += 1
        self._tell(target, row.part, PartState.SENT, message_id=message_id)
        run.pos += 1
        run.attempts = 0
        if run.pos < len(run.parts):
            if not recorded.done.done():
                run.recorded = recorded
            self._push(run, self._clock.monotonic())

    async def _retry(
        self, run: TargetRun, row: PlannedPart, exc: Exception, *, backoff: bool
    ) -> None:
        policy = self._engine.backoff
        if run.attempts >= policy.max_attempts:
            # never given up: left waiting for the next delivery (a running bot's resume)
            # (due after the base wait: the resumer's own backoff spaces the next tries)
            await self._wait(run, row, exc, policy.base, note=f" (after {run.attempts} attempts)")
            return
        if run.is_uncertain(row.id):
            await self._ledger.mark_unknown(row.id, f"{type(exc).__name__}: {exc}")
        else:
            await self._ledger.release(row.id, str(exc))
        self._engine.metrics.part(self._platform.name, metrics.RETRIED)
        now = self._clock.monotonic()
        if backoff:
            wait = policy.delay(run.attempts, self._engine.rng)
            log.debug("%s: %s; retry %d in %.2f s", run.target, exc, run.attempts, wait)
            self.pacer.defer(run.target, now + wait)
        self._push(run, now)

    async def _fail(
        self, run: TargetRun, row: PlannedPart, exc: Exception, *, note: str = ""
    ) -> None:
        error = f"{type(exc).__name__}: {exc}{note}"
        log.warning("%s part %d failed: %s", run.target, row.part, error)
        await self._end(run, row, error, PartState.FAILED, self._ledger.mark_failed, "failed")
        self._engine.metrics.part(self._platform.name, metrics.FAILED)
        run.report.failed += 1

    async def _wait(
        self, run: TargetRun, row: PlannedPart, exc: Exception, wait: float, *, note: str = ""
    ) -> None:
        """``row`` is left for a later delivery, due in ``wait`` seconds: pending, or UNKNOWN
        when an attempt may have sent it (never "not sent"); the target's later parts stay
        pending behind it (in order), and the delivery goes on without this target."""
        due = _whole_second(self._clock.now() + dt.timedelta(seconds=wait))
        uncertain = run.is_uncertain(row.id)
        why = f"{type(exc).__name__}: {exc}{note}" + ("; outcome unknown" if uncertain else "")
        error = waiting_error(why, due)
        left = len(run.parts) - run.pos
        log.debug(
            "%s: %d part(s) from part %d wait until %s: %s", run.target, left, row.part, due, why
        )
        detail = exc.detail if isinstance(exc, DeliveryError) else str(exc)
        self._waited(f"{type(exc).__name__}: {detail}{note}", left, due)
        if uncertain:
            await self._ledger.mark_unknown(row.id, error)
            self._engine.metrics.part(self._platform.name, metrics.UNKNOWN)
            run.report.unknown += 1
        else:
            await self._ledger.release(row.id, error)
            self._engine.metrics.part(self._platform.name, metrics.RETRIED)
        run.report.waiting += left
        run.report.due = due if run.report.due is None else min(run.report.due, due)
        run.report.errors += (f"part {row.part}: {error}",)

    async def _end(
        self,
        run: TargetRun,
        row: PlannedPart,
        error: str,
        state: PartState,
        mark: Callable[[int, str], Awaitable[None]],
        why: str,
    ) -> None:
        """``row`` ends in ``state`` (recorded by ``mark``); the target's later parts are
        skipped, since part k+1 is sent only after part k."""
        later = run.parts[run.pos + 1 :]
        skip = f"skipped: part {row.part} {why}"
        await asyncio.gather(mark(row.id, error), *(self._ledger.skip(p.id, skip) for p in later))
        run.report.skipped += len(later)
        run.report.errors += (f"part {row.part}: {error}",)
        self._tell(run.target, row.part, state, error=error)
        for p in later:
            self._tell(run.target, p.part, PartState.FAILED, error=skip)

    async def _gone(self, run: TargetRun, exc: TargetGone) -> None:
        remaining = run.parts[run.pos :]
        error = f"{type(exc).__name__}: {exc}"
        await self._ledger.mark_gone(run.target, row_ids=[p.id for p in remaining], reason=error)
        run.report.gone = True
        self._engine.metrics.part(self._platform.name, metrics.GONE)
        run.report.errors += (error,)
        for p in remaining:
            self._tell(run.target, p.part, PartState.GONE, error=error)

    async def _moved(self, run: TargetRun, row: PlannedPart, exc: TargetMoved) -> None:
        new = Target(run.target.platform, exc.new_target, run.target.kind)
        run.moves += 1
        self._engine.metrics.part(self._platform.name, metrics.MOVED)
        if new == run.target or run.moves > self._engine.max_moves:
            await self._fail(run, row, exc, note=f" (move {run.moves})")
            return
        await self._ledger.release(row.id, str(exc))
        remaining = run.parts[run.pos :]
        kept = set(
            await self._ledger.move_target(
                run.target, new, row_ids=[p.id for p in remaining], reason=str(exc)
            )
        )
        log.info("%s moved to %s; resending %d parts there", run.target, new.id, len(kept))
        run.parts = [*run.parts[: run.pos], *(p for p in remaining if p.id in kept)]
        run.target = new
        run.report.moved_to = new.id
        run.attempts = 0
        if run.pos < len(run.parts):
            self._push(run, self._clock.monotonic())

    def _tell(
        self,
        target: Target,
        part: int,
        state: PartState,
        *,
        message_id: str | None = None,
        error: str | None = None,
    ) -> None:
        if self._progress is not None:
            self._progress(PartOutcome(target, part, state, message_id, error))
