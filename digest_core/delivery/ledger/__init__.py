"""The delivery ledger (what was sent where), subscribers and the audit log: SQLAlchemy 2 async.

One module per job: :mod:`.schema` (tables, states), :mod:`.migrate` (Alembic upgrades of
the schema, revisions in ``migrations/``), :mod:`.records` (what it returns), :mod:`.engine`
(engine factory, open errors), :mod:`.core` (state, lifecycle, transactions, retries),
:mod:`.writer` (group commit), :mod:`.planning` (SQL I/O of :meth:`Ledger.plan`) around
:mod:`.classify` (the pure per-target decision), :mod:`.leases`, :mod:`.targets`,
:mod:`.subscribers`, :mod:`.audit`, :mod:`.queries`, :mod:`.corrections`.

:class:`Ledger` stays one class composed of mixins, each a subclass of :class:`.core.LedgerBase`:
callers keep one object with one lock, one writer and one set of live rows (which planning,
the writer and target moves all share), and mypy --strict checks every mixin against the
base's attributes; collaborators would have to pass that shared state around instead.
"""

from __future__ import annotations

from digest_core.delivery.ledger.audit import AuditMixin
from digest_core.delivery.ledger.corrections import (
    Action,
    CorrectionPlan,
    CorrectionRow,
    CorrectionsMixin,
)
from digest_core.delivery.ledger.engine import _create_engine
from digest_core.delivery.ledger.leases import LeasesMixin
from digest_core.delivery.ledger.planning import _PLAN_BATCH, PlanningMixin
from digest_core.delivery.ledger.queries import QueriesMixin
from digest_core.delivery.ledger.readers import ReadersMixin
from digest_core.delivery.ledger.records import (
    AuditEntry,
    DeliveryRecord,
    InactiveTarget,
    Lease,
    LedgerStats,
    PartRecord,
    Plan,
    PlannedPart,
    TargetPlan,
    delivery_lease,
)
from digest_core.delivery.ledger.retention import DaySummary, PruneReport, RetentionMixin
from digest_core.delivery.ledger.schema import (
    CONFIG_KEY,
    DEFAULT_LEASE_TTL,
    DEFAULT_LEDGER_URL,
    FULL_VARIANT,
    MAYBE_SENT,
    SCHEMA_VERSION,
    DayState,
    PartState,
    audit,
    day_summaries,
    deliveries,
    leases,
    ledger_identity,
    metadata,
    part_digests,
    parts,
    schema_version,
    subscribers,
    targets,
)
from digest_core.delivery.ledger.subscribers import SubscribersMixin
from digest_core.delivery.ledger.targets import TargetsMixin
from digest_core.delivery.ledger.writer import WriterMixin

__all__ = [
    "CONFIG_KEY",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_LEDGER_URL",
    "FULL_VARIANT",
    "MAYBE_SENT",
    "SCHEMA_VERSION",
    "_PLAN_BATCH",
    "Action",
    "AuditEntry",
    "CorrectionPlan",
    "CorrectionRow",
    "DayState",
    "DaySummary",
    "DeliveryRecord",
    "InactiveTarget",
    "Lease",
    "Ledger",
    "LedgerStats",
    "PartRecord",
    "PartState",
    "Plan",
    "PlannedPart",
    "PruneReport",
    "TargetPlan",
    "_create_engine",
    "audit",
    "day_summaries",
    "deliveries",
    "delivery_lease",
    "leases",
    "ledger_identity",
    "metadata",
    "part_digests",
    "parts",
    "schema_version",
    "subscribers",
    "targets",
]


class Ledger(
    PlanningMixin,
    WriterMixin,
    TargetsMixin,
    LeasesMixin,
    SubscribersMixin,
    ReadersMixin,
    AuditMixin,
    QueriesMixin,
    RetentionMixin,
    CorrectionsMixin,
):
    """The delivery ledger, subscribers and audit log in one SQL database.

    Open it with ``async with Ledger.open(url, clock=...) as ledger``; the schema is created (or
    migrated) on open. Per-part state changes (:meth:`claim`, :meth:`mark_sent`, …) go through a
    group-commit writer: each call returns once its change is committed, and changes that arrive
    while a transaction runs share the next one, so many concurrent sends cost few transactions.

    Several deliveries may share a database, in one process or many: :meth:`claim` is
    conditional, so a part is sent by one of them only, and :class:`DeliveryEngine` holds a
    lease per platform (:meth:`acquire_lease`) so a second process is refused while the first
    delivers. Each instance is one lease :attr:`owner`; rows it has in flight are live, and rows
    in flight that no live delivery owns are taken for a crashed run's and sent again.
    """
