"""Readers' preferences (delivery time, zone, format) and keyword follows, kept in the ledger."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.schema import (
    deliveries,
    follow_checks,
    follows,
    parts,
    preferences,
    subscribers,
)
from digest_core.delivery.ledger.state import LedgerState

__all__ = ["MAX_FOLLOWS", "Followed", "Format", "Preference", "Readers"]

log = logging.getLogger(__name__)

#: the most keywords one reader may follow
MAX_FOLLOWS = 10


class Format(StrEnum):
    """What a subscriber gets: the issue as channels get it, one compact message (the headline
    and the brief titles with the section buttons), or the headline alone."""

    FULL = "full"
    COMPACT = "compact"
    HEADLINE = "headline"


@dataclass(frozen=True, slots=True)
class Preference:
    """A reader's delivery preference (defaults: the digest's time and zone, the full issue)."""

    platform: str
    chat_id: str
    at: dt.time | None = None
    zone: str | None = None
    format: Format = Format.FULL
    updated_at: dt.datetime | None = None
    #: an active subscriber
    subscribed: bool = False


class Followed(StrEnum):
    """The outcome of :meth:`Readers.follow`."""

    ADDED = "added"
    ALREADY = "already"
    FULL = "full"  # already following MAX_FOLLOWS words


_UNSET = object()


class Readers:
    """Preferences and follows of readers (private chats)."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    async def preference(self, platform: str, chat_id: str) -> Preference:
        """The preference of ``chat_id`` (the defaults when it never set one)."""
        async with self.state.tx() as conn:
            row = (
                await conn.execute(
                    select(preferences).where(
                        preferences.c.platform == platform, preferences.c.chat_id == chat_id
                    )
                )
            ).first()
            active = (
                await conn.execute(
                    select(subscribers.c.active).where(
                        subscribers.c.platform == platform, subscribers.c.chat_id == chat_id
                    )
                )
            ).scalar()
        if row is None:
            return Preference(platform, chat_id, subscribed=bool(active))
        return _preference(row, subscribed=bool(active))

    async def set_preference(
        self,
        platform: str,
        chat_id: str,
        *,
        at: dt.time | object | None = _UNSET,
        zone: str | object | None = _UNSET,
        format: Format | object = _UNSET,
    ) -> Preference:
        """Change the given fields of ``chat_id``'s preference (others keep their value)."""
        values: dict[str, object] = {"updated_at": self.state.clock.now()}
        if at is not _UNSET:
            values["at"] = at.strftime("%H:%M") if isinstance(at, dt.time) else None
        if zone is not _UNSET:
            values["zone"] = zone
        if format is not _UNSET:
            values["format"] = str(format)
        async with self.state.tx() as conn:
            changed = await conn.execute(
                update(preferences)
                .where(preferences.c.platform == platform, preferences.c.chat_id == chat_id)
                .values(**values)
            )
            if not changed.rowcount:
                await conn.execute(
                    insert(preferences).values(
                        platform=platform,
                        chat_id=chat_id,
                        **{"format": Format.FULL.value, "at": None, "zone": None, **values},
                    )
                )
        return await self.preference(platform, chat_id)

    async def timed_subscribers(self, platform: str) -> list[Preference]:
        """Active subscribers of ``platform`` with a time of their own, oldest first."""
        async with self.state.tx() as conn:
            rows = await conn.execute(
                select(preferences)
                .join(
                    subscribers,
                    (subscribers.c.platform == preferences.c.platform)
                    & (subscribers.c.chat_id == preferences.c.chat_id),
                )
                .where(
                    preferences.c.platform == platform,
                    preferences.c.at.is_not(None),
                    subscribers.c.active.is_(True),
                )
                .order_by(subscribers.c.since, subscribers.c.chat_id)
            )
            return [_preference(row, subscribed=True) for row in rows]

    async def formats(self, platform: str) -> dict[str, Format]:
        """chat id -> the format of every reader of ``platform`` who chose one but the full."""
        async with self.state.tx() as conn:
            rows = await conn.execute(
                select(preferences.c.chat_id, preferences.c.format).where(
                    preferences.c.platform == platform,
                    preferences.c.format != Format.FULL.value,
                )
            )
            return {chat: Format(fmt) for chat, fmt in rows}

    async def day_shapes(
        self, platform: str, day: dt.date, target_ids: Sequence[str]
    ) -> dict[str, int]:
        """Target id -> how many parts its rows of ``day``'s issue on ``platform`` have (any
        state, revision or generation), for the targets among ``target_ids`` that have rows: a
        target planned with another number of parts was served another format."""
        found: dict[str, int] = {}
        ids = list(target_ids)
        for start in range(0, len(ids), 500):
            async with self.state.tx() as conn:
                rows = await conn.execute(
                    select(parts.c.target, func.max(parts.c.part))
                    .join(deliveries, parts.c.delivery_id == deliveries.c.id)
                    .where(
                        deliveries.c.issue_date == day,
                        deliveries.c.platform == platform,
                        parts.c.target.in_(ids[start : start + 500]),
                    )
                    .group_by(parts.c.target)
                )
                found.update((target, int(last) + 1) for target, last in rows)
        return found

    # ------------------------------------------------------------ follows

    async def follow(self, platform: str, chat_id: str, word: str) -> Followed:
        """Follow ``word`` (at most :data:`MAX_FOLLOWS` per reader)."""
        async with self.state.tx() as conn:
            words = await _words(conn, platform, chat_id)
            if word in words:
                return Followed.ALREADY
            if len(words) >= MAX_FOLLOWS:
                return Followed.FULL
            await conn.execute(
                insert(follows).values(
                    platform=platform, chat_id=chat_id, word=word, created_at=self.state.clock.now()
                )
            )
        return Followed.ADDED

    async def unfollow(self, platform: str, chat_id: str, word: str) -> bool:
        """Stop following ``word``; False when it was not followed."""
        async with self.state.tx() as conn:
            result = await conn.execute(
                delete(follows).where(
                    follows.c.platform == platform,
                    follows.c.chat_id == chat_id,
                    follows.c.word == word,
                )
            )
        return bool(result.rowcount)

    async def following(self, platform: str, chat_id: str) -> list[str]:
        """The words ``chat_id`` follows, in the order they were added."""
        async with self.state.tx() as conn:
            return await _words(conn, platform, chat_id)

    async def followers(self, platform: str) -> dict[str, list[str]]:
        """chat id -> the words it follows, for every follower on ``platform``."""
        async with self.state.tx() as conn:
            rows = await conn.execute(
                select(follows.c.chat_id, follows.c.word)
                .where(follows.c.platform == platform)
                .order_by(follows.c.chat_id, follows.c.created_at, follows.c.word)
            )
            found: dict[str, list[str]] = {}
            for chat, word in rows:
                found.setdefault(chat, []).append(word)
            return found

    async def follows_checked(self, platform: str, days: Sequence[dt.date]) -> set[dt.date]:
        """The days among ``days`` whose follow messages on ``platform`` are all sent
        (:meth:`check_follows`)."""
        if not days:
            return set()
        async with self.state.tx() as conn:
            rows = await conn.execute(
                select(follow_checks.c.issue_date).where(
                    follow_checks.c.platform == platform,
                    follow_checks.c.issue_date.in_(list(days)),
                )
            )
            return {day for (day,) in rows}

    async def check_follows(self, platform: str, day: dt.date, revision: str) -> bool:
        """Record that the follow messages of ``day``'s issue (``revision``) on ``platform``
        are all sent: it is not considered again. False when it was recorded already."""
        async with self.state.tx() as conn:
            found = (
                await conn.execute(
                    select(follow_checks.c.revision).where(
                        follow_checks.c.platform == platform,
                        follow_checks.c.issue_date == day,
                    )
                )
            ).first()
            if found is not None:
                return False
            await conn.execute(
                insert(follow_checks).values(
                    platform=platform,
                    issue_date=day,
                    revision=revision,
                    checked_at=self.state.clock.now(),
                )
            )
        return True


async def _words(conn: AsyncConnection, platform: str, chat_id: str) -> list[str]:
    rows = await conn.execute(
        select(follows.c.word)
        .where(follows.c.platform == platform, follows.c.chat_id == chat_id)
        .order_by(follows.c.created_at, follows.c.word)
    )
    return [word for (word,) in rows]


def _preference(row: Row[Any], *, subscribed: bool) -> Preference:
    return Preference(
        platform=row.platform,
        chat_id=row.chat_id,
        at=dt.time.fromisoformat(row.at) if row.at else None,
        zone=row.zone,
        format=Format(row.format),
        updated_at=row.updated_at,
        subscribed=subscribed,
    )
