"""Reader and admin commands as plain async functions: a Request in, reply messages out.

Every adapter parses its own input into a :class:`Request` and sends
the returned :class:`Reply` messages back; the behaviour is the same everywhere. A wrong argument
gets a reply with the usage, never an exception. Each command is one declaration on its handler
(:func:`~digest_core.declaration.command`); :meth:`Commands.handle` checks the capability it
needs before the handler runs, for every platform.
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

from digest_core import editor_commands
from digest_core.archive import Archive
from digest_core.clock import Clock, zoned_text
from digest_core.declaration import (
    Argument,
    CommandSpec,
    Completion,
    Group,
    command,
    declared,
    flag,
    help_text,
    number,
    ordered,
    text,
)
from digest_core.embargo import Embargo, VisibleArchive
from digest_core.errors import CommandRefused, IssueNotFound
from digest_core.metrics import NULL_METRICS, MetricsSink
from digest_core.models import Issue, Section, counted, shorten
from digest_core.rendering import (
    Message,
    Part,
    RenderOptions,
    notice,
    render,
)
from digest_core.requests import ADMIN, AdminBackend, Capability, Choice, Reply, Request, Status

log = logging.getLogger(__name__)

#: the request/reply types live in :mod:`digest_core.requests`; adapters import them from here
__all__ = [
    "ADMIN",
    "AdminBackend",
    "Capability",
    "Choice",
    "Commands",
    "Reply",
    "Request",
    "Status",
]

#: the most characters of a reader's own argument quoted back in a reply (``/issue <5000
#: digits>`` is answered with its first ones and ``…``, not all of them)
MAX_ECHO_CHARS = 40

#: the longest /search keyword (quoted back whole, escaped)
MAX_SEARCH_CHARS = 64

#: a brief number: ASCII digits only ("²".isdigit() is True), and short
_NUMBER = re.compile(r"[0-9]{1,4}")


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

#: what answers one command: a declared handler bound to its owner
Answer = Callable[[Request], Awaitable[Reply]]


@dataclass(frozen=True)
class Declared:
    """A command :class:`Commands` answers: its declaration and its bound handler."""

    spec: CommandSpec
    answer: Answer


def _date(en: str, zh: str, zh_tw: str, *, required: bool = False) -> Argument:
    """A date argument (looked up in the archive while typing, where a platform can)."""
    return Argument(
        "date", en, zh, zh_tw, "日期", "日期",
        kind=text(1, 32), required=required, complete=Completion.DATES,
    )  # fmt: skip


#: the date argument that defaults to today
DATE_TODAY = _date(
    "YYYY-MM-DD (default: today)", "日期 YYYY-MM-DD（默认今天）", "日期 YYYY-MM-DD（預設今天）"
)


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

    def declare(self, owner: object, *bound: object) -> None:
        """Answer every command declared on ``owner`` (an object whose methods carry
        :func:`~digest_core.declaration.command`, or a module of such functions, called with
        ``bound`` before the request); a command of the same name is replaced."""
        for spec, attr in declared(owner):
            handler = getattr(owner, attr)
            if bound:
                handler = functools.partial(handler, *bound)
            self._table[spec.name] = Declared(spec, handler)

    def usage(self, command: str) -> str:
        """The usage line of ``command`` from its declaration (``/help`` for an unknown one)."""
        entry = self._table.get(command)
        return entry.spec.usage if entry is not None else "/help"

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
            shown = _echo(name)
            return self._text(
                request,
                f"未知命令 /{shown}。发送 /help 查看全部命令。\n"
                f"Unknown command /{shown}; try /help.",
                status=Status.USAGE,
            )
        try:
            needs = entry.spec.needs
            if needs is not None and needs not in request.capabilities:
                raise CommandRefused(name, needs)
            return await entry.answer(request)
        except CommandRefused as exc:
            return await self._refused(request, exc)
        except IssueNotFound as exc:
            return self._text(request, str(exc), status=Status.NOT_FOUND)
        except Exception:
            # a command must never surface a traceback to a reader; the log keeps it
            log.exception("command /%s %r failed", name, request.args)
            return self._text(
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

    async def _off_loop(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` in a worker thread: file I/O, parsing and rendering."""
        self._in_threads += 1
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        finally:
            self._in_threads -= 1

    def _text(
        self, request: Request, text: str, *, status: Status = Status.OK, private: bool = False
    ) -> Reply:
        return Reply(notice(text, request.flavor), status=status, private=private)

    def _usage(self, request: Request, problem: str) -> Reply:
        usage = self.usage(request.command.lower().lstrip("/"))
        return self._text(request, f"{problem}\n用法 / usage: {usage}", status=Status.USAGE)

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
        return Reply(await self._off_loop(self._current_part, request, part, brief))

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

    async def _dated_part(self, request: Request, part: Part) -> Reply:
        """``part`` of today's issue, or of the issue of the one optional date argument."""
        if not request.args:
            return await self._part(request, part)
        if len(request.args) > 1:
            return self._usage(request, "参数太多 / too many arguments")
        try:
            date = dt.date.fromisoformat(request.args[0])
        except ValueError:
            return self._usage(request, f"“{_echo(request.args[0])}” 不是日期 / is not a date")
        return Reply(await self._off_loop(self._dated, request, date, part, None))

    # ------------------------------------------------------------ section buttons

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        """What a section button of the post of ``date`` answers: that section of that issue
        (not today's), whole, for the presser only, in the platform's post style without
        buttons; rendered once per revision (the render cache) however many readers press.

        A missing or broken issue is a ``NOT_FOUND`` reply whose ``extra["problem"]`` is the
        reader-safe explanation (short enough for a callback alert's 200 characters mostly).
        """
        try:
            issue = await self._off_loop(self.view(request).on, date)
        except IssueNotFound as exc:
            reply = self._text(request, str(exc), status=Status.NOT_FOUND, private=True)
            reply.extra["problem"] = str(exc)
            return reply
        part = PART_OF_SECTION[section]
        return Reply(await self._off_loop(self._render, request, issue, part), private=True)

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
    )
    async def help(self, request: Request) -> Reply:
        return self._text(request, help_text(self.specs, admin=bool(request.capabilities)))

    @command(
        "start",
        zh="欢迎和全部命令",
        zh_tw="歡迎和全部命令",
        en="Welcome and all commands",
        usage="/start [YYYY-MM-DD]",
        menu=False,
        group=Group.HELP,
    )
    async def start(self, request: Request) -> Reply:
        if request.args:
            return await self.issue(request)
        welcome = (
            "欢迎！这里每天推送 AI 技术日报。\n"
            "Welcome! This bot posts the daily AI tech digest.\n\n"
            + help_text(self.specs, admin=False)
        )
        return self._text(request, welcome)

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
        if request.args:
            return self._usage(request, "/today 不需要参数 / takes no argument")
        return await self._part(request, Part.ALL)

    @command(
        "headline",
        zh="今天的重点",
        zh_tw="今天的重點",
        en="The headline story of today's issue",
        usage="/headline [YYYY-MM-DD]",
        label_zh="重点",
        label_zh_tw="重點",
    )
    async def headline(self, request: Request) -> Reply:
        return await self._dated_part(request, Part.HEADLINE)

    @command(
        "briefs",
        zh="今天的简讯，或其中一条",
        zh_tw="今天的簡訊，或其中一條",
        en="The briefs of today's issue, or one of them",
        usage="/briefs [N] [YYYY-MM-DD]",
        args=(
            Argument(
                "n",
                "Only brief number n",
                "只看第 n 条简讯",
                "只看第 n 條簡訊",
                "编号",
                "編號",
                kind=number(1, 99),
            ),
            DATE_TODAY,
        ),
        label_zh="简讯",
        label_zh_tw="簡訊",
    )
    async def briefs(self, request: Request) -> Reply:
        if len(request.args) == 1 and not _NUMBER.fullmatch(request.args[0]):
            return await self._dated_part(request, Part.BRIEFS)  # /briefs DATE
        if request.args:
            return await self.brief(request)
        return await self._part(request, Part.BRIEFS)

    @command(
        "brief",
        zh="按编号看一条简讯，例如 /brief 2",
        zh_tw="按編號看一條簡訊，例如 /brief 2",
        en="One brief by its number, e.g. /brief 2",
        usage="/brief N [YYYY-MM-DD]",
        label_zh="单条简讯",
        label_zh_tw="單條簡訊",
        covered_by="briefs",
    )
    async def brief(self, request: Request) -> Reply:
        if not 1 <= len(request.args) <= 2 or not _NUMBER.fullmatch(request.args[0]):
            return self._usage(request, "请给出简讯编号，例如 /brief 2 / give a brief number")
        n = int(request.args[0])
        date: dt.date | None = None
        if len(request.args) == 2:
            try:
                date = dt.date.fromisoformat(request.args[1])
            except ValueError:
                return self._usage(request, f"“{_echo(request.args[1])}” 不是日期 / is not a date")
        if date is None:
            issue, _ = await self._off_loop(self._current, request)
        else:
            issue = await self._off_loop(self.view(request).on, date)
        if not 1 <= n <= len(issue.briefs):
            return self._text(
                request,
                f"{issue.date} 这一期只有 {len(issue.briefs)} 条简讯，没有第 {n} 条。\n"
                f"The issue of {issue.date} has {counted(len(issue.briefs), 'brief')}; there is "
                f"no brief {n}.",
                status=Status.USAGE,
            )
        if date is not None:
            return Reply(await self._off_loop(self._dated, request, date, Part.BRIEF, n))
        return await self._part(request, Part.BRIEF, brief=n)

    @command(
        "classic",
        zh="今天的经典回顾",
        zh_tw="今天的經典回顧",
        en="The classic review of today's issue",
        usage="/classic [YYYY-MM-DD]",
        label_zh="经典回顾",
        label_zh_tw="經典回顧",
    )
    async def classic(self, request: Request) -> Reply:
        return await self._dated_part(request, Part.CLASSIC)

    @command(
        "toc",
        zh="今天这一期的目录",
        zh_tw="今天這一期的目錄",
        en="The table of contents of today's issue",
        usage="/toc [YYYY-MM-DD]",
        label_zh="目录",
        label_zh_tw="目錄",
    )
    async def toc(self, request: Request) -> Reply:
        return await self._dated_part(request, Part.TOC)

    @command(
        "issue",
        zh="某一天的日报",
        zh_tw="某一天的日報",
        en="The issue of a given date",
        usage="/issue YYYY-MM-DD",
        args=(
            _date(
                "YYYY-MM-DD (pick one from the list)",
                "日期 YYYY-MM-DD（可从列表中选）",
                "日期 YYYY-MM-DD（可從列表中選）",
                required=True,
            ),
        ),
        label_zh="往期",
        label_zh_tw="往期",
    )
    async def issue(self, request: Request) -> Reply:
        if len(request.args) != 1:
            return self._usage(request, "请给出日期 / give a date")
        return await self._dated_part(request, Part.ALL)

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
                required=True,
            ),
        ),
        label_zh="搜索",
        label_zh_tw="搜尋",
    )
    async def search(self, request: Request) -> Reply:
        word = " ".join(request.args).strip()
        if not word:
            return self._usage(request, "请给出关键词 / give a keyword")
        if len(word) > MAX_SEARCH_CHARS:
            n = MAX_SEARCH_CHARS
            return self._usage(
                request, f"关键词太长（最多 {n} 个字符）/ keyword too long ({n} max)"
            )
        hits = await self._off_loop(self.view(request).search, word, limit=10)
        shown = _echo(word, limit=MAX_SEARCH_CHARS)  # a NUL or U+202E is quoted, not echoed
        if not hits:
            return self._text(
                request,
                f"往期中没有找到“{shown}”。\nNo issue mentions “{shown}”.",
                status=Status.NOT_FOUND,
            )
        lines = [f"“{shown}” — {len(hits)} 条结果 / hits:"]
        lines += [hit.describe() for hit in hits]
        lines.append("用 /issue 日期 查看全文 / use /issue DATE to read one")
        return self._text(request, "\n".join(lines))

    async def subscribe(self, request: Request) -> Reply:
        return await self._subscription(request, on=True)

    async def unsubscribe(self, request: Request) -> Reply:
        return await self._subscription(request, on=False)

    async def _subscription(self, request: Request, *, on: bool) -> Reply:
        if self.backend is None or request.platform not in self.subscribable:
            return self._text(
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
        return self._text(request, text)

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
        return self._text(
            request,
            f"抱歉，/{action} 只有管理员可以使用。\nSorry, /{action} is for admins only.",
            status=Status.REFUSED,
            private=True,
        )

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
    async def repost(self, request: Request) -> Reply:
        args = list(request.args)
        force = "force" in (a.lower() for a in args)
        args = [a for a in args if a.lower() != "force"]
        if len(args) > 1:
            return self._usage(request, "参数太多 / too many arguments")
        try:
            date = dt.date.fromisoformat(args[0]) if args else self.today_date()
        except ValueError:
            return self._usage(request, f"“{_echo(args[0])}” 不是日期 / is not a date")
        # IssueNotFound → a clear reply before anything is asked
        await self._off_loop(self.archive.on, date)
        if self.backend is None:
            return self._text(
                request, "推送服务未运行 / delivery is not running", status=Status.USAGE
            )
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
                # still reposts the day that was asked about
                confirm=replace(
                    request,
                    args=(date.isoformat(), *(("force",) if force else ())),
                    confirmed=True,
                ),
                status=Status.CONFIRM,
                private=True,
            )
        summary = await self.backend.repost(
            date, force=force, requested_by=f"{request.platform}:{request.user}"
        )
        await self.backend.audit(request, action="repost", allowed=True, outcome=summary)
        return self._text(request, summary, private=True)

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
    async def correct(self, request: Request) -> Reply:
        """``/correct [DATE]``: edit the day's posted messages to the file's revision (no
        confirmation: it only makes the posts match the archive, and a rerun changes nothing)."""
        if len(request.args) > 1:
            return self._usage(request, "参数太多 / too many arguments")
        try:
            date = dt.date.fromisoformat(request.args[0]) if request.args else self.today_date()
        except ValueError:
            return self._usage(request, f"“{request.args[0]}” 不是日期 / is not a date")
        await self._off_loop(self.archive.on, date)  # IssueNotFound → a clear reply
        if self.backend is None:
            return self._text(
                request, "推送服务未运行 / delivery is not running", status=Status.USAGE
            )
        summary = await self.backend.correct_issue(
            date, requested_by=f"{request.platform}:{request.user}"
        )
        await self.backend.audit(request, action="correct", allowed=True, outcome=summary)
        return self._text(request, summary, private=True)

    @command(
        "status",
        zh="管理员：下次推送、最近的推送、失败",
        zh_tw="管理員：下次推送、最近的推送、失敗",
        en="Admins: next post, last deliveries, failures",
        usage="/status",
        needs=Capability.STATUS,
        label_zh="状态",
        label_zh_tw="狀態",
    )
    async def status(self, request: Request) -> Reply:
        if self.backend is None:
            return self._text(
                request, "推送服务未运行 / delivery is not running", status=Status.USAGE
            )
        summary = await self.backend.status()
        return self._text(request, summary, private=True)

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
                required=True,
                complete=Completion.INACTIVE_TARGETS,
            ),
        ),
        needs=Capability.REPOST,
        label_zh="恢复推送",
        label_zh_tw="恢復推送",
    )
    async def reactivate(self, request: Request) -> Reply:
        if len(request.args) != 1:
            return self._usage(request, "请给出目标 ID / give the target id")
        platform, _, target_id = request.args[0].rpartition(":")
        platform = platform or request.platform
        if self.backend is None:
            return self._text(
                request, "推送服务未运行 / delivery is not running", status=Status.USAGE
            )
        changed = await self.backend.reactivate(platform, target_id)
        outcome = "reactivated" if changed else "not deactivated"
        await self.backend.audit(request, action="reactivate", allowed=True, outcome=outcome)
        if not changed:
            shown = _echo(f"{platform}:{target_id}")
            return self._text(
                request,
                f"{shown} 没有被停用。/ {shown} was not deactivated.",
                status=Status.NOT_FOUND,
                private=True,
            )
        return self._text(
            request,
            f"已恢复 {platform}:{target_id}，下次推送会发给它。"
            f"\n{platform}:{target_id} is active again; the next post goes there.",
            private=True,
        )


def _echo(text: str, *, limit: int = MAX_ECHO_CHARS) -> str:
    """A reader's argument as quoted back: at most ``limit`` characters, every invisible one
    (controls, bidi overrides) written as an escape (:func:`~digest_core.models.escape`)."""
    return shorten(text, limit)


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
