"""The delivery ledger (what was sent where), subscribers and the audit log: SQLAlchemy 2 async.

:class:`Ledger` (:mod:`.facade`) is one object over collaborators that share one
:class:`.state.LedgerState` (engine, clock, owner, one transaction at a time, the writer's
queue, the rows in flight here, lease holds, health and retries). Each module lists its
public surface in ``__all__``; one module per line:

- :mod:`.facade`: :class:`Ledger`, whose every method is one of a collaborator's
- :mod:`.state`: the one state the collaborators share, and the writer's queued changes
- :mod:`.core`: opening (identity, migration, file checks), checkpoints, closing
- :mod:`.planning`: the SQL I/O of :meth:`Ledger.plan`, around the decisions of :mod:`.classify`
- :mod:`.classify`: planning's pure decisions: what each target needs, from the rows found
- :mod:`.writer`: the group commit of per-part state changes (batches of :mod:`.driver`)
- :mod:`.driver`: statements the database driver runs itself, with plain tuples
- :mod:`.direct`: the writer's own connection to an SQLite file, through aiosqlite
- :mod:`.corrections`: correction plans, the SQL I/O around the decisions of :mod:`.diffing`
- :mod:`.diffing`: corrections' pure decisions: what a post shows, what each part needs
- :mod:`.leases`: named leases: rows on a server, the locks of :mod:`.oslocks` on a file
- :mod:`.oslocks`: leases as ``flock`` locks beside an SQLite file
- :mod:`.targets`: targets gone (deactivated) or moved
- :mod:`.subscribers`: the private chats that get the daily issue
- :mod:`.preferences`: readers' times, zones, formats, follows and follow checks (``Readers``)
- :mod:`.audit`: the audit log of admin actions
- :mod:`.queries`: status queries (part records, a day's state, deliveries)
- :mod:`.analytics`: the dashboard's bounded reads and counts, on a connection of their own
- :mod:`.retention`: pruning, and the per-day summaries left in place of the rows
- :mod:`.threads`: a thread per issue (the intent, then the thread)
- :mod:`.schema`: every table, declared once; part and day states; small SQL helpers
- :mod:`.records`: the plain records the ledger returns
- :mod:`.engine`: the engine factory, an SQLite URL's file and its checks, open errors
- :mod:`.migrate`: Alembic upgrades at open (or ``digest-bot db upgrade``)
- :mod:`.migrations`: one revision per schema version (``versions/``)
- :mod:`.backup`: SQLite's online backup, or ``pg_dump`` for PostgreSQL
"""

from __future__ import annotations

from digest_core.delivery.ledger.corrections import (
    CorrectionPlan,
    CorrectionRow,
)
from digest_core.delivery.ledger.diffing import CorrectionAction
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
    "AuditEntry",
    "CorrectionAction",
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
