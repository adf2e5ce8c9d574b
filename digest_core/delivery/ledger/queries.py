"""Status queries: part records, a day's state, deliveries."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import (
    Iterable,
)
from typing import Any, NamedTuple

from sqlalchemy import (
    select,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Select

from digest_core.delivery.ledger.records import (
    DeliveryRecord,
    PartRecord,
)
from digest_core.delivery.ledger.schema import (
    MAYBE_SENT,
    DayState,
    PartState,
    deliveries,
    narrowed,
    parts,
)
from digest_core.delivery.ledger.state import LedgerState
from digest_core.models import IssueRef
from digest_core.platform import TargetKind

__all__ = ["DayRows", "Queries", "current_states", "day_rows"]

log = logging.getLogger(__name__)


def _record(row: Row[Any]) -> PartRecord:
    return PartRecord(
        id=row.id,
        issue_date=row.issue_date,
        revision=row.revision,
        platform=row.platform,
        generation=row.generation,
        target=row.target,
        kind=TargetKind(row.kind),
        part=row.part,
        state=PartState(row.state),
        message_id=row.message_id,
        attempts=row.attempts,
        last_error=row.last_error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class Queries:
    """Read what was sent where."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    async def records(
        self,
        ref: IssueRef | None = None,
        *,
        platform: str | None = None,
        states: Iterable[PartState] | None = None,
        target: str | None = None,
        limit: int | None = None,
    ) -> list[PartRecord]:
        """Ledger rows, newest first, filtered by issue, platform, states and target."""
        query = _newest_rows()
        if ref is not None:
            query = query.where(
                deliveries.c.issue_date == ref.date, deliveries.c.revision == ref.revision
            )
        if states is not None:
            query = query.where(parts.c.state.in_([s.value for s in states]))
        query = narrowed(
            query, (deliveries.c.platform, platform), (parts.c.target, target), limit=limit
        )
        async with self.state.tx() as conn:
            return [_record(row) for row in await conn.execute(query)]

    async def failures(
        self, ref: IssueRef | None = None, *, platform: str | None = None, limit: int = 50
    ) -> list[PartRecord]:
        """Failed rows, newest first."""
        return await self.records(ref, platform=platform, states=[PartState.FAILED], limit=limit)

    async def waiting(
        self,
        day: dt.date | None = None,
        *,
        platform: str | None = None,
        limit: int | None = None,
    ) -> list[PartRecord]:
        """Rows a delivery left to be sent later (pending or of unknown outcome, with the
        time they are due at the end of ``last_error``: see
        :func:`digest_core.delivery.reports.due_of`), of ``day`` and ``platform`` if given,
        newest first."""
        query = _newest_rows().where(
            parts.c.state.in_([PartState.PENDING.value, PartState.UNKNOWN.value]),
            parts.c.last_error.like("%; due at %"),
        )
        query = narrowed(
            query, (deliveries.c.issue_date, day), (deliveries.c.platform, platform), limit=limit
        )
        async with self.state.tx() as conn:
            return [_record(row) for row in await conn.execute(query)]

    async def in_flight(self, ref: IssueRef | None = None) -> list[PartRecord]:
        """Rows in flight or of unknown outcome (:data:`MAYBE_SENT`): the only parts a rerun
        may send twice."""
        return await self.records(ref, states=MAYBE_SENT)

    async def last_sent(self, platform: str, target_id: str) -> PartRecord | None:
        """The most recent part sent to a target, or None."""
        found = await self.records(
            platform=platform, target=target_id, states=[PartState.SENT], limit=1
        )
        return found[0] if found else None

    async def day_state(self, day: dt.date, *, platform: str) -> DayState:
        """How far the post of ``day`` got on ``platform``, judged by its current rows.

        The current rows of a target are those of the latest generation it has in the day's
        latest revision delivered on ``platform``; a target that has no rows there but got a
        part under another revision counts as done (:meth:`plan` sends it nothing more without
        ``force``); otherwise its rows of its latest delivery count. So stale rows of an older
        generation or revision never make a completed day look partial.

        Returns ``NONE`` without rows, ``PARTIAL`` if a current row is pending, in flight or
        of unknown outcome, else ``DONE`` (failed and gone rows are final: they are reported,
        not retried here).
        """
        async with self.state.tx() as conn:
            found = await day_rows(conn, day, platform)
        states = current_states(found).get(platform, [])
        if not states:
            return DayState.NONE
        if any(s is PartState.PENDING or s in MAYBE_SENT for s in states):
            return DayState.PARTIAL
        return DayState.DONE

    async def posted_revision(self, day: dt.date, *, platform: str) -> str | None:
        """The revision of the latest delivery of ``day`` on ``platform`` (a post, a forced
        post or a correction: what its readers were last sent); None if it has none."""
        query = (
            select(deliveries.c.revision)
            .where(deliveries.c.issue_date == day, deliveries.c.platform == platform)
            .order_by(deliveries.c.id.desc())
            .limit(1)
        )
        async with self.state.tx() as conn:
            revision = (await conn.execute(query)).scalar()
        return None if revision is None else str(revision)

    async def deliveries(
        self, ref: IssueRef, *, platform: str | None = None
    ) -> list[DeliveryRecord]:
        """The deliveries (generations) of an issue revision, oldest first."""
        query = (
            select(deliveries)
            .where(deliveries.c.issue_date == ref.date, deliveries.c.revision == ref.revision)
            .order_by(deliveries.c.platform, deliveries.c.generation)
        )
        query = narrowed(query, (deliveries.c.platform, platform))
        async with self.state.tx() as conn:
            return [
                DeliveryRecord(
                    r.id,
                    r.issue_date,
                    r.revision,
                    r.platform,
                    r.generation,
                    r.forced,
                    r.parts,
                    r.created_at,
                )
                for r in await conn.execute(query)
            ]


def _newest_rows() -> Select[Any]:
    """Ledger rows with their delivery's issue, revision, platform and generation, newest
    first (what :func:`_record` reads)."""
    return (
        select(
            parts,
            deliveries.c.issue_date,
            deliveries.c.revision,
            deliveries.c.platform,
            deliveries.c.generation,
        )
        .join(deliveries, parts.c.delivery_id == deliveries.c.id)
        .order_by(parts.c.updated_at.desc(), parts.c.id.desc())
    )


class DayRows(NamedTuple):
    """The rows of a day as :func:`current_states` judges them."""

    #: platform -> the revision of its latest delivery of the day
    revision_of: dict[str, str]
    #: (platform, target) -> (delivery id, revision, generation, state) of each of its rows
    rows: dict[tuple[str, str], list[tuple[int, str, int, PartState]]]


async def day_rows(conn: AsyncConnection, day: dt.date, platform: str | None) -> DayRows:
    """The rows of ``day`` (of ``platform`` only if given), read in the transaction of
    ``conn``."""
    query = (
        select(
            deliveries.c.platform,
            deliveries.c.id,
            deliveries.c.revision,
            deliveries.c.generation,
            parts.c.target,
            parts.c.state,
        )
        .join(deliveries, parts.c.delivery_id == deliveries.c.id)
        .where(deliveries.c.issue_date == day)
    )
    latest = (
        select(deliveries.c.platform, deliveries.c.revision)
        .where(deliveries.c.issue_date == day)
        .order_by(deliveries.c.id)
    )
    if platform is not None:
        query = query.where(deliveries.c.platform == platform)
        latest = latest.where(deliveries.c.platform == platform)
    # the revision of each platform's latest delivery (later rows overwrite)
    revision_of = {p: r for p, r in await conn.execute(latest)}
    rows: dict[tuple[str, str], list[tuple[int, str, int, PartState]]] = {}
    for p, d_id, revision, generation, target, state in await conn.execute(query):
        rows.setdefault((p, target), []).append((d_id, revision, generation, PartState(state)))
    return DayRows(revision_of, rows)


def current_states(found: DayRows) -> dict[str, list[PartState]]:
    """platform -> the states of the day's current rows (see :meth:`Queries.day_state`)."""
    current: dict[str, list[PartState]] = {}
    for (p, _), mine in found.rows.items():
        latest_revision = [r for r in mine if r[1] == found.revision_of[p]]
        if latest_revision:
            generation = max(r[2] for r in latest_revision)
            chosen = [r[3] for r in latest_revision if r[2] == generation]
        else:
            sent = [r for r in mine if r[3] is PartState.SENT]
            pool = sent or mine
            d_id = max(r[0] for r in pool)
            chosen = [r[3] for r in pool if r[0] == d_id]
        current.setdefault(p, []).extend(chosen)
    return current
