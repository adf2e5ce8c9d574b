"""The admins' commands (/repost, /correct, /status, /reactivate): declared handlers of
:class:`AdminCommands`, which :class:`~digest_core.commands.dispatch.Commands` answers after
checking the capability each needs; every action is audited and answered privately."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from digest_core.commands.declaration import Argument, Completion, command, echo, flag, text
from digest_core.commands.reading import DATE_TODAY
from digest_core.commands.requests import Capability, Reply, Request, Status
from digest_core.rendering import notice

if TYPE_CHECKING:
    from digest_core.commands.dispatch import Commands

#: what /reactivate says of a missing target or a word too many
GIVE_A_TARGET = "请给出目标 ID / give the target id"


def _target(word: str) -> tuple[str, str]:
    """``[PLATFORM:]ID`` as (platform or "", id). A platform is a name (letters first); an id
    may hold a ``:`` itself (a forum topic's ``-100…:42``)."""
    platform, sep, target_id = word.partition(":")
    if sep and re.fullmatch(r"[a-z][a-z0-9_~-]*", platform):
        return platform, target_id
    return "", word


#: /repost's one target (``[PLATFORM:]ID``): words only (the dashboard's per-target button)
ONE_TARGET = Argument(
    "target",
    "Only this target",
    "只推送到这个目标",
    "只推送到這個目標",
    "目标",
    "目標",
    kind=text(1, 160, read=_target),
    hidden=True,
)


class AdminCommands:
    """The admins' commands over ``commands`` (its archive, backend and replies)."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands

    async def _done(self, request: Request, action: str, summary: str) -> Reply:
        """An admin action's ``summary``, audited and told privately."""
        await self.commands.running().audit(request, action=action, allowed=True, outcome=summary)
        return self.commands.reply(request, summary, private=True)

    @command(
        "repost",
        zh="管理员：把某一期重新推送到所有频道",
        zh_tw="管理員：把某一期重新推送到所有頻道",
        en="Admins: post an issue to every channel again",
        usage="/repost [YYYY-MM-DD] [force] [PLATFORM:ID]",
        args=(
            DATE_TODAY,
            Argument(
                "force",
                "Send every part again, not only what is missing",
                "全部重发，而不只是补发缺失的部分",
                "全部重發，而不只是補發缺失的部分",
                "全部重发",
                "全部重發",
                kind=flag("force"),
            ),
            ONE_TARGET,
        ),
        needs=Capability.REPOST,
        label_zh="重新推送",
        label_zh_tw="重新推送",
        dashboard=True,
        running="开始推送… / posting…",
    )
    async def repost(
        self,
        request: Request,
        date: dt.date | None,
        force: bool,
        target: tuple[str, str] | None,
    ) -> Reply:
        """``/repost [DATE] [force] [PLATFORM:ID]``: the day to every target again (only what
        is missing unless ``force``), or to one target (the dashboard's per-target button;
        words only), after a confirmation."""
        date = date or self.commands.today_date()
        if target is not None:
            target = (target[0] or request.platform, target[1])
        # IssueNotFound → a clear reply before anything is asked
        await self.commands.off_loop(self.commands.archive.on, date)
        backend = self.commands.running()
        if not request.confirmed:
            what = (
                "全部重发 / resend everything" if force else "只补发缺失部分 / send what is missing"
            )
            where = "" if target is None else f"（只推送到 / only to {target[0]}:{target[1]}）"
            return Reply(
                notice(
                    f"确认重新推送 {date} 的日报？{what}{where}\nRepost the issue of {date}?",
                    request.flavor,
                ),
                # the resolved date goes into the confirmation: pressed after midnight, it
                # still reposts the day that was asked about; a confirmation is words
                confirm=replace(
                    request,
                    args=(
                        date.isoformat(),
                        *(("force",) if force else ()),
                        *(() if target is None else (f"{target[0]}:{target[1]}",)),
                    ),
                    values=None,
                    confirmed=True,
                ),
                status=Status.CONFIRM,
                private=True,
            )
        requested_by = f"{request.platform}:{request.user}"
        summary = await backend.repost(date, force=force, requested_by=requested_by, target=target)
        return await self._done(request, "repost", summary)

    @command(
        "correct",
        zh="管理员：把已发出的某一期改成更正后的内容",
        zh_tw="管理員：把已發出的某一期改成更正後的內容",
        en="Admins: edit a posted issue to its corrected text",
        usage="/correct [YYYY-MM-DD]",
        args=(DATE_TODAY,),
        needs=Capability.REPOST,
        label_zh="更正",
        label_zh_tw="更正",
        dashboard=True,
    )
    async def correct(self, request: Request, date: dt.date | None) -> Reply:
        """``/correct [DATE]``: edit the day's posted messages to the file's revision (no
        confirmation: it only makes the posts match the archive, and a rerun changes nothing)."""
        date = date or self.commands.today_date()
        await self.commands.off_loop(
            self.commands.archive.on, date
        )  # IssueNotFound → a clear reply
        requested_by = f"{request.platform}:{request.user}"
        summary = await self.commands.running().correct_issue(date, requested_by=requested_by)
        return await self._done(request, "correct", summary)

    @command(
        "status",
        zh="管理员：下次推送、最近的推送、失败",
        zh_tw="管理員：下次推送、最近的推送、失敗",
        en="Admins: next post, last deliveries, failures",
        usage="/status",
        needs=Capability.STATUS,
        label_zh="状态",
        label_zh_tw="狀態",
        dashboard=True,
        lenient=True,
    )
    async def status(self, request: Request) -> Reply:
        return self.commands.reply(request, await self.commands.running().status(), private=True)

    @command(
        "reactivate",
        zh="管理员：恢复向已停用的频道推送",
        zh_tw="管理員：恢復向已停用的頻道推送",
        en="Admins: post to a deactivated channel again",
        usage="/reactivate [PLATFORM:]ID",
        args=(
            Argument(
                "target",
                "Channel id (pick one from the list)",
                "频道 ID（可从列表中选）",
                "頻道 ID（可從列表中選）",
                "频道",
                "頻道",
                kind=text(1, 64, read=_target),
                required=True,
                complete=Completion.INACTIVE_TARGETS,
                missing=GIVE_A_TARGET,
            ),
        ),
        needs=Capability.REPOST,
        label_zh="恢复推送",
        label_zh_tw="恢復推送",
        dashboard=True,
        too_many=GIVE_A_TARGET,
    )
    async def reactivate(self, request: Request, target: tuple[str, str]) -> Reply:
        platform, target_id = target
        platform = platform or request.platform
        backend = self.commands.running()
        changed = await backend.reactivate(platform, target_id)
        outcome = "reactivated" if changed else "not deactivated"
        await backend.audit(request, action="reactivate", allowed=True, outcome=outcome)
        if not changed:
            shown = echo(f"{platform}:{target_id}")
            return self.commands.reply(
                request,
                f"{shown} 没有被停用。/ {shown} was not deactivated.",
                status=Status.NOT_FOUND,
                private=True,
            )
        return self.commands.reply(
            request,
            f"已恢复 {platform}:{target_id}，下次推送会发给它。"
            f"\n{platform}:{target_id} is active again; the next post goes there.",
            private=True,
        )
