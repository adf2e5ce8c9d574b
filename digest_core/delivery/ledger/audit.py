"""The audit log of admin actions."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import (
    Mapping,
    Sequence,
)
from typing import Any

from sqlalchemy import (
    insert,
    select,
)

from digest_core.delivery.ledger.analytics import reading
from digest_core.delivery.ledger.records import (
    AuditEntry,
)
from digest_core.delivery.ledger.schema import (
    audit,
)
from digest_core.delivery.ledger.state import LedgerState

__all__ = ["Audit"]

log = logging.getLogger(__name__)


class Audit:
    """Record and read admin actions."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    async def record_audit(
        self,
        platform: str,
        user_id: str,
        action: str,
        *,
        args: Mapping[str, Any] | None = None,
        allowed: bool,
        outcome: str,
    ) -> int:
        """Append an admin action to the audit log; returns its id."""
        async with self.state.tx() as conn:
            result = await conn.execute(
                insert(audit).values(
                    at=self.state.clock.now(),
                    platform=platform,
                    user_id=user_id,
                    action=action,
                    args=json.dumps(
                        dict(args or {}), ensure_ascii=False, sort_keys=True, default=str
                    ),
                    allowed=allowed,
                    outcome=outcome,
                )
            )
            self.state.stats.rows_inserted += 1
            key = result.inserted_primary_key
            assert key is not None
            return int(key[0])

    async def audit_log(
        self,
        *,
        platform: str | None = None,
        actions: Sequence[str] | None = None,
        mentions: str | None = None,
        limit: int = 50,
    ) -> list[AuditEntry]:
        """The latest audit entries (of one platform, of some actions, whose arguments hold
        the JSON string ``mentions``: a date), newest first. ``mentions`` filters in the
        database: a year of approvals is not turned into objects to find one day's."""
        query = select(audit).order_by(audit.c.id.desc()).limit(limit)
        if platform is not None:
            query = query.where(audit.c.platform == platform)
        if actions is not None:
            query = query.where(audit.c.action.in_(list(actions)))
        if mentions is not None:
            query = query.where(audit.c.args.contains(json.dumps(mentions), autoescape=True))
        async with self.state.tx() as conn:
            return [_entry(r) for r in await conn.execute(query)]

    async def audit_page(
        self,
        *,
        who: str | None = None,
        action: str | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[AuditEntry]:
        """A page of the audit log, newest first: entries by ``who`` (``platform:user``, or
        a user id alone), of ``action``, at ``since`` <= at < ``until``, older than entry
        ``before_id`` (the last of the previous page); at most ``limit`` (≤ 200). Each filter
        has its index (schema 11), and the page is a range of ids: no offset is scanned."""
        query = select(audit).order_by(audit.c.id.desc()).limit(max(1, min(limit, 200)))
        if who:
            platform, sep, user = who.rpartition(":")
            query = query.where(audit.c.user_id == (user if sep else who))
            if platform:
                query = query.where(audit.c.platform == platform)
        if action:
            query = query.where(audit.c.action == action)
        if since is not None:
            query = query.where(audit.c.at >= since)
        if until is not None:
            query = query.where(audit.c.at < until)
        if before_id is not None:
            query = query.where(audit.c.id < before_id)
        async with reading(self.state) as conn:
            return [_entry(r) for r in await conn.execute(query)]

    async def audit_actions(self) -> list[str]:
        """The actions the audit log holds (for a filter's choices; the action index)."""
        query = select(audit.c.action).distinct().order_by(audit.c.action).limit(200)
        async with self.state.tx() as conn:
            return [str(a) for (a,) in await conn.execute(query)]


def _entry(r: Any) -> AuditEntry:
    return AuditEntry(
        r.id, r.at, r.platform, r.user_id, r.action, json.loads(r.args), r.allowed, r.outcome
    )
