"""Retention: old part rows folded into per-day summaries per target, then deleted in batches."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, case, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.schema import (
    PartState,
    audit,
    day_summaries,
    deliveries,
    narrowed,
    parts,
)
from digest_core.delivery.ledger.state import LedgerState

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_PAUSE",
    "DaySummary",
    "PruneReport",
    "Retention",
    "served_before_pruning",
]

log = logging.getLogger(__name__)

#: part rows per transaction of pruning (a target's rows are never split between two): a
#: state change of a delivery running meanwhile waits for at most one such transaction
DEFAULT_BATCH = 1000
#: seconds between two batches, so the delivery path and commands get the database
DEFAULT_PAUSE = 0.2


@dataclass(frozen=True, slots=True)
class DaySummary:
    """What a target got of one day's issue on one platform, over all its deliveries: parts
    sent, failed, gone, and not sent (pending, in flight or unknown when pruned)."""

    issue_date: dt.date
    platform: str
    target: str
    kind: str
    sent: int
    failed: int
    gone: int
    unsent: int
    attempts: int
    last_sent_at: dt.datetime | None


@dataclass
class PruneReport:
    """What one :meth:`Retention.prune` did."""

    #: (issue date, platform) pairs whose rows were summarised and deleted
    days: list[tuple[dt.date, str]] = field(default_factory=list)
    parts: int = 0
    summaries: int = 0
    audit: int = 0
    batches: int = 0


async def served_before_pruning(
    conn: AsyncConnection, day: dt.date, platform: str, target_ids: Sequence[str]
) -> set[str]:
    """Those of ``target_ids`` that got a part of ``day``'s issue on ``platform`` in a
    delivery whose rows were since pruned (their summary says so)."""
    pruned = exists().where(
        deliveries.c.issue_date == day,
        deliveries.c.platform == platform,
        deliveries.c.pruned_at.is_not(None),
    )
    if not (await conn.execute(select(pruned))).scalar():
        return set()
    found = await conn.execute(
        select(day_summaries.c.target).where(
            day_summaries.c.issue_date == day,
            day_summaries.c.platform == platform,
            day_summaries.c.sent > 0,
            day_summaries.c.target.in_(list(target_ids)),
        )
    )
    return {str(t) for (t,) in found}


def _count(state: PartState) -> Any:
    return func.sum(case((parts.c.state == state.value, 1), else_=0))


class Retention:
    """Prune old part and audit rows; read the per-day summaries left in their place."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    async def prune(
        self,
        *,
        before: dt.date,
        audit_before: dt.datetime,
        batch: int = DEFAULT_BATCH,
        pause: float = DEFAULT_PAUSE,
    ) -> PruneReport:
        """Fold the part rows of deliveries of issues dated before ``before`` into
        ``day_summaries`` (one row per day, platform and target, counts added to any row an
        earlier pruning left) and delete them; delete audit rows older than ``audit_before``.

        A delivery is left alone while any of its rows changed on or after ``before``
        (midnight UTC): a repost of an old issue keeps its rows until it is old too. Each
        transaction handles about ``batch`` part rows (whole targets) or audit rows and
        commits its summaries with the deletion, so a crash loses or counts nothing twice;
        ``pause`` seconds (the ledger's clock) separate transactions. Pruned deliveries get
        ``pruned_at``; :meth:`plan` then treats their summarised targets as served.
        """
        if batch < 1:
            raise ValueError("batch must be at least 1")
        report = PruneReport()
        days = await self._prunable(before)
        for (day, platform), ids in days.items():
            await self._prune_day(day, platform, ids, batch=batch, pause=pause, report=report)
        await self._prune_audit(audit_before, batch=batch, pause=pause, report=report)
        return report

    async def _prunable(self, before: dt.date) -> dict[tuple[dt.date, str], list[int]]:
        """(day, platform) -> the ids of its deliveries to prune, days in order."""
        cutoff = dt.datetime.combine(before, dt.time(), tzinfo=dt.UTC)
        recent = exists().where(
            parts.c.delivery_id == deliveries.c.id, parts.c.updated_at >= cutoff
        )
        async with self.state.tx() as conn:
            found = await conn.execute(
                select(deliveries.c.issue_date, deliveries.c.platform, deliveries.c.id)
                .where(deliveries.c.issue_date < before, ~recent)
                .where(
                    exists().where(parts.c.delivery_id == deliveries.c.id)
                    | deliveries.c.pruned_at.is_(None)
                )
                .order_by(deliveries.c.issue_date, deliveries.c.platform, deliveries.c.id)
            )
            days: dict[tuple[dt.date, str], list[int]] = {}
            for day, platform, d_id in found:
                days.setdefault((day, platform), []).append(int(d_id))
        return days

    async def _prune_day(
        self,
        day: dt.date,
        platform: str,
        ids: list[int],
        *,
        batch: int,
        pause: float,
        report: PruneReport,
    ) -> None:
        """Fold and delete one day's rows on a platform, batch by batch; mark it pruned."""
        while True:
            done, n_summaries = await self._prune_batch(day, platform, ids, batch)
            report.parts += done
            report.summaries += n_summaries
            report.batches += 1
            if not done:
                break
            await self.state.clock.sleep(pause)
        async with self.state.tx() as conn:
            await conn.execute(
                update(deliveries)
                .where(deliveries.c.id.in_(ids))
                .values(pruned_at=self.state.clock.now())
            )
        report.days.append((day, platform))
        log.info("pruned the rows of %s on %s (%d deliveries)", day, platform, len(ids))

    async def _prune_audit(
        self, audit_before: dt.datetime, *, batch: int, pause: float, report: PruneReport
    ) -> None:
        """Delete audit rows older than ``audit_before``, ``batch`` at a time."""
        while True:
            async with self.state.tx() as conn:
                oldest = (
                    select(audit.c.id)
                    .where(audit.c.at < audit_before)
                    .order_by(audit.c.id)
                    .limit(batch)
                )
                gone = (
                    await conn.execute(
                        delete(audit).where(audit.c.id.in_(oldest.scalar_subquery()))
                    )
                ).rowcount
            report.audit += gone
            report.batches += 1
            if gone < batch:
                break
            await self.state.clock.sleep(pause)

    async def _prune_batch(
        self, day: dt.date, platform: str, ids: Sequence[int], batch: int
    ) -> tuple[int, int]:
        """Summarise and delete the rows of the next targets of one day's deliveries, about
        ``batch`` rows (one transaction); returns (rows deleted, summaries written)."""
        async with self.state.tx() as conn:
            chunk = await _next_targets(conn, ids, batch)
            if not chunk:
                return 0, 0
            new = await _summarise(conn, day, platform, ids, chunk)
            await self._merge_summaries(conn, day, platform, new)
            deleted = (
                await conn.execute(
                    delete(parts).where(parts.c.delivery_id.in_(ids), parts.c.target.in_(chunk))
                )
            ).rowcount
        return int(deleted), len(new)

    async def _merge_summaries(
        self, conn: AsyncConnection, day: dt.date, platform: str, new: dict[str, DaySummary]
    ) -> None:
        key = and_(day_summaries.c.issue_date == day, day_summaries.c.platform == platform)
        old = {
            row.target: row
            for row in await conn.execute(
                select(day_summaries).where(key, day_summaries.c.target.in_(list(new)))
            )
        }
        inserts = []
        for target, s in new.items():
            was = old.get(target)
            if was is None:
                inserts.append(
                    {
                        "issue_date": day,
                        "platform": platform,
                        "target": target,
                        "kind": s.kind,
                        "sent": s.sent,
                        "failed": s.failed,
                        "gone": s.gone,
                        "unsent": s.unsent,
                        "attempts": s.attempts,
                        "last_sent_at": s.last_sent_at,
                    }
                )
                continue
            times = [t for t in (was.last_sent_at, s.last_sent_at) if t is not None]
            await conn.execute(
                update(day_summaries)
                .where(key, day_summaries.c.target == target)
                .values(
                    sent=was.sent + s.sent,
                    failed=was.failed + s.failed,
                    gone=was.gone + s.gone,
                    unsent=was.unsent + s.unsent,
                    attempts=was.attempts + s.attempts,
                    last_sent_at=max(times) if times else None,
                )
            )
        if inserts:
            await conn.execute(day_summaries.insert(), inserts)

    async def summaries(
        self,
        *,
        platform: str | None = None,
        target: str | None = None,
        day: dt.date | None = None,
        limit: int | None = None,
    ) -> list[DaySummary]:
        """Per-day summaries left by pruning, newest day first."""
        query = select(day_summaries).order_by(
            day_summaries.c.issue_date.desc(), day_summaries.c.platform, day_summaries.c.target
        )
        query = narrowed(
            query,
            (day_summaries.c.platform, platform),
            (day_summaries.c.target, target),
            (day_summaries.c.issue_date, day),
            limit=limit,
        )
        async with self.state.tx() as conn:
            return [
                DaySummary(
                    r.issue_date,
                    r.platform,
                    r.target,
                    r.kind,
                    r.sent,
                    r.failed,
                    r.gone,
                    r.unsent,
                    r.attempts,
                    r.last_sent_at,
                )
                for r in await conn.execute(query)
            ]

    async def last_summarised(self, platform: str, target: str) -> DaySummary | None:
        """The latest pruned day on which ``target`` got a part (status falls back on it
        when no row of the last ``keep_days`` names the target)."""
        async with self.state.tx() as conn:
            row = (
                await conn.execute(
                    select(day_summaries)
                    .where(
                        day_summaries.c.platform == platform,
                        day_summaries.c.target == target,
                        day_summaries.c.sent > 0,
                    )
                    .order_by(day_summaries.c.issue_date.desc())
                    .limit(1)
                )
            ).first()
        if row is None:
            return None
        return DaySummary(
            row.issue_date,
            row.platform,
            row.target,
            row.kind,
            row.sent,
            row.failed,
            row.gone,
            row.unsent,
            row.attempts,
            row.last_sent_at,
        )


async def _next_targets(conn: AsyncConnection, ids: Sequence[int], batch: int) -> list[str]:
    """The targets of about ``batch`` rows of the first of the deliveries ``ids`` that has
    rows left, whole targets only, in target order (none: no rows left)."""
    for d_id in ids:  # in the order of the unique index: no sort, no scan
        found = [
            str(t)
            for (t,) in await conn.execute(
                select(parts.c.target)
                .where(parts.c.delivery_id == d_id)
                .order_by(parts.c.target, parts.c.part)
                .limit(batch)
            )
        ]
        if found:
            chunk = list(dict.fromkeys(found))
            if len(found) == batch and len(chunk) > 1:
                chunk.pop()  # its rows may go on past the limit: next time
            return chunk
    return []


async def _summarise(
    conn: AsyncConnection, day: dt.date, platform: str, ids: Sequence[int], chunk: list[str]
) -> dict[str, DaySummary]:
    """target -> the summary of its rows in the deliveries ``ids``, for the targets ``chunk``."""
    rows = await conn.execute(
        select(
            parts.c.target,
            func.min(parts.c.kind),
            _count(PartState.SENT),
            _count(PartState.FAILED),
            _count(PartState.GONE),
            func.count(),
            func.sum(parts.c.attempts),
            func.max(case((parts.c.state == PartState.SENT.value, parts.c.updated_at))),
        )
        .where(parts.c.delivery_id.in_(ids), parts.c.target.in_(chunk))
        .group_by(parts.c.target)
    )
    return {
        str(target): DaySummary(
            day,
            platform,
            str(target),
            str(kind),
            int(sent),
            int(failed),
            int(gone),
            int(total) - int(sent) - int(failed) - int(gone),
            int(attempts or 0),
            last,
        )
        for target, kind, sent, failed, gone, total, attempts, last in rows
    }
