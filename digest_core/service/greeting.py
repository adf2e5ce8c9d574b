"""The block a terminal shows on start: the current issue, the next post, what to type."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from digest_core.errors import IssueNotFound
from digest_core.models import counted, shorten

if TYPE_CHECKING:
    from digest_core.archive import Archive
    from digest_core.publishing.schedule import DailyPoster

log = logging.getLogger(__name__)


def greeting(
    archive: Archive,
    poster: DailyPoster,
    *,
    zone: dt.tzinfo,
    local_zone: dt.tzinfo | None = None,
) -> str:
    """A few lines for someone who has just started the bot on a terminal (the console):

    - which issue is current (the newest whose post time has come), with its headline;
    - when the next post is due, in the digest's ``zone`` and in ``local_zone`` (default: the
      host's), and whether its file is in the archive yet; or that the daily post is off;
    - that ``/today`` shows the issue now and ``/help`` lists the other commands.

    Reads the archive: call it from a thread in async code.
    """
    lines = ["digest-bot 已启动 / is running"]
    try:
        issue = archive.latest(on_or_before=poster.due_day())
    except IssueNotFound:
        lines.append(f"当前一期 / current issue: none yet in {archive.root}")
    else:
        lines.append(
            f"当前一期 / current issue: {issue.date} · {shorten(issue.headline.title, 40)} "
            f"· {counted(len(issue.briefs), 'brief')}"
        )
    if poster.config.enabled:
        at = poster.next_post()
        name = getattr(zone, "key", None) or at.tzname()
        local = at.astimezone(local_zone) if local_zone is not None else at.astimezone()
        lines.append(
            f"下次推送 / next post: {at:%Y-%m-%d %H:%M} {name} "
            f"(your time: {local:%Y-%m-%d %H:%M %Z}); it appears here"
        )
        day = at.astimezone(zone).date()
        if not _has_issue(archive, day):
            lines.append(f"  {day} 的日报文件还没有 / the file for {day} is not in the archive yet")
    else:
        lines.append("每日推送已关闭 / the daily post is off ([schedule] enabled = false)")
    lines.append("现在就看 / read it now: /today · 全部命令 / every command: /help")
    lines.append("Ctrl-C 退出 / quits")
    return "\n".join(lines)


def _has_issue(archive: Archive, day: dt.date) -> bool:
    try:
        archive.on(day)
    except IssueNotFound:
        return False
    return True
