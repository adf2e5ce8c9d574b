"""The editor's commands: ``/preview [DATE]``, ``/approve [DATE] [REVISION]``, ``/hold [DATE]``.

Handlers of :class:`~digest_core.commands.Commands` (registered in its table); admin-only
(:attr:`~digest_core.commands.Capability.PUBLISH`), answered privately. ``/preview`` shows
exactly the messages readers will get, buttons included; approve and hold are recorded by the
backend (the audit log) and decide the approval gate of the daily post.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from digest_core.models import shorten
from digest_core.rendering import Part, RenderOptions, notice, render

if TYPE_CHECKING:
    from digest_core.commands import Commands, Reply, Request

log = logging.getLogger(__name__)


def next_day(commands: Commands) -> dt.date:
    """The day of the next publish: today before its publish time, else tomorrow."""
    today = commands.today_date()
    return today if not commands.embargo.visible(today) else today + dt.timedelta(days=1)


def _date_arg(commands: Commands, request: Request, args: list[str]) -> dt.date | Reply:
    if not args:
        return next_day(commands)
    try:
        return dt.date.fromisoformat(args[0])
    except ValueError:
        return commands._usage(request, f"“{shorten(args[0], 40)}” 不是日期 / is not a date")


async def preview(commands: Commands, request: Request) -> Reply:
    """The messages the channels will get for DATE (default: the next issue), privately."""
    from digest_core.commands import Capability, Reply

    if Capability.PUBLISH not in request.capabilities:
        return await commands._refuse(request, "preview")
    if len(request.args) > 1:
        return commands._usage(request, "参数太多 / too many arguments")
    day = _date_arg(commands, request, list(request.args))
    if not isinstance(day, dt.date):
        return day
    issue = await commands._off_loop(commands.archive.on, day)
    options = commands.post_options.get(request.platform, RenderOptions(buttons=True))
    messages = await commands._off_loop(render, issue, request.flavor, Part.ALL, options=options)
    embargo = commands.embargo
    at = (embargo.scheduled(day) if embargo.held(day) else embargo.publish_time(day)).astimezone(
        commands.zone
    )
    head = notice(
        f"预览 / preview: {day}（{issue.revision}），{at:%m-%d %H:%M} 发布；"
        f"读者将看到以下内容 / readers will get:",
        request.flavor,
    )
    return Reply([*head, *messages], private=True)


async def approve(commands: Commands, request: Request) -> Reply:
    """Approve DATE's current revision (or the REVISION a review button names)."""
    return await _decide(commands, request, approve=True)


async def hold(commands: Commands, request: Request) -> Reply:
    """Hold DATE back: the scheduled post waits for an approval."""
    return await _decide(commands, request, approve=False)


async def _decide(commands: Commands, request: Request, *, approve: bool) -> Reply:
    from digest_core.commands import Capability

    action = "approve" if approve else "hold"
    if Capability.PUBLISH not in request.capabilities:
        return await commands._refuse(request, action)
    args = list(request.args)
    if len(args) > 2:
        return commands._usage(request, "参数太多 / too many arguments")
    day = _date_arg(commands, request, args)
    if not isinstance(day, dt.date):
        return day
    revision = args[1] if len(args) == 2 else None
    if commands.backend is None:
        return commands._usage(request, "推送服务未运行 / delivery is not running")
    text = await commands.backend.decide(
        day, approve=approve, revision=revision, requested_by=f"{request.platform}:{request.user}"
    )
    return commands._text(request, text, private=True)
