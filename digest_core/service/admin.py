"""The admin commands' backend (:class:`~digest_core.commands.requests.AdminBackend`): reposts,
corrections, status, subscriptions, reactivations, approvals and the audit log, over the
service's parts."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from digest_core.commands.requests import Request
from digest_core.delivery import Ledger
from digest_core.platform import Target, TargetKind
from digest_core.publishing.approval import Publishing
from digest_core.service.posting import Posting
from digest_core.service.status import StatusReport

log = logging.getLogger(__name__)


@dataclass
class Admin:
    """What admin commands ask of the running bot; every action goes through the same
    collaborators as the scheduled post and ``digest-bot`` commands."""

    posting: Posting
    report: StatusReport
    publishing: Publishing
    ledger: Ledger

    async def repost(
        self,
        date: dt.date,
        *,
        force: bool,
        requested_by: str,
        target: tuple[str, str] | None = None,
    ) -> str:
        log.info("repost of %s (force=%s) requested by %s", date, force, requested_by)
        if target is not None and target[0] not in self.posting.platforms:
            return f"{target[0]} 没有运行 / {target[0]} is not running"
        reports = await self.posting.post(
            date,
            force=force,
            requested_by=requested_by,
            platforms=None if target is None else [target[0]],
            only_target=None if target is None else target[1],
        )
        if not reports:
            return "没有配置推送目标 / no targets are configured"
        return "\n".join([await self.report.describe(r) for r in reports])

    async def approved(self, date: dt.date) -> str:
        """The post of ``date`` its late approval makes (what the ledger lacks, audited as the
        approval's): :class:`~digest_core.publishing.approval.Publishing`'s ``post``."""
        return await self.repost(date, force=False, requested_by="approval")

    async def correct_issue(self, date: dt.date, *, requested_by: str) -> str:
        log.info("correction of %s requested by %s", date, requested_by)
        reports = await self.posting.correct(date)
        if not reports:
            return "没有运行的平台 / no platform is running"
        return "\n".join(r.describe() for r in reports)

    async def status(self) -> str:
        return await self.report.text()

    async def reactivate(self, platform: str, target_id: str) -> bool:
        if platform not in self.posting.platforms:
            return False
        targets = {t.id: t for t in self.posting.platforms[platform].channel_targets()}
        target = targets.get(target_id, Target(platform, target_id, TargetKind.CHANNEL))
        return await self.ledger.reactivate(target)

    async def subscribe(self, platform: str, chat: str, *, on: bool) -> bool:
        if on:
            return await self.ledger.subscribe(platform, chat)
        return await self.ledger.unsubscribe(platform, chat)

    async def decide(
        self, date: dt.date, *, approve: bool, revision: str | None, requested_by: str
    ) -> str:
        return await self.publishing.decide(
            date, approve=approve, revision=revision, by=requested_by
        )

    async def audit(self, request: Request, *, action: str, allowed: bool, outcome: str) -> None:
        await self.ledger.record_audit(
            platform=request.platform,
            user_id=request.user,
            action=action,
            args={"args": list(request.args), "chat": request.chat},
            allowed=allowed,
            outcome=outcome,
        )
