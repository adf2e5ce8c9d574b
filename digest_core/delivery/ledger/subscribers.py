"""Subscribers: the private chats that get the daily issue."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from sqlalchemy import (
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.schema import (
    subscribers,
    targets,
)
from digest_core.delivery.ledger.state import LedgerState
from digest_core.heap import frozen_heap, refreeze
from digest_core.platform import Target, TargetKind

__all__ = ["Subscribers", "activate_subscriber"]

log = logging.getLogger(__name__)

#: subscriber rows turned into targets between two yields to the event loop
_READ_CHUNK = 5000


async def activate_subscriber(
    conn: AsyncConnection, platform: str, chat_id: str, now: dt.datetime
) -> bool:
    """Make the chat an active subscriber since ``now`` (in ``conn``'s transaction); False
    if it already was one."""
    found = (
        await conn.execute(
            select(subscribers.c.active).where(
                subscribers.c.platform == platform, subscribers.c.chat_id == chat_id
            )
        )
    ).first()
    if found is None:
        await conn.execute(
            insert(subscribers).values(platform=platform, chat_id=chat_id, active=True, since=now)
        )
        return True
    if found.active:
        return False
    await conn.execute(
        update(subscribers)
        .where(subscribers.c.platform == platform, subscribers.c.chat_id == chat_id)
        .values(active=True, since=now, until=None)
    )
    return True


class Subscribers:
    """Subscribe and unsubscribe private chats."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    async def subscribe(self, platform: str, chat_id: str) -> bool:
        """Subscribe a private chat to the daily issue; False if it already was.

        Also reactivates the chat as a target if it had been marked gone (it talks to us again).
        """
        now = self.state.clock.now()
        async with self.state.tx() as conn:
            added = await activate_subscriber(conn, platform, chat_id, now)
            await conn.execute(
                update(targets)
                .where(
                    targets.c.platform == platform,
                    targets.c.target_id == chat_id,
                    targets.c.moved_to.is_(None),
                )
                .values(active=True, reason=None, updated_at=now)
            )
        return added

    async def unsubscribe(self, platform: str, chat_id: str) -> bool:
        """End a subscription; False if there was none active."""
        async with self.state.tx() as conn:
            result = await conn.execute(
                update(subscribers)
                .where(
                    subscribers.c.platform == platform,
                    subscribers.c.chat_id == chat_id,
                    subscribers.c.active.is_(True),
                )
                .values(active=False, until=self.state.clock.now())
            )
        return bool(result.rowcount)

    async def subscribers(self, platform: str) -> list[Target]:
        """Active subscribers of ``platform`` as private-chat targets, oldest first."""
        async with self.state.tx() as conn:
            rows = await conn.execute(
                select(subscribers.c.chat_id)
                .where(subscribers.c.platform == platform, subscribers.c.active.is_(True))
                .order_by(subscribers.c.since, subscribers.c.chat_id)
            )
        found: list[Target] = []
        # rows become objects as they are read: 100k at once held the loop for 0.3 s; and
        # kept out of the collector's full passes as they are made (100k new objects set off
        # two, 50-80 ms each with the loop stalled, over the whole heap)
        with frozen_heap():
            for chunk in rows.partitions(_READ_CHUNK):
                found += [Target(platform, chat_id, TargetKind.PRIVATE) for (chat_id,) in chunk]
                refreeze()
                await asyncio.sleep(0)
        return found
