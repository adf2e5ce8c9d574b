"""The plain records the ledger returns: plans, part and delivery records, leases, audit entries."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import (
    Iterator,
)
from dataclasses import dataclass
from typing import Any, NamedTuple

from digest_core.delivery.ledger.schema import (
    PartState,
)
from digest_core.models import IssueRef
from digest_core.platform import Target, TargetKind

__all__ = [
    "AuditEntry",
    "DeliveryRecord",
    "InactiveTarget",
    "Lease",
    "LedgerStats",
    "PartRecord",
    "Plan",
    "PlanEntry",
    "PlannedPart",
    "TargetPlan",
    "delivery_lease",
]

log = logging.getLogger(__name__)


def delivery_lease(platform: str) -> str:
    """The name of the lease a delivery on ``platform`` holds."""
    return f"deliver:{platform}"


class PlannedPart(NamedTuple):
    """One ledger row a delivery still has to send (a named tuple: a plan for 100k targets
    holds 200k of them, kept as they are by the runs that send them)."""

    id: int
    part: int
    #: the state found when planning: IN_FLIGHT (a crashed run's) or UNKNOWN (a cut send) mean
    #: it may already have arrived
    state: PartState
    attempts: int


@dataclass(frozen=True, slots=True)
class TargetPlan:
    """What one requested target still needs."""

    requested: Target
    #: ``requested`` after following recorded moves (Telegram group -> supergroup)
    target: Target
    #: the parts to send, in part order (also read as :attr:`parts`)
    rows: tuple[PlannedPart, ...]
    #: parts found sent (at this id or an earlier id of the target)
    already_sent: int
    #: unsent parts left out because another delivery running now has them in flight
    in_progress: int = 0
    #: set when the target already got (part of) this day's issue under that other revision:
    #: nothing of this revision is planned for it without ``force`` (``already_sent`` counts
    #: the parts it got)
    sent_revision: str | None = None

    @property
    def parts(self) -> tuple[PlannedPart, ...]:
        """The parts to send, in part order."""
        return self.rows


@dataclass(frozen=True)
class Plan:
    """The result of :meth:`Ledger.plan`: the rows to send, per target, in part order."""

    delivery_id: int
    generation: int
    ref: IssueRef
    platform: str
    n_parts: int
    #: one plain tuple per planned target (:data:`PlanEntry`), read as :attr:`targets`: plain
    #: tuples of strings and numbers drop out of the garbage collector's passes, whose cost
    #: grows with every object alive and stalls the loop at 100k targets
    entries: tuple[PlanEntry, ...]
    #: requested targets skipped because they are deactivated (gone)
    inactive: tuple[Target, ...]

    @property
    def targets(self) -> tuple[TargetPlan, ...]:
        """What each requested target still needs, in request order."""
        return tuple(self.target_plans())

    def target_plans(self) -> Iterator[TargetPlan]:
        """:attr:`targets` one at a time (a caller with many targets yields between them)."""
        platform = self.platform
        for req_id, kind, final, rows, already, in_progress, revision in self.entries:
            requested = Target(platform, req_id, TargetKind(kind))
            target = requested if final == req_id else Target(platform, final, requested.kind)
            yield TargetPlan(requested, target, rows, already, in_progress, revision)


#: a planned target as :class:`Plan` keeps it: (requested id, kind, resolved id, rows,
#: already sent, in progress, sent revision), the fields of :class:`TargetPlan`
PlanEntry = tuple[str, str, str, tuple[PlannedPart, ...], int, int, str | None]


@dataclass(frozen=True)
class PartRecord:
    """A ledger row as status queries return it."""

    id: int
    issue_date: dt.date
    revision: str
    platform: str
    generation: int
    target: str
    kind: TargetKind
    part: int
    state: PartState
    message_id: str | None
    attempts: int
    last_error: str | None
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True)
class DeliveryRecord:
    id: int
    issue_date: dt.date
    revision: str
    platform: str
    generation: int
    forced: bool
    parts: int
    created_at: dt.datetime


@dataclass(frozen=True)
class InactiveTarget:
    """A target deactivated because it went away (blocked, kicked, deleted, forbidden)."""

    target: Target
    #: when it was deactivated
    since: dt.datetime
    reason: str | None

    @property
    def id(self) -> str:
        return self.target.id


@dataclass(frozen=True)
class Lease:
    """A lease as it stands: held by ``owner`` until ``expires_at`` (aware UTC, by the
    database's clock), or, when ``expires_at`` is None, for as long as ``owner`` runs (an OS
    lock: the leases of an SQLite ledger, see :mod:`.oslocks`)."""

    name: str
    owner: str
    expires_at: dt.datetime | None


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: dt.datetime
    platform: str
    user_id: str
    action: str
    args: dict[str, Any]
    allowed: bool
    outcome: str


@dataclass
class LedgerStats:
    """Counters for benchmarks and status: how much the ledger wrote."""

    transactions: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0
