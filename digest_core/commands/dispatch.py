"""Reader and admin commands as plain async functions: a Request in, reply messages out.

Every adapter parses its own input into a :class:`Request` and sends
the returned :class:`Reply` messages back; the behaviour is the same everywhere. Each command
is one declaration on its handler (:func:`~digest_core.commands.declaration.command`);
:meth:`Commands.handle` checks the capability it needs, then reads its arguments into the
handler's typed values, for every platform. A wrong argument (a
:class:`~digest_core.errors.BadArgument`) gets a reply with the usage, never an exception.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import ParamSpec, TypeVar

from digest_core.archive import Archive
from digest_core.clock import Clock, zoned_text
from digest_core.commands import editor as editor_commands
from digest_core.commands.declaration import (
    MAX_ECHO_CHARS,
    Argument,
    CommandSpec,
    Completion,
    Group,
    command,
    date_argument,
    declared,
    echo,
    flag,
    help_text,
    number,
    ordered,
    text,
)
from digest_core.commands.requests import (
    ADMIN,
    AdminBackend,
    Capability,
    Choice,
    Reply,
    Request,
    Status,
)
from digest_core.errors import BadArgument, CommandRefused, IssueNotFound, NotRunning
from digest_core.metrics import NULL_METRICS, MetricsSink
from digest_core.models import Issue, Section, counted
from digest_core.publishing.embargo import Embargo, VisibleArchive
from digest_core.rendering import (
    Message,
    Part,
    RenderOptions,
    notice,
    render,
)

log = logging.getLogger(__name__)

#: the request/reply types live in :mod:`digest_core.commands.requests`; adapters import them from
#: here
__all__ = [
    "ADMIN",
    "MAX_ECHO_CHARS",
    "AdminBackend",
    "Capability",
    "Choice",
    "Commands",
    "Reply",
    "Request",
    "Status",
]

#: the longest /search keyword (quoted back whole, escaped)
MAX_SEARCH_CHARS = 64

#: a brief number: ASCII digits only ("²".isdigit() is True), and short
_NUMBER = re.compile(r"[0-9]{1,4}")

#: what /brief says of a missing or wrong brief number (also /briefs with too many words)
GIVE_A_NUMBER = "请给出简讯编号，例如 /brief 2 / give a brief number"
#: what /issue and /start say of a missing date or a word too many
GIVE_A_DATE = "请给出日期 / give a date"
#: what /reactivate says of a missing target or a word too many
GIVE_A_TARGET = "请给出目标 ID / give the target id"
#: what an admin command says while the bot's delivery is not running
NOT_RUNNING = "推送服务未运行 / delivery is not running"


def _brief_number(word: str) -> int:
    if not _NUMBER.fullmatch(word):
        raise ValueError(word)
    return int(word)


def _keyword(word: str) -> str:
    if len(word) > MAX_SEARCH_CHARS:
        n = MAX_SEARCH_CHARS
        raise BadArgument(f"关键词太长（最多 {n} 个字符）/ keyword too long ({n} max)")
    return word


def _target(word: str) -> tuple[str, str]:
    """``[PLATFORM:]ID`` as (platform or "", id)."""
    platform, _, target_id = word.rpartition(":")
    return platform, target_id


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

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: what answers one command: a declared handler bound to its owner, given the request and the
#: values of the command's arguments by name
Answer = Callable[..., Awaitable[Reply]]


#: what may answer a command before its arguments are read (None: go on)
Guard = Callable[[CommandSpec, Request], Reply | None]


@dataclass(frozen=True)
class Declared:
    """A command :class:`Commands` answers: its declaration, its bound handler and the guard
    of its owner."""

    spec: CommandSpec
    answer: Answer
    guard: Guard | None = None


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
    async def answer(self: Commands, request: Request, date: dt.date | None) -> Reply:
        return await self._dated_part(request, part, date)

    return answer


class Commands:
    """The command set, bound to an archive, a clock and (for admin commands) a backend.

    Nothing a command does with files runs on the event loop: archive look-ups (stat, listing,
    parsing, search) and rendering run in a worker thread, so a reader asking for a huge issue
    never holds up another reader's ``/help``. A reply is at most :data:`MAX_REPLY_MESSAGES`
    messages.
    """

    def __init__(
        self,
        archive: Archive,
        clock: Clock,
        zone: dt.tzinfo,
        *,
        backend: AdminBackend | None = None,
        post_options: dict[str, RenderOptions] | None = None,
        subscribable: frozenset[str] = frozenset(),
        metrics: MetricsSink = NULL_METRICS,
        embargo: Embargo | None = None,
    ):
        """``post_options`` are the platforms' channel-post options by platform name;
        ``subscribable`` names the platforms that can send the daily issue privately;
        ``metrics`` hears how long each command took; ``embargo`` decides what readers may
        see (default: a day from its local midnight). Every reader command reads the archive
        through :meth:`view`, never directly."""
        self.archive = archive
        self.clock = clock
        self.zone = zone
        self.embargo = embargo or Embargo(zone=zone, post_time=dt.time(0, 0), clock=clock)
        self.backend = backend
        self.post_options = post_options or {}
        self.subscribable = subscribable
        self.metrics = metrics
        self._rendered: dict[tuple[object, ...], list[Message]] = {}
        self._rendered_lock = threading.Lock()
        self._in_threads = 0
        watch = getattr(clock, "watch", None)
        if callable(watch):  # a ManualClock must not jump while a thread works for a command
            watch(lambda: self._in_threads > 0)
        self._table: dict[str, Declared] = {}
        self.declare(self)
        self.declare(editor_commands, self)

    @property
    def names(self) -> list[str]:
        return list(self._table)

    @property
    def specs(self) -> tuple[CommandSpec, ...]:
        """The declarations of the commands answered here, in ``/help``'s order."""
        return ordered(d.spec for d in self._table.values())

    def declare(self, owner: object, *bound: object, guard: Guard | None = None) -> None:
        """Answer every command declared on ``owner`` (an object whose methods
        carry :func:`~digest_core.commands.declaration.command`, or a module of such functions,
        called with ``bound`` before the request); a command of the same name is replaced.
        ``guard`` may answer one of them after the capability check, before its arguments are read
        (the readers' commands where private deliveries are not available)."""
        for spec, attr in declared(owner):
            handler = getattr(owner, attr)
            if bound:
                handler = functools.partial(handler, *bound)
            self._table[spec.name] = Declared(spec, handler, guard)

    async def handle(self, request: Request) -> Reply:
        """Run one command. Never raises for bad input: the reply explains and shows usage."""
        name = request.command.lower().lstrip("/")
        started = self.clock.monotonic()
        reply = await self._handle(name, request)
        known = name if name in self._table else "unknown"  # a bounded label set
        self.metrics.command(
            request.platform,
            known,
            self.clock.monotonic() - started,
            status=reply.status.value,
        )
        return reply

    async def _handle(self, name: str, request: Request) -> Reply:
        entry = self._table.get(name)
        if entry is None:
            shown = echo(name)
            return self.reply(
                request,
                f"未知命令 /{shown}。发送 /help 查看全部命令。\n"
                f"Unknown command /{shown}; try /help.",
                status=Status.USAGE,
            )
        try:
            needs = entry.spec.needs
            if needs is not None and needs not in request.capabilities:
                raise CommandRefused(name, needs)
            if entry.guard is not None and (early := entry.guard(entry.spec, request)):
                return early
            return await entry.answer(request, **entry.spec.arguments(request))
        except CommandRefused as exc:
            return await self._refused(request, exc)
        except BadArgument as exc:
            return self.reply(
                request,
                f"{exc.problem}\n用法 / usage: {entry.spec.usage}",
                status=Status.USAGE,
                private=entry.spec.dm,
            )
        except IssueNotFound as exc:
            return self.reply(request, str(exc), status=Status.NOT_FOUND)
        except NotRunning as exc:
            return self.reply(request, str(exc), status=Status.USAGE)
        except Exception:
            # a command must never surface a traceback to a reader; the log keeps it
            log.exception("command /%s %r failed", name, request.args)
            return self.reply(
                request,
                f"抱歉，/{name} 出错了，请稍后再试。\n"
                f"Sorry, /{name} failed; please try again later.",
                status=Status.ERROR,
            )

    # ------------------------------------------------------------ helpers

    def today_date(self) -> dt.date:
        return self.clock.now().astimezone(self.zone).date()

    def view(self, request: Request) -> VisibleArchive:
        """The archive as the sender of ``request`` may see it now (admins: everything)."""
        return self.embargo.view(self.archive, admin=bool(request.capabilities))

    async def off_loop(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` in a worker thread: file I/O, parsing and rendering."""
        self._in_threads += 1
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        finally:
            self._in_threads -= 1

    def reply(
        self,
        request: Request,
        text: str,
        *,
        status: Status = Status.OK,
        private: bool = False,
        choices: tuple[tuple[Choice, ...], ...] = (),
    ) -> Reply:
        """A reply of one notice, ``text`` in the request's flavor."""
        return Reply(notice(text, request.flavor), status=status, private=private, choices=choices)

    def running(self) -> AdminBackend:
        """The admin backend; :class:`~digest_core.errors.NotRunning` while the bot's delivery
        is not running (answered 推送服务未运行 / delivery is not running)."""
        if self.backend is None:
            raise NotRunning(NOT_RUNNING)
        return self.backend

    def _render(
        self, request: Request, issue: Issue, part: Part, *, brief: int | None = None
    ) -> list[Message]:
        # replies look like the platform's posts (embeds or not, previews) but carry no
        # section buttons: the reader asked for one part already
        base = self.post_options.get(request.platform, RenderOptions())
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
                when = "" if issue.date == self.today_date() else f" {issue.date}"
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
        today = self.today_date()
        issue = self.view(request).latest(on_or_before=today)
        if issue.date == today:
            return issue, None
        if not self.embargo.visible(today) and not self.embargo.held(today):
            at = self.embargo.publish_time(today).astimezone(self.zone)
            return issue, (
                f"今天（{today}）的日报将于 {at:%H:%M} 发布，这是最新一期：{issue.date}。\n"
                f"Today's issue ({today}) comes at {zoned_text(at, day=False)}; here is the "
                f"latest, from {issue.date}."
            )
        return issue, (
            f"今天（{today}）的日报还没有发布，这是最新一期：{issue.date}。\n"
            f"Today's issue ({today}) is not out yet; here is the latest, from {issue.date}."
        )

    async def _part(self, request: Request, part: Part, *, brief: int | None = None) -> Reply:
        return Reply(await self.off_loop(self._current_part, request, part, brief))

    def _current_part(self, request: Request, part: Part, brief: int | None) -> list[Message]:
        issue, note = self._current(request)
        head = notice(note, request.flavor) if note else []
        room = MAX_REPLY_MESSAGES - len(head)
        return [*head, *self._capped(request, issue, part, brief=brief, room=room)]

    def _dated(
        self, request: Request, date: dt.date, part: Part, brief: int | None
    ) -> list[Message]:
        issue = self.view(request).on(date)
        return self._capped(request, issue, part, brief=brief, room=MAX_REPLY_MESSAGES)

    async def _dated_part(self, request: Request, part: Part, date: dt.date | None) -> Reply:
        """``part`` of today's issue, or of the issue of ``date``."""
        if date is None:
            return await self._part(request, part)
        return Reply(await self.off_loop(self._dated, request, date, part, None))

    # ------------------------------------------------------------ section buttons

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        """What a section button of the post of ``date`` answers: that section of that issue
        (not today's), whole, for the presser only, in the platform's post style without
        buttons; rendered once per revision (the render cache) however many readers press.

        A missing or broken issue is a ``NOT_FOUND`` reply whose ``extra["problem"]`` is the
        reader-safe explanation (short enough for a callback alert's 200 characters mostly).
        """
        try:
            issue = await self.off_loop(self.view(request).on, date)
        except IssueNotFound as exc:
            reply = self.reply(request, str(exc), status=Status.NOT_FOUND, private=True)
            reply.extra["problem"] = str(exc)
            return reply
        part = PART_OF_SECTION[section]
        return Reply(await self.off_loop(self._render, request, issue, part), private=True)

    # ------------------------------------------------------------ reader commands

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
        return self.reply(request, help_text(self.specs, admin=bool(request.capabilities)))

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
            + help_text(self.specs, admin=False)
        )
        return self.reply(request, welcome)

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
            issue, _ = await self.off_loop(self._current, request)
        else:
            issue = await self.off_loop(self.view(request).on, date)
        if not 1 <= n <= len(issue.briefs):
            return self.reply(
                request,
                f"{issue.date} 这一期只有 {len(issue.briefs)} 条简讯，没有第 {n} 条。\n"
                f"The issue of {issue.date} has {counted(len(issue.briefs), 'brief')}; there is "
                f"no brief {n}.",
                status=Status.USAGE,
            )
        if date is not None:
            return Reply(await self.off_loop(self._dated, request, date, Part.BRIEF, n))
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
        hits = await self.off_loop(self.view(request).search, keyword, limit=10)
        shown = echo(keyword, limit=MAX_SEARCH_CHARS)  # a NUL or U+202E is quoted, not echoed
        if not hits:
            return self.reply(
                request,
                f"往期中没有找到“{shown}”。\nNo issue mentions “{shown}”.",
                status=Status.NOT_FOUND,
            )
        lines = [f"“{shown}” — {len(hits)} 条结果 / hits:"]
        lines += [hit.describe() for hit in hits]
        lines.append("用 /issue 日期 查看全文 / use /issue DATE to read one")
        return self.reply(request, "\n".join(lines))

    async def subscription(self, request: Request, *, on: bool) -> Reply:
        """The plain daily subscription of the requester's chat, on or off."""
        if self.backend is None or request.platform not in self.subscribable:
            return self.reply(
                request,
                "这里不支持订阅 / subscriptions are not available here",
                status=Status.USAGE,
            )
        changed = await self.backend.subscribe(request.platform, request.chat, on=on)
        if on:
            text = (
                "已订阅：每天的日报会私信发给你。/unsubscribe 取消。\n"
                "Subscribed: the daily issue will come by private message."
                if changed
                else "你已经订阅了。/ You are already subscribed."
            )
        else:
            text = (
                "已取消订阅。/ Unsubscribed."
                if changed
                else "你没有订阅。/ You were not subscribed."
            )
        return self.reply(request, text)

    # ------------------------------------------------------------ admin commands

    async def _refused(self, request: Request, refused: CommandRefused) -> Reply:
        """The one answer to a refused command: private, audited, logged."""
        action = refused.command
        if self.backend is not None:
            await self.backend.audit(request, action=action, allowed=False, outcome="refused")
        log.warning(
            "refused /%s from %s:%s (needs %s)",
            action, request.platform, request.user, refused.capability,
        )  # fmt: skip
        return self.reply(
            request,
            f"抱歉，/{action} 只有管理员可以使用。\nSorry, /{action} is for admins only.",
            status=Status.REFUSED,
            private=True,
        )

    async def _done(self, request: Request, action: str, summary: str) -> Reply:
        """An admin action's ``summary``, audited and told privately."""
        await self.running().audit(request, action=action, allowed=True, outcome=summary)
        return self.reply(request, summary, private=True)

    @command(
        "repost",
        zh="管理员：把某一期重新推送到所有频道",
        zh_tw="管理員：把某一期重新推送到所有頻道",
        en="Admins: post an issue to every channel again",
        usage="/repost [YYYY-MM-DD] [force]",
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
        ),
        needs=Capability.REPOST,
        label_zh="重新推送",
        label_zh_tw="重新推送",
    )
    async def repost(self, request: Request, date: dt.date | None, force: bool) -> Reply:
        date = date or self.today_date()
        # IssueNotFound → a clear reply before anything is asked
        await self.off_loop(self.archive.on, date)
        backend = self.running()
        if not request.confirmed:
            what = (
                "全部重发 / resend everything" if force else "只补发缺失部分 / send what is missing"
            )
            return Reply(
                notice(
                    f"确认重新推送 {date} 的日报？{what}\nRepost the issue of {date}?",
                    request.flavor,
                ),
                # the resolved date goes into the confirmation: pressed after midnight, it
                # still reposts the day that was asked about; a confirmation is words
                confirm=replace(
                    request,
                    args=(date.isoformat(), *(("force",) if force else ())),
                    values=None,
                    confirmed=True,
                ),
                status=Status.CONFIRM,
                private=True,
            )
        requested_by = f"{request.platform}:{request.user}"
        summary = await backend.repost(date, force=force, requested_by=requested_by)
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
    )
    async def correct(self, request: Request, date: dt.date | None) -> Reply:
        """``/correct [DATE]``: edit the day's posted messages to the file's revision (no
        confirmation: it only makes the posts match the archive, and a rerun changes nothing)."""
        date = date or self.today_date()
        await self.off_loop(self.archive.on, date)  # IssueNotFound → a clear reply
        requested_by = f"{request.platform}:{request.user}"
        summary = await self.running().correct_issue(date, requested_by=requested_by)
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
        lenient=True,
    )
    async def status(self, request: Request) -> Reply:
        return self.reply(request, await self.running().status(), private=True)

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
        too_many=GIVE_A_TARGET,
    )
    async def reactivate(self, request: Request, target: tuple[str, str]) -> Reply:
        platform, target_id = target
        platform = platform or request.platform
        backend = self.running()
        changed = await backend.reactivate(platform, target_id)
        outcome = "reactivated" if changed else "not deactivated"
        await backend.audit(request, action="reactivate", allowed=True, outcome=outcome)
        if not changed:
            shown = echo(f"{platform}:{target_id}")
            return self.reply(
                request,
                f"{shown} 没有被停用。/ {shown} was not deactivated.",
                status=Status.NOT_FOUND,
                private=True,
            )
        return self.reply(
            request,
            f"已恢复 {platform}:{target_id}，下次推送会发给它。"
            f"\n{platform}:{target_id} is active again; the next post goes there.",
            private=True,
        )


def parse_command_line(line: str) -> tuple[str, tuple[str, ...]] | None:
    """Split ``/cmd@bot arg1 arg2`` into ``("cmd", ("arg1", "arg2"))``; None if not a command."""
    line = line.strip()
    if not line.startswith("/") or len(line) < 2:
        return None
    head, *rest = line.split()
    name = head[1:].split("@", 1)[0].lower()
    if not name:
        return None
    return name, tuple(rest)
