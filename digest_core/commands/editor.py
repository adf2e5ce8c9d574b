"""The editor's commands: ``/preview [DATE]``, ``/approve [DATE] [REVISION]``, ``/hold [DATE]``.

Declared handlers of :class:`~digest_core.commands.dispatch.Commands`, which checks their capability
(:attr:`~digest_core.commands.requests.Capability.PUBLISH`) before they run; answered privately.
``/preview`` shows exactly the messages readers will get, buttons included; approve and hold
are recorded by the backend (the audit log) and decide the approval gate of the daily post.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from digest_core.commands.buttons import Style
from digest_core.commands.declaration import Argument, command, date_argument
from digest_core.commands.requests import Capability, Reply, Request
from digest_core.rendering import Part, RenderOptions, notice, render

if TYPE_CHECKING:
    from digest_core.commands.dispatch import Commands

#: a declared handler of this module, called with the :class:`Commands`, the request and the
#: command's argument values
Answer = Callable[..., Awaitable[Reply]]

log = logging.getLogger(__name__)

#: the date argument of the editor's commands (default: the next issue)
NEXT_ISSUE = date_argument(
    "YYYY-MM-DD (default: the next issue)",
    "日期 YYYY-MM-DD（默认下一期）",
    "日期 YYYY-MM-DD（預設下一期）",
)
#: the revision a review button approves (words only: no typed option)
REVISION = Argument(
    "revision", "The revision approved", "批准的版本", "批准的版本", "版本", "版本", hidden=True
)


def next_day(commands: Commands) -> dt.date:
    """The day of the next publish: today before its publish time, else tomorrow."""
    today = commands.today_date()
    return today if not commands.embargo.visible(today) else today + dt.timedelta(days=1)


@command(
    "preview",
    zh="管理员：私下预览读者将收到的日报（含按钮）",
    zh_tw="管理員：私下預覽讀者將收到的日報（含按鈕）",
    en="Admins: privately see what readers will get, buttons included",
    usage="/preview [YYYY-MM-DD]",
    args=(NEXT_ISSUE,),
    needs=Capability.PUBLISH,
    label_zh="预览",
    label_zh_tw="預覽",
)
async def preview(commands: Commands, request: Request, date: dt.date | None) -> Reply:
    """The messages the channels will get for DATE (default: the next issue), privately."""
    day = date or next_day(commands)
    issue = await commands.off_loop(commands.archive.on, day)
    options = commands.post_options.get(request.platform, RenderOptions(buttons=True))
    messages = await commands.off_loop(render, issue, request.flavor, Part.ALL, options=options)
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


def _decision(
    name: str,
    approve: bool,
    about: tuple[str, str, str, str],
    label: tuple[str, str],
    style: Style,
) -> Answer:
    """The declared handler of ``/name [DATE]``: approve (or hold back) DATE's issue (default:
    the next one), of the REVISION a review button names (else its current one); ``about`` is
    the command's description (简体, 繁體, English) and the label of the review's button that
    runs it (drawn in ``style``), ``label`` its Chinese names. A dashboard action."""

    @command(
        name,
        zh=about[0],
        zh_tw=about[1],
        en=about[2],
        usage=f"/{name} [YYYY-MM-DD]",
        args=(NEXT_ISSUE, REVISION),
        needs=Capability.PUBLISH,
        label_zh=label[0],
        label_zh_tw=label[1],
        dashboard=True,
        button_label=about[3],
        button_style=style,
    )
    async def decide(
        commands: Commands, request: Request, date: dt.date | None, revision: str | None
    ) -> Reply:
        text = await commands.running().decide(
            date or next_day(commands),
            approve=approve,
            revision=revision,
            requested_by=f"{request.platform}:{request.user}",
        )
        return commands.reply(request, text, private=True)

    return decide


#: what /approve says of itself (简体, 繁體, English), and its review button
APPROVE = (
    "管理员：批准某一期按时推送（需要批准时）",
    "管理員：批准某一期按時推送（需要批准時）",
    "Admins: approve an issue for its post (when approval is required)",
    "✅ 批准 / Approve",
)
#: what /hold says of itself, and its review button
HOLD = (
    "管理员：暂缓某一期，批准前不推送",
    "管理員：暫緩某一期，批准前不推送",
    "Admins: hold an issue back until it is approved",
    "⏸ 暂缓 / Hold",
)

approve = _decision("approve", True, APPROVE, ("批准", "批准"), Style.PRIMARY)
hold = _decision("hold", False, HOLD, ("暂缓", "暫緩"), Style.DANGER)
