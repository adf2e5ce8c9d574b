"""The readers' issue commands (/help, /start, /today, /headline, /briefs, /brief, /classic,
/toc, /issue, /search) and the section buttons: declared handlers of :class:`Reading`, which
:class:`~digest_core.commands.dispatch.Commands` answers.

A reply is at most :data:`MAX_REPLY_MESSAGES` messages; rendering runs in a worker thread and
is cached per revision (everyone's ``/today`` at 08:00 is rendered once).
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from digest_core.clock import zoned_text
from digest_core.commands.declaration import (
    Argument,
    Group,
    command,
    date_argument,
    echo,
    help_text,
    number,
    text,
)
from digest_core.commands.requests import CHOICE_PREFIX, Choice, Reply, Request, Status
from digest_core.errors import BadArgument, IssueNotFound
from digest_core.models import Issue, Section, counted
from digest_core.rendering import Message, Part, RenderOptions, notice, render
from digest_core.site.links import anchor

if TYPE_CHECKING:
    from digest_core.commands.dispatch import Answer, Commands

#: the longest /search keyword (quoted back whole, escaped)
MAX_SEARCH_CHARS = 64

#: a brief number: ASCII digits only ("²".isdigit() is True), and short
_NUMBER = re.compile(r"[0-9]{1,4}")

#: what /brief says of a missing or wrong brief number (also /briefs with too many words)
GIVE_A_NUMBER = "请给出简讯编号，例如 /brief 2 / give a brief number"
#: what /issue and /start say of a missing date or a word too many
GIVE_A_DATE = "请给出日期 / give a date"


def _brief_number(word: str) -> int:
    if not _NUMBER.fullmatch(word):
        raise ValueError(word)
    return int(word)


def _keyword(word: str) -> str:
    if len(word) > MAX_SEARCH_CHARS:
        n = MAX_SEARCH_CHARS
        raise BadArgument(f"关键词太长（最多 {n} 个字符）/ keyword too long ({n} max)")
    return word


#: the part of an issue a section button (重点 / 简讯 / 经典回顾 on a post) shows
PART_OF_SECTION: dict[Section, Part] = {
    Section.HEADLINE: Part.HEADLINE,
    Section.BRIEFS: Part.BRIEFS,
    Section.CLASSIC: Part.CLASSIC,
}

#: rendered replies kept (a few parts of a few issues in each flavor)
RENDER_CACHE_SIZE = 128

#: the most messages one reply sends one reader; a longer part is trimmed (whole briefs first)
#: and its last message says what was left out and how to get it (``/brief N``, a link)
MAX_REPLY_MESSAGES = 4

#: the parts whose replies get the previous/next issue buttons (:attr:`Reply.navigation`)
NAVIGATED = frozenset({Part.ALL, Part.HEADLINE, Part.BRIEFS, Part.CLASSIC, Part.TOC})
#: the most brief buttons under the briefs (the first ones): with the previous/next row, ten
#: buttons, about a Feishu card's button room (CardLimits.button_reserve; on a card filled to
#: its budget the adapter drops the last one or two); DingTalk's ActionCard shows the first five
MAX_BRIEF_CHOICES = 8
PREVIOUS_LABEL = "← 上一期 / previous"
NEXT_LABEL = "下一期 / next →"
BRIEF_LABEL = "简讯 {n}"


#: the date argument that defaults to today
DATE_TODAY = date_argument(
    "YYYY-MM-DD (default: today)", "日期 YYYY-MM-DD（默认今天）", "日期 YYYY-MM-DD（預設今天）"
)
#: the same, words only (no typed option: the command's slash form takes none)
DATE_WORD = replace(DATE_TODAY, hidden=True)
#: /briefs' brief number, optional: a word that is not one is the date (/briefs DATE)
BRIEF_NUMBER = Argument(
    "n", "Only brief number n", "只看第 n 条简讯", "只看第 n 條簡訊", "编号", "編號",
    kind=number(1, 99, read=_brief_number), passes=True, bad=GIVE_A_NUMBER,
)  # fmt: skip


#: how the description of a part's command names the day's issue (今天的重点)
OF_TODAY = ("的", "的")
#: the same, for the whole issue's parts (今天这一期的目录)
THIS_ISSUE = ("这一期的", "這一期的")


def _part_of_day(
    part: Part, name: str, label: tuple[str, str], en: str, *, of: tuple[str, str] = OF_TODAY
) -> Answer:
    """The declared handler of ``/name [DATE]``: ``part`` of the day's issue (``label``: the
    part's simplified and traditional Chinese name, the command's label; ``en``: its English)."""

    @command(
        name,
        zh=f"今天{of[0]}{label[0]}",
        zh_tw=f"今天{of[1]}{label[1]}",
        en=f"The {en} of today's issue",
        usage=f"/{name} [YYYY-MM-DD]",
        args=(DATE_WORD,),
        label_zh=label[0],
        label_zh_tw=label[1],
    )
    async def answer(self: Reading, request: Request, date: dt.date | None) -> Reply:
        return await self._dated_part(request, part, date)

    return answer


class Reading:
    """The readers' issue commands over ``commands`` (its archive view, clock, replies and
    worker threads), with the render cache they share."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self._rendered: dict[tuple[object, ...], list[Message]] = {}
        self._rendered_lock = threading.Lock()

    def _render(
        self, request: Request, issue: Issue, part: Part, *, brief: int | None = None
    ) -> list[Message]:
        # replies look like the platform's posts (embeds or not, previews) but carry no
        # section buttons: the reader asked for one part already
        base = self.commands.post_options.get(request.platform, RenderOptions())
        options = replace(base, buttons=False)
        # many readers ask for the same part of the same issue (everyone's /today at 08:00):
        # render it once per revision; payloads are shared, so adapters MUST NOT mutate them
        key = (issue.date, issue.revision, len(issue.briefs), request.flavor, part, brief, options)
        with self._rendered_lock:
            cached = self._rendered.get(key)
        if cached is None:
            cached = render(issue, request.flavor, part, brief=brief, options=options)
            with self._rendered_lock:
                if len(self._rendered) >= RENDER_CACHE_SIZE:
                    self._rendered.pop(next(iter(self._rendered)))  # the oldest entry
                self._rendered[key] = cached
        return list(cached)

    def _capped(
        self, request: Request, issue: Issue, part: Part, *, brief: int | None = None, room: int
    ) -> list[Message]:
        """``part`` rendered in at most ``room`` messages (runs in a worker thread).

        When it needs more, the whole issue or all briefs keep as many briefs as fit in
        ``room - 1`` messages and a last message names the first brief left out (``/brief N``);
        anything else keeps its first ``room - 1`` messages and the last one gives the item's
        link.
        """
        messages = self._render(request, issue, part, brief=brief)
        if len(messages) <= room:
            return messages
        keep = room - 1
        total = len(issue.briefs)
        if part in (Part.ALL, Part.BRIEFS) and total:
            fits, lo, hi = None, 1, total - 1  # bisect the most briefs that still fit
            while lo <= hi:
                mid = (lo + hi) // 2
                shorter = issue.model_copy(update={"briefs": issue.briefs[:mid]})
                attempt = self._render(request, shorter, part)
                if len(attempt) <= keep:
                    fits, lo = (mid, attempt), mid + 1
                else:
                    hi = mid - 1
            if fits is not None:
                shown, kept = fits
                first = shown + 1
                when = "" if issue.date == self.commands.today_date() else f" {issue.date}"
                hint = (
                    f"… 另有 {total - shown} 条简讯未显示：用 /brief {first}{when} "
                    f"查看第 {first} 条（共 {total} 条）。\n"
                    f"… {total - shown} more briefs not shown: "
                    f"/brief {first}{when} shows brief {first} of {total}."
                )
                return [*kept, *notice(hint, request.flavor)]
        item = issue.headline
        if part is Part.CLASSIC and issue.classic is not None:
            item = issue.classic
        elif part is Part.BRIEF and brief is not None:
            item = issue.brief(brief)
        link = f" {item.url}" if item.url else ""
        hint = (
            f"… 太长，只显示了前 {keep} 条消息（共 {len(messages)} 条）。全文：{link or '见原文'}\n"
            f"… too long: showing {keep} of {len(messages)} messages. Full text:{link or ' n/a'}"
        )
        return [*messages[:keep], *notice(hint, request.flavor)]

    def _current(self, request: Request) -> tuple[Issue, str | None]:
        """Today's issue, or the latest visible one with a note saying so (and, before
        today's publish time, when today's comes)."""
        today = self.commands.today_date()
        issue = self.commands.view(request).latest(on_or_before=today)
        if issue.date == today:
            return issue, None
        if not self.commands.embargo.visible(today) and not self.commands.embargo.held(today):
            at = self.commands.embargo.publish_time(today).astimezone(self.commands.zone)
            return issue, (
                f"今天（{today}）的日报将于 {at:%H:%M} 发布，这是最新一期：{issue.date}。\n"
                f"Today's issue ({today}) comes at {zoned_text(at, day=False)}; here is the "
                f"latest, from {issue.date}."
            )
        return issue, (
            f"今天（{today}）的日报还没有发布，这是最新一期：{issue.date}。\n"
            f"Today's issue ({today}) is not out yet; here is the latest, from {issue.date}."
        )

    def navigation(
        self, request: Request, issue: Issue, part: Part
    ) -> tuple[tuple[Choice, ...], ...]:
        """The issue buttons under ``part`` of ``issue`` (runs in a worker thread): previous /
        next issue (``rd:issue DATE``, the nearest older and newer dates the requester's view
        of the archive has, so never an embargoed one for a reader; none past the newest),
        and under the briefs one ``rd:brief N DATE`` per brief (the first
        :data:`MAX_BRIEF_CHOICES`)."""
        if part not in NAVIGATED:
            return ()
        older, newer = self.commands.view(request).neighbours(issue.date)
        row: list[Choice] = []
        if older is not None:
            row.append(Choice(PREVIOUS_LABEL, f"{CHOICE_PREFIX}issue {older}"))
        if newer is not None:
            row.append(Choice(NEXT_LABEL, f"{CHOICE_PREFIX}issue {newer}"))
        rows = [tuple(row)] if row else []
        if part is Part.BRIEFS and issue.briefs:
            shown = range(1, min(len(issue.briefs), MAX_BRIEF_CHOICES) + 1)
            rows.append(
                tuple(
                    Choice(BRIEF_LABEL.format(n=n), f"{CHOICE_PREFIX}brief {n} {issue.date}")
                    for n in shown
                )
            )
        return tuple(rows)

    async def _part(self, request: Request, part: Part, *, brief: int | None = None) -> Reply:
        return await self.commands.off_loop(self._current_part, request, part, brief)

    def _current_part(self, request: Request, part: Part, brief: int | None) -> Reply:
        issue, note = self._current(request)
        head = notice(note, request.flavor) if note else []
        room = MAX_REPLY_MESSAGES - len(head)
        messages = [*head, *self._capped(request, issue, part, brief=brief, room=room)]
        return Reply(messages, navigation=self.navigation(request, issue, part))

    def _dated(self, request: Request, date: dt.date, part: Part, brief: int | None) -> Reply:
        issue = self.commands.view(request).on(date)
        messages = self._capped(request, issue, part, brief=brief, room=MAX_REPLY_MESSAGES)
        return Reply(messages, navigation=self.navigation(request, issue, part))

    async def _dated_part(self, request: Request, part: Part, date: dt.date | None) -> Reply:
        """``part`` of today's issue, or of the issue of ``date``."""
        if date is None:
            return await self._part(request, part)
        return await self.commands.off_loop(self._dated, request, date, part, None)

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        """What a section button of the post of ``date`` answers: that section of that issue
        (not today's), whole, for the presser only, in the platform's post style without
        buttons; rendered once per revision (the render cache) however many readers press.

        A missing or broken issue is a ``NOT_FOUND`` reply whose ``extra["problem"]`` is the
        reader-safe explanation (short enough for a callback alert's 200 characters mostly).
        """
        try:
            issue = await self.commands.off_loop(self.commands.view(request).on, date)
        except IssueNotFound as exc:
            reply = self.commands.reply(request, str(exc), status=Status.NOT_FOUND, private=True)
            reply.extra["problem"] = str(exc)
            return reply
        part = PART_OF_SECTION[section]
        self.commands.readers.section(request.platform, date, section.value)
        messages = await self.commands.off_loop(self._render, request, issue, part)
        navigation = await self.commands.off_loop(self.navigation, request, issue, part)
        return Reply(messages, private=True, navigation=navigation)

    @command(
        "help",
        zh="全部命令",
        zh_tw="全部命令",
        en="All commands",
        usage="/help",
        label_zh="帮助",
        label_zh_tw="幫助",
        group=Group.HELP,
        quiet=True,
        lenient=True,
    )
    async def help(self, request: Request) -> Reply:
        return self.commands.reply(
            request, help_text(self.commands.specs, admin=bool(request.capabilities))
        )

    @command(
        "start",
        zh="欢迎和全部命令",
        zh_tw="歡迎和全部命令",
        en="Welcome and all commands",
        usage="/start [YYYY-MM-DD]",
        args=(DATE_WORD,),
        menu=False,
        group=Group.HELP,
        too_many=GIVE_A_DATE,
    )
    async def start(self, request: Request, date: dt.date | None) -> Reply:
        if date is not None:  # a deep link: that issue
            return await self._dated_part(request, Part.ALL, date)
        welcome = (
            "欢迎！这里每天推送 AI 技术日报。\n"
            "Welcome! This bot posts the daily AI tech digest.\n\n"
            + help_text(self.commands.specs, admin=False)
        )
        return self.commands.reply(request, welcome)

    @command(
        "today",
        zh="今天的日报（还没发布时给出最新一期）",
        zh_tw="今天的日報（還沒發布時給出最新一期）",
        en="Today's issue (the latest one if today's is not out yet)",
        usage="/today",
        label_zh="今日",
        label_zh_tw="今日",
    )
    async def today(self, request: Request) -> Reply:
        return await self._part(request, Part.ALL)

    headline = _part_of_day(Part.HEADLINE, "headline", ("重点", "重點"), "headline story")

    @command(
        "briefs",
        zh="今天的简讯，或其中一条",
        zh_tw="今天的簡訊，或其中一條",
        en="The briefs of today's issue, or one of them",
        usage="/briefs [N] [YYYY-MM-DD]",
        args=(BRIEF_NUMBER, DATE_TODAY),
        label_zh="简讯",
        label_zh_tw="簡訊",
        too_many=GIVE_A_NUMBER,
    )
    async def briefs(self, request: Request, n: int | None, date: dt.date | None) -> Reply:
        if n is None:
            return await self._dated_part(request, Part.BRIEFS, date)
        return await self.brief(request, n, date)

    @command(
        "brief",
        zh="按编号看一条简讯，例如 /brief 2",
        zh_tw="按編號看一條簡訊，例如 /brief 2",
        en="One brief by its number, e.g. /brief 2",
        usage="/brief N [YYYY-MM-DD]",
        args=(
            replace(BRIEF_NUMBER, required=True, passes=False, missing=GIVE_A_NUMBER),
            DATE_WORD,
        ),
        label_zh="单条简讯",
        label_zh_tw="單條簡訊",
        covered_by="briefs",
        too_many=GIVE_A_NUMBER,
    )
    async def brief(self, request: Request, n: int, date: dt.date | None) -> Reply:
        if date is None:
            issue, _ = await self.commands.off_loop(self._current, request)
        else:
            issue = await self.commands.off_loop(self.commands.view(request).on, date)
        if not 1 <= n <= len(issue.briefs):
            return self.commands.reply(
                request,
                f"{issue.date} 这一期只有 {len(issue.briefs)} 条简讯，没有第 {n} 条。\n"
                f"The issue of {issue.date} has {counted(len(issue.briefs), 'brief')}; there is "
                f"no brief {n}.",
                status=Status.USAGE,
            )
        if date is not None:
            return await self.commands.off_loop(self._dated, request, date, Part.BRIEF, n)
        return await self._part(request, Part.BRIEF, brief=n)

    classic = _part_of_day(Part.CLASSIC, "classic", ("经典回顾", "經典回顧"), "classic review")
    toc = _part_of_day(Part.TOC, "toc", ("目录", "目錄"), "table of contents", of=THIS_ISSUE)

    @command(
        "issue",
        zh="某一天的日报",
        zh_tw="某一天的日報",
        en="The issue of a given date",
        usage="/issue YYYY-MM-DD",
        args=(
            date_argument(
                "YYYY-MM-DD (pick one from the list)",
                "日期 YYYY-MM-DD（可从列表中选）",
                "日期 YYYY-MM-DD（可從列表中選）",
                required=True,
            ),
        ),
        label_zh="往期",
        label_zh_tw="往期",
        too_many=GIVE_A_DATE,
    )
    async def issue(self, request: Request, date: dt.date) -> Reply:
        return await self._dated_part(request, Part.ALL, date)

    @command(
        "search",
        zh="搜索往期",
        zh_tw="搜尋往期",
        en="Search past issues",
        usage="/search 关键词",
        args=(
            Argument(
                "keyword",
                "A word to look for",
                "要找的词",
                "要找的詞",
                "关键词",
                "關鍵詞",
                kind=text(1, MAX_SEARCH_CHARS, read=_keyword, rest=True),
                required=True,
            ),
        ),
        label_zh="搜索",
        label_zh_tw="搜尋",
    )
    async def search(self, request: Request, keyword: str) -> Reply:
        hits = await self.commands.off_loop(self.commands.view(request).search, keyword, limit=10)
        shown = echo(keyword, limit=MAX_SEARCH_CHARS)  # a NUL or U+202E is quoted, not echoed
        if not hits:
            return self.commands.reply(
                request,
                f"往期中没有找到“{shown}”。\nNo issue mentions “{shown}”.",
                status=Status.NOT_FOUND,
            )
        self.commands.readers.found(
            request.platform,
            [
                (h.date, anchor(h.section, h.index if h.section is Section.BRIEFS else None))
                for h in hits
            ],
        )
        lines = [f"“{shown}” — {len(hits)} 条结果 / hits:"]
        lines += [hit.describe() for hit in hits]
        lines.append("用 /issue 日期 查看全文 / use /issue DATE to read one")
        return self.commands.reply(request, "\n".join(lines))
