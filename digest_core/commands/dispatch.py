"""Answering commands: a Request in, reply messages out, the same on every platform.

Every adapter parses its own input into a :class:`Request` and sends
the returned :class:`Reply` messages back; the behaviour is the same everywhere. Each command
is one declaration on its handler (:func:`~digest_core.commands.declaration.command`);
:meth:`Commands.handle` checks the capability it needs, then reads its arguments into the
handler's typed values, for every platform. The handlers live with their concern: the readers'
issue commands in :mod:`.reading`, the admins' in :mod:`.admin`, the editor's in :mod:`.editor`,
readers' own subscriptions in :mod:`digest_core.subscriptions.commands` and
:mod:`digest_core.subscriptions.signup`; their owners are
listed once, :data:`~digest_core.commands.catalogue.OWNERS`, and :class:`Commands` answers
every command declared on them. A wrong argument (a :class:`~digest_core.errors.BadArgument`)
gets a reply with the usage, never an exception; a refusal (a
:class:`~digest_core.errors.CommandRefused`, whoever refuses) is answered by
:meth:`Commands.refuse`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.commands.catalogue import OWNERS
from digest_core.commands.declaration import (
    CommandSpec,
    declared,
    echo,
    ordered,
)
from digest_core.commands.reading import Reading
from digest_core.commands.requests import (
    AdminBackend,
    Choice,
    Reply,
    Request,
    Status,
)
from digest_core.errors import BadArgument, CommandRefused, IssueNotFound, NotRunning
from digest_core.metrics import NULL_METRICS, NULL_READERS, MetricsSink, ReadersSink
from digest_core.models import Section
from digest_core.publishing.embargo import Embargo, VisibleArchive
from digest_core.rendering import (
    RenderOptions,
    notice,
)

if TYPE_CHECKING:
    from digest_core.subscriptions.commands import ReaderStore
    from digest_core.subscriptions.signup import AddressSignup

log = logging.getLogger(__name__)


#: what an admin command says while the bot's delivery is not running
NOT_RUNNING = "推送服务未运行 / delivery is not running"


_P = ParamSpec("_P")
_T = TypeVar("_T")
_O = TypeVar("_O")

#: the method of an owner class (:data:`~digest_core.commands.catalogue.OWNERS`) that may
#: answer one of its commands first, a :data:`Guard`
GUARD = "available"

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
        readers: ReadersSink = NULL_READERS,
        store: ReaderStore | None = None,
        signup: AddressSignup | None = None,
    ):
        """``post_options`` are the platforms' channel-post options by platform name;
        ``subscribable`` names the platforms that can send the daily issue privately;
        ``metrics`` hears how long each command took; ``embargo`` decides what readers may
        see (default: a day from its local midnight); ``readers`` hears which sections and
        stories readers looked at (counted, never who); ``store`` keeps readers' own settings
        and ``signup`` mails the digest to an address (None: those commands say they are not
        available). Every reader command reads the archive through :meth:`view`, never
        directly. Every command declared by the catalogue's owners is answered."""
        self.archive = archive
        self.clock = clock
        self.zone = zone
        self.embargo = embargo or Embargo(zone=zone, post_time=dt.time(0, 0), clock=clock)
        self.backend = backend
        self.post_options = post_options or {}
        self.subscribable = subscribable
        self.metrics = metrics
        self.readers = readers
        self.store = store
        self.signup = signup
        self._in_threads = 0
        watch = getattr(clock, "watch", None)
        if callable(watch):  # a ManualClock must not jump while a thread works for a command
            watch(lambda: self._in_threads > 0)
        self._table: dict[str, Declared] = {}
        self._owners: dict[type[Any], object] = {}
        for owner in OWNERS:
            self._install(owner)
        #: the readers' issue commands and the section buttons, with their render cache
        self.reading = self.owner(Reading)

    def _install(self, owner: type[Any] | ModuleType) -> None:
        """Answer the commands declared on ``owner``: a module's handlers, called with these
        commands, or the handlers of ``owner(self)``, guarded by its :data:`GUARD` method."""
        if isinstance(owner, ModuleType):
            self.declare(owner, self)
            return
        instance = owner(self)
        self._owners[owner] = instance
        self.declare(instance, guard=getattr(instance, GUARD, None))

    def owner(self, kind: type[_O]) -> _O:
        """The instance of the owner class ``kind`` whose commands are answered here."""
        instance = self._owners[kind]
        assert isinstance(instance, kind)
        return instance

    @property
    def names(self) -> list[str]:
        return list(self._table)

    @property
    def specs(self) -> tuple[CommandSpec, ...]:
        """The declarations of the commands answered here, in ``/help``'s order."""
        return ordered(d.spec for d in self._table.values())

    def spec(self, name: str) -> CommandSpec | None:
        """The declaration of ``/name`` as answered here (None: not a command here)."""
        entry = self._table.get(name)
        return None if entry is None else entry.spec

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
        with self.archive.priority.serving():  # the archive's background work steps aside
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
            self.check(entry.spec, request)
            if entry.guard is not None and (early := entry.guard(entry.spec, request)):
                return early
            return await entry.answer(request, **entry.spec.arguments(request))
        except CommandRefused as exc:
            return await self.refuse(request, exc)
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
            with self.archive.priority.serving():  # the archive's background work steps aside
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

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        """What a section button of the post of ``date`` answers (:meth:`Reading.section
        <digest_core.commands.reading.Reading.section>`)."""
        return await self.reading.section(request, date, section)

    def running(self) -> AdminBackend:
        """The admin backend; :class:`~digest_core.errors.NotRunning` while the bot's delivery
        is not running (answered 推送服务未运行 / delivery is not running)."""
        if self.backend is None:
            raise NotRunning(NOT_RUNNING)
        return self.backend

    @staticmethod
    def check(spec: CommandSpec, request: Request) -> None:
        """The one capability check: :class:`~digest_core.errors.CommandRefused` when the
        sender of ``request`` lacks the capability ``spec`` needs."""
        if spec.needs is not None and spec.needs not in request.capabilities:
            raise CommandRefused(spec.name, spec.needs)

    async def refuse(self, request: Request, refused: CommandRefused) -> Reply:
        """The one answer to a refused command or action (:meth:`check`'s, an upload's, a
        confirmation's): private, logged, audited unless nothing was attempted."""
        action = refused.command
        if refused.audited and self.backend is not None:
            await self.backend.audit(request, action=action, allowed=False, outcome=refused.outcome)
        log.warning(
            "refused /%s from %s:%s (needs %s)",
            action, request.platform, request.user, refused.capability,
        )  # fmt: skip
        told = refused.told or (
            f"抱歉，/{action} 只有管理员可以使用。\nSorry, /{action} is for admins only."
        )
        return self.reply(request, told, status=Status.REFUSED, private=True)

    async def completions(
        self, request: Request, find: Callable[[], Awaitable[list[_T]]]
    ) -> list[_T]:
        """What ``find`` looks up while the sender of ``request`` types an argument of its
        command (a platform's autocomplete): nothing for an unknown command or one that
        :meth:`check` refuses them (not audited: nothing was attempted)."""
        entry = self._table.get(request.command)
        if entry is None:
            return []
        try:
            self.check(entry.spec, request)
        except CommandRefused:
            return []
        return await find()
