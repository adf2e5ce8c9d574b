"""An issue file sent to the bot by an admin: checked, stored as `archive add` does, answered."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from digest_core.archive.adding import MAX_ADD_BYTES, Added, add_issue
from digest_core.clock import zoned_text
from digest_core.commands import MAX_REPLY_MESSAGES, Capability, Reply, Request, Status
from digest_core.errors import (
    CommandRefused,
    ConfigError,
    DigestError,
    IssueFormatError,
    IssuePublished,
)
from digest_core.models import shorten
from digest_core.rendering import Message, Part, RenderOptions, notice, render

if TYPE_CHECKING:
    from pathlib import Path

    from digest_core.commands.dispatch import Commands

log = logging.getLogger(__name__)

#: the most problems of a refused file listed in the answer (the rest: digest-bot validate)
MAX_PROBLEM_LINES = 10

#: the audit log's name for an upload
ACTION = "upload"
#: the capability an upload needs
NEEDS = Capability.REPOST
#: what a sender without it is told
ADMINS_ONLY = "只有管理员可以发送日报文件。\nOnly admins can send issue files to the bot."


class IssueUploads:
    """What every adapter does with an issue file an admin sent privately (a Telegram
    document, a Discord attachment): the same checks, the same store, the same answer.

    :meth:`take` decides with what the adapter knows before downloading (who sent it, how
    large it is) and only then asks the adapter for the bytes. The file is stored with
    :func:`~digest_core.archive.adding.add_issue` (validated, written atomically, a published day
    replaced only as a correction). The answer is private:
    the errors (``name:line: detail``) and warnings, or a line saying where it was stored and
    when it posts followed by the preview of the post as readers will get it. A sender
    without :data:`NEEDS` is refused by ``commands`` (:meth:`Commands.refuse
    <digest_core.commands.dispatch.Commands.refuse>`, audited as every refusal), which also give the
    audit log and the platforms' post options.
    """

    def __init__(
        self,
        archive_dir: Path,
        *,
        post_at: Callable[[dt.date], dt.datetime],
        now: Callable[[], dt.datetime],
        commands: Commands,
    ) -> None:
        self.archive_dir = archive_dir
        self.post_at = post_at
        self.now = now
        self.commands = commands
        self.backend = commands.backend
        self.post_options = commands.post_options

    async def take(
        self,
        request: Request,
        *,
        name: str,
        size: int | None,
        download: Callable[[], Awaitable[bytes]],
    ) -> Reply:
        """:meth:`refusal`, then (only when the file is taken) ``download()`` and
        :meth:`receive`. ``download`` raises :class:`~digest_core.errors.DigestError` (a
        :class:`~digest_core.errors.TransientError`) when the platform cannot give the file."""
        refused = await self.refusal(request, name=name, size=size)
        if refused is not None:
            return refused
        try:
            data = await download()
        except DigestError as exc:
            log.warning("could not download %s from %s: %s", name, request.platform, exc)
            return self._text(
                request,
                f"文件下载失败，请重发 / the file could not be downloaded: {exc}",
                Status.ERROR,
            )
        return await self.receive(request, name=name, data=data)

    async def refusal(self, request: Request, *, name: str, size: int | None) -> Reply | None:
        """Why the file cannot be taken before it is downloaded, or ``None``: the sender is not
        an admin (refused by the core, audited with the file's name), or it is larger than
        1 MiB."""
        if NEEDS not in request.capabilities:
            refused = CommandRefused(ACTION, NEEDS, told=ADMINS_ONLY, outcome=name)
            return await self.commands.refuse(request, refused)
        if size is not None and size > MAX_ADD_BYTES:
            return self._text(
                request,
                f"未收录 / not stored: {shorten(name, 60)} is {size} bytes; an issue file is "
                "at most 1 MiB",
                Status.USAGE,
            )
        return None

    async def receive(self, request: Request, *, name: str, data: bytes) -> Reply:
        """Check ``data`` (the file ``name``) and store it. ``request.args`` are the words sent
        with it (a caption): a date ``YYYY-MM-DD`` for a file whose name carries none, and
        ``correct`` to replace a published issue."""
        refused = await self.refusal(request, name=name, size=len(data))
        if refused is not None:
            return refused
        words = [a.lower().lstrip("/") for a in request.args]
        correct = "correct" in words
        date = next((d for w in words if (d := _date(w)) is not None), None)
        shown = shorten(name, 60)
        try:
            added = await asyncio.to_thread(
                add_issue,
                self.archive_dir,
                data,
                name=name,
                date=date,
                published=lambda day: self.post_at(day) <= self.now(),
                correct=correct,
                shown=shown,
            )
        except (IssueFormatError, IssuePublished, ConfigError) as exc:
            await self._audit(request, f"refused {shown}: {exc}")
            hint = ""
            if isinstance(exc, IssuePublished):
                hint = "\n发送时在说明里写 correct 即为更正 / send it with the caption correct"
            problems = str(exc)
            if isinstance(exc, IssueFormatError):  # one line each, with its own line number
                lines = exc.lines()
                shown_lines = lines[:MAX_PROBLEM_LINES]
                if len(lines) > MAX_PROBLEM_LINES:
                    shown_lines.append(f"… +{len(lines) - MAX_PROBLEM_LINES} (digest-bot validate)")
                problems = "\n".join(shown_lines)
            return self._text(request, f"未收录 / not stored:\n{problems}{hint}", Status.USAGE)
        except OSError as exc:
            log.error("could not store %s: %s", name, exc)
            return self._text(
                request, f"未能保存 / could not store it: {exc.strerror or exc}", Status.ERROR
            )
        await self._audit(request, f"stored {added.path.name} revision {added.issue.revision}")
        return Reply(
            [*notice(self._stored(added), request.flavor), *self._preview(request, added)],
            private=True,
        )

    def _stored(self, added: Added) -> str:
        issue = added.issue
        n = len(issue.briefs)
        what = f"{issue.date} · {shorten(issue.headline.title, 50)} · {n} briefs"
        if added.unchanged:
            head = f"没有变化 / unchanged: {added.path.name} ({what})"
        elif added.corrected:
            head = (
                f"已更正 / corrected: {added.path.name} ({what}); readers who got it keep the "
                "old text until the correction is sent"
            )
        else:
            at = self.post_at(issue.date)
            head = f"已收录 / stored: {added.path.name} ({what}); posts {zoned_text(at)}"
        lines = [head, *(f"⚠ {hint}" for hint in added.hints[:5])]
        if added.removed:
            lines.append("替换了 / replaced: " + ", ".join(p.name for p in added.removed))
        lines.append("预览 / preview:")
        return "\n".join(lines)

    def _preview(self, request: Request, added: Added) -> list[Message]:
        options = self.post_options.get(request.platform, RenderOptions())
        messages = render(added.issue, request.flavor, Part.ALL, options=options)
        room = MAX_REPLY_MESSAGES - 1
        if len(messages) <= room:
            return messages
        more = len(messages) - room + 1
        note = notice(
            f"… 另有 {more} 条消息 / {more} more messages: digest-bot preview --date "
            f"{added.issue.date}",
            request.flavor,
        )
        return [*messages[: room - 1], *note]

    async def _audit(self, request: Request, outcome: str) -> None:
        if self.backend is not None:
            await self.backend.audit(request, action=ACTION, allowed=True, outcome=outcome)

    def _text(self, request: Request, text: str, status: Status) -> Reply:
        return Reply(notice(text, request.flavor), private=True, status=status)


def _date(word: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(word) if len(word) == 10 else None
    except ValueError:
        return None
