"""Targets that went away (deactivated) or moved (a Telegram group that became a supergroup)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import (
    Iterable,
)

from sqlalchemy import (
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.records import (
    InactiveTarget,
)
from digest_core.delivery.ledger.schema import (
    PartState,
    in_chunks,
    parts,
    subscribers,
    targets,
)
from digest_core.delivery.ledger.state import LedgerState, retried
from digest_core.delivery.ledger.subscribers import (
    activate_subscriber,
)
from digest_core.platform import Target, TargetKind

__all__ = ["Targets"]

log = logging.getLogger(__name__)


async def _upsert_target(
    conn: AsyncConnection,
    target: Target,
    *,
    active: bool,
    moved_to: str | None,
    reason: str | None,
    now: dt.datetime,
) -> None:
    values = {
        "kind": target.kind.value,
        "active": active,
        "moved_to": moved_to,
        "reason": reason,
        "updated_at": now,
    }
    result = await conn.execute(
        update(targets)
        .where(targets.c.platform == target.platform, targets.c.target_id == target.id)
        .values(**values)
    )
    if not result.rowcount:
        await conn.execute(
            insert(targets).values(platform=target.platform, target_id=target.id, **values)
        )


class Targets:
    """Deactivate, move and reactivate targets."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    @retried
    async def mark_gone(self, target: Target, *, row_ids: Iterable[int] = (), reason: str) -> None:
        """Deactivate ``target`` (and unsubscribe it) and mark ``row_ids`` gone.

        Future :meth:`plan` calls skip the target until :meth:`reactivate` or :meth:`subscribe`.
        """
        now = self.state.clock.now()
        async with self.state.tx() as conn:
            await self._mark_rows(conn, row_ids, PartState.GONE, reason, now)
            await _upsert_target(conn, target, active=False, moved_to=None, reason=reason, now=now)
            result = await conn.execute(
                update(subscribers)
                .where(
                    subscribers.c.platform == target.platform,
                    subscribers.c.chat_id == target.id,
                    subscribers.c.active.is_(True),
                )
                .values(active=False, until=now)
            )
            self.state.stats.rows_updated += result.rowcount
        log.info("%s deactivated: %s", target, reason)

    @retried
    async def move_target(
        self, old: Target, new: Target, *, row_ids: Iterable[int] = (), reason: str = ""
    ) -> list[int]:
        """Record that ``old`` is now ``new``: rewrite ``row_ids`` and the subscriber to ``new``.

        Returns the row ids now addressed to ``new``; a row whose part ``new`` already has in
        the same delivery is marked gone instead (it would be a duplicate).
        """
        now = self.state.clock.now()
        async with self.state.tx() as conn:
            await _upsert_target(
                conn,
                old,
                active=False,
                moved_to=new.id,
                reason=reason or f"moved to {new.id}",
                now=now,
            )
            await _upsert_target(conn, new, active=True, moved_to=None, reason=None, now=now)
            moved = await self._move_rows(conn, list(row_ids), new, now)
            await _move_subscriber(conn, old, new, now)
        log.info("%s moved to %s", old, new.id)
        return moved

    async def _move_rows(
        self, conn: AsyncConnection, ids: list[int], new: Target, now: dt.datetime
    ) -> list[int]:
        """Address the rows ``ids`` to ``new``; a row whose part ``new`` already has in its
        delivery is marked gone instead. Returns the rows moved."""
        if not ids:
            return []
        rows = (
            await conn.execute(
                select(parts.c.id, parts.c.delivery_id, parts.c.part).where(parts.c.id.in_(ids))
            )
        ).all()
        d_ids = {r.delivery_id for r in rows}
        taken = {
            (r.delivery_id, r.part)
            for r in await conn.execute(
                select(parts.c.delivery_id, parts.c.part).where(
                    parts.c.target == new.id, parts.c.delivery_id.in_(d_ids)
                )
            )
        }
        self.state.live.difference_update(ids)
        clash = [r.id for r in rows if (r.delivery_id, r.part) in taken]
        moved = [r.id for r in rows if (r.delivery_id, r.part) not in taken]
        for chunk in in_chunks(moved):
            await conn.execute(
                update(parts).where(parts.c.id.in_(chunk)).values(target=new.id, updated_at=now)
            )
        await self._mark_rows(conn, clash, PartState.GONE, f"moved to {new.id}", now)
        self.state.stats.rows_updated += len(moved)
        return moved

    async def reactivate(self, target: Target) -> bool:
        """Let :meth:`plan` send to a deactivated (gone or moved) target again: an admin action
        after the bot got its rights back. A subscription that ended when the target was marked
        gone is restored. Returns False if the target was not deactivated.
        """
        now = self.state.clock.now()
        async with self.state.tx() as conn:
            found = (
                await conn.execute(
                    select(targets.c.active, targets.c.updated_at).where(
                        targets.c.platform == target.platform, targets.c.target_id == target.id
                    )
                )
            ).first()
            if found is None or found.active:
                return False
            await _upsert_target(conn, target, active=True, moved_to=None, reason=None, now=now)
            # mark_gone ends the subscription at the very time it deactivates the target
            await conn.execute(
                update(subscribers)
                .where(
                    subscribers.c.platform == target.platform,
                    subscribers.c.chat_id == target.id,
                    subscribers.c.active.is_(False),
                    subscribers.c.until == found.updated_at,
                )
                .values(active=True, until=None)
            )
        log.info("%s reactivated", target)
        return True

    async def inactive_targets(self, platform: str) -> list[InactiveTarget]:
        """Targets of ``platform`` deactivated as gone (moved ones aside), latest first."""
        async with self.state.tx() as conn:
            rows = await conn.execute(
                select(targets.c.target_id, targets.c.kind, targets.c.updated_at, targets.c.reason)
                .where(
                    targets.c.platform == platform,
                    targets.c.active.is_(False),
                    targets.c.moved_to.is_(None),
                )
                .order_by(targets.c.updated_at.desc(), targets.c.target_id)
            )
            return [
                InactiveTarget(
                    Target(platform, r.target_id, TargetKind(r.kind)), r.updated_at, r.reason
                )
                for r in rows
            ]

    async def _mark_rows(
        self,
        conn: AsyncConnection,
        row_ids: Iterable[int],
        state: PartState,
        error: str,
        now: dt.datetime,
    ) -> None:
        ids = list(row_ids)
        self.state.live.difference_update(ids)
        for chunk in in_chunks(ids):
            result = await conn.execute(
                update(parts)
                .where(parts.c.id.in_(chunk), parts.c.state != PartState.SENT.value)
                .values(state=state.value, last_error=error, updated_at=now)
            )
            self.state.stats.rows_updated += result.rowcount


async def _move_subscriber(
    conn: AsyncConnection, old: Target, new: Target, now: dt.datetime
) -> None:
    """An active subscriber ``old`` becomes the subscriber ``new``."""
    old_sub = (
        await conn.execute(
            select(subscribers.c.active).where(
                subscribers.c.platform == old.platform, subscribers.c.chat_id == old.id
            )
        )
    ).first()
    if old_sub is not None and old_sub.active:
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.platform == old.platform, subscribers.c.chat_id == old.id)
            .values(active=False, until=now)
        )
        await activate_subscriber(conn, new.platform, new.id, now)
