"""Delivery: the ledger of what was sent where, pacing under platform limits, and fan-out.

Typical use::

    async with Ledger.open(settings.database_url, clock=clock) as ledger:
        engine = DeliveryEngine(ledger, clock=clock)
        report = await engine.deliver(issue.ref, platform, messages, targets)

``deliver`` raises :class:`DeliveryBusy` while another process delivers on the platform.
"""

from digest_core.delivery.fanout import DeliveryEngine
from digest_core.delivery.ledger import (
    DEFAULT_LEASE_TTL,
    DEFAULT_LEDGER_URL,
    MAYBE_SENT,
    SCHEMA_VERSION,
    AuditEntry,
    DayState,
    DeliveryRecord,
    InactiveTarget,
    Lease,
    Ledger,
    LedgerStats,
    PartRecord,
    PartState,
    Plan,
    PlannedPart,
    TargetPlan,
    delivery_lease,
)
from digest_core.delivery.pacing import Backoff, Pacer, TokenBucket
from digest_core.delivery.reports import (
    DeliveryReport,
    PartOutcome,
    ProgressCallback,
    TargetReport,
)
from digest_core.errors import DeliveryBusy  # re-exported: raised by DeliveryEngine.deliver

__all__ = [
    "DEFAULT_LEASE_TTL",
    "DEFAULT_LEDGER_URL",
    "MAYBE_SENT",
    "SCHEMA_VERSION",
    "AuditEntry",
    "Backoff",
    "DayState",
    "DeliveryBusy",
    "DeliveryEngine",
    "DeliveryRecord",
    "DeliveryReport",
    "InactiveTarget",
    "Lease",
    "Ledger",
    "LedgerStats",
    "Pacer",
    "PartOutcome",
    "PartRecord",
    "PartState",
    "Plan",
    "PlannedPart",
    "ProgressCallback",
    "TargetPlan",
    "TargetReport",
    "TokenBucket",
    "delivery_lease",
]
