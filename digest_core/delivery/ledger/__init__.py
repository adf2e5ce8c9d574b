"""The delivery ledger (what was sent where), subscribers and the audit log: SQLAlchemy 2 async.

:class:`Ledger` (:mod:`.facade`) is one object over collaborators that share one
:class:`.state.LedgerState` (engine, clock, owner, one transaction at a time, the writer's
queue, the rows in flight here, lease holds, health and retries); each is its own module
with a small public surface: :mod:`.core` (opening, checkpoints, closing), :mod:`.planning`
(the SQL I/O of :meth:`Ledger.plan`) around :mod:`.classify` (its pure decisions),
:mod:`.writer` (group commit), :mod:`.corrections` around :mod:`.diffing` (its pure
decisions), :mod:`.leases` (rows, or the OS locks of :mod:`.oslocks`), :mod:`.targets`,
:mod:`.subscribers`, :mod:`.readers` (preferences, follows and follow checks),
:mod:`.audit`, :mod:`.queries`, :mod:`.retention`, :mod:`.threads` (a thread per issue: the
intent, then the thread). Beside them: :mod:`.schema` (every table,
declared once; states), :mod:`.migrate` (Alembic upgrades, revisions in ``migrations/``),
:mod:`.records` (what it returns), :mod:`.engine` (engine factory, open errors),
:mod:`.backup`.
"""

from __future__ import annotations

from digest_core.delivery.ledger.corrections import (
    CorrectionPlan,
    CorrectionRow,
)
from digest_core.delivery.ledger.diffing import Action
from digest_core.delivery.ledger.facade import Ledger
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
from digest_core.delivery.ledger.retention import DaySummary, PruneReport
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
    threads,
)
from digest_core.delivery.ledger.state import Recorded
from digest_core.delivery.ledger.threads import ThreadRecord

__all__ = [
    "CONFIG_KEY",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_LEDGER_URL",
    "FULL_VARIANT",
    "MAYBE_SENT",
    "SCHEMA_VERSION",
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
    "Recorded",
    "TargetPlan",
    "ThreadRecord",
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
    "threads",
]
