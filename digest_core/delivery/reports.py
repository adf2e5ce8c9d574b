"""What a delivery reports: each part's outcome, each target's parts, the whole delivery."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from digest_core.delivery.ledger import PartState
from digest_core.models import IssueRef
from digest_core.platform import Target

#: how a waiting part's error ends in the ledger: the aware UTC time it is due, so any
#: process (``digest-bot status``, a running bot resuming another's post) can read it
_DUE = re.compile(r"; due at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+00:00)\)?$")


def waiting_error(error: str, due: dt.datetime) -> str:
    """``error`` of a part left pending until ``due`` (aware), as the ledger records it."""
    return f"{error}; due at {due.astimezone(dt.UTC).isoformat(timespec='seconds')}"


def due_of(error: str | None) -> dt.datetime | None:
    """The time a waiting part is due, from its recorded error (None: not a waiting part)."""
    found = _DUE.search(error or "")
    return dt.datetime.fromisoformat(found.group(1)) if found else None


@dataclass(frozen=True)
class PartOutcome:
    """The final outcome of one part at one target, as passed to a progress callback."""

    target: Target
    part: int
    state: PartState
    message_id: str | None = None
    error: str | None = None


#: Called once per part that reaches a final state in this run; it MUST NOT raise or block.
ProgressCallback = Callable[[PartOutcome], None]


@dataclass(slots=True)
class TargetReport:
    """What one delivery did for one requested target."""

    target: Target
    #: sent in this run
    sent: int = 0
    #: found already sent by an earlier run (under ``sent_revision`` if that is set)
    already_sent: int = 0
    failed: int = 0
    #: not attempted because an earlier part failed (their order must hold)
    skipped: int = 0
    gone: bool = False
    moved_to: str | None = None
    #: left to another delivery of this issue running at the same time (it reports them)
    in_progress: int = 0
    #: given up with the outcome unknown (a send was cut after the request may have left):
    #: they may have arrived; recorded ``UNKNOWN``, counted in flight, sent again next time
    unknown: int = 0
    #: left pending (or of unknown outcome) to be sent later: the platform was unreachable
    #: through every attempt, or asked for a wait longer than the delivery waits
    #: (``DeliveryEngine.max_wait``); a running bot resumes them at ``due``
    waiting: int = 0
    #: when the first waiting part is due (aware UTC), None when nothing waits
    due: dt.datetime | None = None
    #: sent in this run after an earlier attempt (or a crashed run) may have sent them: they
    #: may have arrived twice
    maybe_twice: int = 0
    #: the target already had this day's issue under that other revision, so this revision
    #: was not sent there (``force`` sends it)
    sent_revision: str | None = None
    #: why parts failed, oldest first (a tuple: most targets have none, and an empty list
    #: per target is 5.6 MB at 100k subscribers)
    errors: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Nothing failed, was skipped, went away, waits or was left of unknown outcome
        (parts in progress elsewhere are not failures)."""
        return (
            not self.gone
            and self.failed == 0
            and self.skipped == 0
            and self.unknown == 0
            and self.waiting == 0
        )


@dataclass
class DeliveryReport:
    """The outcome of :meth:`DeliveryEngine.deliver`, per target."""

    ref: IssueRef
    platform: str
    delivery_id: int
    generation: int
    targets: list[TargetReport]
    #: requested targets left out because they were deactivated earlier (gone): they got
    #: nothing, so the delivery is not :attr:`ok`; ``Ledger.reactivate`` lets them in again
    inactive: list[Target]

    #: the totals, once :meth:`tally` counted them (None: counted at each question)
    _totals: _Totals | None = field(default=None, repr=False, compare=False)

    async def tally(self, every: int = 500) -> DeliveryReport:
        """Count the totals once, ``every`` targets between two yields to the event loop, and
        answer from them from now on: a delivery to 100k targets asked for six sums of its
        reports in one step (its log line), which held the loop for 50 ms. Called by the
        engine once the delivery is over, when its targets no longer change."""
        totals = _Totals()
        for i, t in enumerate(self.targets):
            if i % every == 0:
                await asyncio.sleep(0)
            totals.add(t)
        self._totals = totals
        return self

    def _count(self) -> _Totals:
        if self._totals is not None:
            return self._totals
        totals = _Totals()
        for t in self.targets:
            totals.add(t)
        return totals

    @property
    def sent(self) -> int:
        return self._count().sent

    @property
    def failed(self) -> int:
        return self._count().failed

    @property
    def gone(self) -> list[Target]:
        return list(self._count().gone)

    @property
    def in_progress(self) -> int:
        return self._count().in_progress

    @property
    def unknown(self) -> int:
        """Parts left of unknown outcome (possible duplicates, sent again next time)."""
        return self._count().unknown

    @property
    def waiting(self) -> int:
        """Parts left to be sent later (see :attr:`TargetReport.waiting`)."""
        return self._count().waiting

    @property
    def due(self) -> dt.datetime | None:
        """When the first waiting part is due (None: nothing waits)."""
        return self._count().due

    @property
    def maybe_twice(self) -> int:
        """Parts sent in this run that an earlier, cut attempt may have sent already."""
        return self._count().maybe_twice

    @property
    def ok(self) -> bool:
        """Every requested target has every part (or this day's issue under another
        revision, or it is being sent by a concurrent delivery); a deactivated one fails it."""
        return not self.inactive and self._count().complete

    def merged(self, other: DeliveryReport) -> DeliveryReport:
        """This report and ``other`` (another run of the same day and platform, to other
        targets, e.g. subscribers getting another part) as one; the generation is the later
        run's (with ``force`` each run starts its own); tallied when both are."""
        both = None
        if self._totals is not None and other._totals is not None:
            both = self._totals.plus(other._totals)
        return DeliveryReport(
            self.ref,
            self.platform,
            other.delivery_id,
            other.generation,
            [*self.targets, *other.targets],
            [*self.inactive, *other.inactive],
            both,
        )


@dataclass
class _Totals:
    """A delivery's reports summed over its targets (see :meth:`DeliveryReport.tally`)."""

    sent: int = 0
    failed: int = 0
    in_progress: int = 0
    unknown: int = 0
    waiting: int = 0
    maybe_twice: int = 0
    complete: bool = True
    due: dt.datetime | None = None
    gone: list[Target] = field(default_factory=list)

    def add(self, t: TargetReport) -> None:
        self.sent += t.sent
        self.failed += t.failed + t.skipped
        self.in_progress += t.in_progress
        self.unknown += t.unknown
        self.waiting += t.waiting
        self.maybe_twice += t.maybe_twice
        self.complete = self.complete and t.complete
        if t.gone:
            self.gone.append(t.target)
        if t.due is not None and (self.due is None or t.due < self.due):
            self.due = t.due

    def plus(self, other: _Totals) -> _Totals:
        """The totals of two reports' targets together."""
        dues = [d for d in (self.due, other.due) if d is not None]
        return _Totals(
            self.sent + other.sent,
            self.failed + other.failed,
            self.in_progress + other.in_progress,
            self.unknown + other.unknown,
            self.waiting + other.waiting,
            self.maybe_twice + other.maybe_twice,
            self.complete and other.complete,
            min(dues, default=None),
            [*self.gone, *other.gone],
        )
