"""Threads per issue in the ledger: the intent to open one, then the thread and first message.

A target of a platform with threads (a forum channel, a channel with a thread per issue) gets
one thread per post. Opening it is not idempotent on the platforms (a forum post has no
nonce), so the ledger keeps what it takes to never open two: a row recorded (and committed)
before the platform is asked, with the title and the time (the intent), and completed with the
thread's id and the issue's first message once the platform answered. A row left without a
thread is what a crash, a timeout or a cut connection after the intent leaves: the thread may
exist, and is looked for before another is opened (:mod:`digest_core.delivery.threads`).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update

from digest_core.delivery.ledger.schema import deliveries, threads
from digest_core.delivery.ledger.state import LedgerState, retried

__all__ = ["ThreadBook", "ThreadRecord"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ThreadRecord:
    """One delivery's thread on one target, as recorded."""

    delivery_id: int
    target: str
    title: str
    #: when the intent was recorded (the ledger's clock)
    opened_at: dt.datetime
    #: None while only the intent is recorded; "" when the first message went out but the
    #: platform opened no thread on it
    thread_id: str | None = None
    #: the issue's first message (part 0), once open
    message_id: str | None = None

    @property
    def is_open(self) -> bool:
        """The platform answered: the thread (or the first message alone) exists."""
        return self.thread_id is not None


def _record(row: Any) -> ThreadRecord:
    return ThreadRecord(
        int(row.delivery_id),
        row.target,
        row.title,
        row.opened_at,
        row.thread_id,
        row.message_id,
    )


class ThreadBook:
    """Record and look up the threads deliveries open (see the module docstring)."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    @retried
    async def intend_thread(
        self, delivery_id: int, target_id: str, title: str
    ) -> tuple[ThreadRecord, bool]:
        """The thread of ``delivery_id`` on ``target_id``: the row recorded before, or a new
        intent to open one named ``title`` (committed when this returns); True when new."""
        now = self.state.clock.now()
        async with self.state.tx() as conn:
            row = (
                await conn.execute(
                    select(threads).where(
                        threads.c.delivery_id == delivery_id, threads.c.target == target_id
                    )
                )
            ).first()
            if row is not None:
                return _record(row), False
            await conn.execute(
                insert(threads).values(
                    delivery_id=delivery_id,
                    target=target_id,
                    title=title,
                    opened_at=now,
                    updated_at=now,
                )
            )
            self.state.stats.rows_inserted += 1
        return ThreadRecord(delivery_id, target_id, title, now), True

    @retried
    async def thread_opened(
        self, delivery_id: int, target_id: str, thread_id: str, message_id: str
    ) -> ThreadRecord:
        """Record that the intent of ``delivery_id`` on ``target_id`` is open as
        ``thread_id`` with ``message_id`` its first message (committed when this returns)."""
        now = self.state.clock.now()
        where = (threads.c.delivery_id == delivery_id) & (threads.c.target == target_id)
        async with self.state.tx() as conn:
            await conn.execute(
                update(threads)
                .where(where)
                .values(thread_id=thread_id, message_id=message_id, updated_at=now)
            )
            row = (await conn.execute(select(threads).where(where))).one()
            self.state.stats.rows_updated += 1
        log.info("thread %s opened on %s (delivery %d)", thread_id, target_id, delivery_id)
        return _record(row)

    @retried
    async def threads_of(self, delivery_id: int) -> dict[str, ThreadRecord]:
        """target id -> the thread recorded for ``delivery_id`` there (intents included)."""
        async with self.state.tx() as conn:
            rows = await conn.execute(select(threads).where(threads.c.delivery_id == delivery_id))
            return {row.target: _record(row) for row in rows}

    @retried
    async def day_threads(self, day: dt.date, platform: str) -> dict[str, ThreadRecord]:
        """target id -> the open thread of its latest post of ``day`` on ``platform`` that
        has one (what a correction edits in)."""
        query = (
            select(threads)
            .join(deliveries, threads.c.delivery_id == deliveries.c.id)
            .where(
                deliveries.c.issue_date == day,
                deliveries.c.platform == platform,
                threads.c.thread_id.is_not(None),
            )
            .order_by(threads.c.delivery_id)
        )
        async with self.state.tx() as conn:
            return {row.target: _record(row) for row in await conn.execute(query)}  # latest wins

    @retried
    async def known_threads(
        self, platform: str, target_id: str, *, other_than: int
    ) -> frozenset[str]:
        """The threads recorded open on ``target_id`` of ``platform`` by deliveries other than
        ``other_than``: never the one that delivery is looking for."""
        query = (
            select(threads.c.thread_id)
            .join(deliveries, threads.c.delivery_id == deliveries.c.id)
            .where(
                deliveries.c.platform == platform,
                threads.c.target == target_id,
                threads.c.delivery_id != other_than,
                threads.c.thread_id.is_not(None),
                threads.c.thread_id != "",
            )
        )
        async with self.state.tx() as conn:
            return frozenset(str(t) for (t,) in await conn.execute(query))
