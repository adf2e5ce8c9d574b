"""A command's one declaration: ``@command(...)`` on its handler (texts, arguments, capability).

One declaration per command, on the handler that answers it (errbot's ``@botcmd`` is the
model)::

    @command("status", en="Admins: …", zh="管理员：…", zh_tw="管理員：…", usage="/status",
             needs=Capability.STATUS, label_zh="状态", label_zh_tw="狀態")
    async def status(self, request: Request) -> Reply: ...

:class:`~digest_core.commands.dispatch.Commands` answers every declared handler it is given
(:meth:`~digest_core.commands.dispatch.Commands.declare`) and checks ``needs`` before the
handler runs; :mod:`digest_core.commands.catalogue` collects the declarations for menus,
slash commands and ``/help``.
Arguments are typed (:class:`Kind`): the core turns a platform's typed option values (Discord)
or a command line's words (Telegram, the console, the work chats) into the handler's keyword
values once, before the handler runs (:meth:`CommandSpec.arguments`); what does not fit is one
:class:`~digest_core.errors.BadArgument`, answered with the problem and the usage.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from types import ModuleType
from typing import Any, TypeVar

from digest_core.commands.buttons import CommandButton, Style
from digest_core.commands.requests import Capability, Reply, Request
from digest_core.errors import BadArgument
from digest_core.models import shorten

log = logging.getLogger(__name__)

#: the shortest limit on a command's or an argument's description among the platforms (100)
MAX_DESCRIPTION = 100

#: the attribute ``@command`` sets on a handler
DECLARED = "__digest_command__"

_F = TypeVar("_F", bound=Callable[..., Awaitable[Reply]])


class Completion(StrEnum):
    """Where a platform with autocomplete finds an argument's values (the adapter's lookup)."""

    #: the archive's dates the requester may see
    DATES = "dates"
    #: the platform's deactivated targets (admins only)
    INACTIVE_TARGETS = "inactive_targets"


@dataclass(frozen=True)
class Kind:
    """What an argument's value is.

    ``type`` is the option's type where a platform has typed options (``int`` between ``low``
    and ``high``, ``str`` of ``low`` to ``high`` characters, one of ``choices``, or ``bool``: a
    flag, ``word`` anywhere on a command line). ``read`` turns a word (or a typed option's text)
    into the handler's value: a ValueError means the word is not of this kind (told as
    ``“word” {bad}``), a :class:`~digest_core.errors.BadArgument` carries its own problem. A
    ``rest`` argument takes every word left on the line, joined by one space.
    """

    type: type[Any]
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    word: str = ""
    read: Callable[[str], Any] | None = None
    bad: str = ""
    rest: bool = False

    def fits(self, word: str) -> bool:
        """``word`` reads as a value of this kind."""
        try:
            self.value(word)
        except (ValueError, BadArgument):
            return False
        return True

    def value(self, given: object) -> Any:
        """The handler's value of a word or of a platform's typed option value ``given``: a
        text is read (:attr:`read`), a typed value of :attr:`type` is taken as it is.
        ValueError or BadArgument when it is not of this kind."""
        if self.type is bool:
            return given is True or (isinstance(given, str) and given.strip().lower() == self.word)
        if isinstance(given, str):
            word = given.strip()
            if self.read is not None:
                return self.read(word)
            if self.type is int:
                if not word.isascii() or not word.isdigit():  # "²".isdigit() is True
                    raise ValueError(word)
                return int(word)
            if self.choices and word.lower() not in self.choices:
                raise ValueError(word)
            return word.lower() if self.choices else word
        if isinstance(given, self.type):
            return given
        raise TypeError(f"{given!r} is not a value of {self.type.__name__}")


def text(
    low: int,
    high: int,
    *,
    read: Callable[[str], Any] | None = None,
    bad: str = "",
    rest: bool = False,
) -> Kind:
    """A text of ``low`` to ``high`` characters, as typed unless ``read`` checks or converts
    it (see :class:`Kind` for ``bad`` and ``rest``)."""
    return Kind(str, low, high, read=read, bad=bad, rest=rest)


def number(low: int, high: int, *, read: Callable[[str], int] | None = None) -> Kind:
    """A whole number from ``low`` to ``high`` (words: ``read``, by default :class:`int`; the
    range is the typed option's, a handler answers a word out of it)."""
    return Kind(int, low, high, read=read, bad="不是数字 / is not a number")


def one_of(*choices: str) -> Kind:
    """One word of ``choices`` (any case; the value is the lowercase choice)."""
    return Kind(str, choices=choices, bad=f"不是 {'|'.join(choices)} / is not one of them")


def flag(word: str) -> Kind:
    """A yes/no option, ``word`` anywhere on a command line (any case) when yes."""
    return Kind(bool, word=word)


def _iso_date(word: str) -> dt.date:
    return dt.date.fromisoformat(word)


#: a date, YYYY-MM-DD (an option of up to 32 characters where the platform types it)
DATE = text(1, 32, read=_iso_date, bad="不是日期 / is not a date")


def date_argument(
    en: str, zh: str, zh_tw: str, *, required: bool = False, hidden: bool = False
) -> Argument:
    """A date argument (looked up in the archive while typing, where a platform can)."""
    return Argument(
        "date", en, zh, zh_tw, "日期", "日期",
        kind=DATE, required=required, complete=Completion.DATES, hidden=hidden,
    )  # fmt: skip


#: a word or a few (1 to 64 characters): the kind of an argument unless told
TEXT = text(1, 64)

#: the most characters of a reader's own word quoted back in a reply (``/issue <5000 digits>``
#: is answered with its first ones and ``…``, not all of them)
MAX_ECHO_CHARS = 40


def echo(text: str, *, limit: int = MAX_ECHO_CHARS) -> str:
    """A reader's word as quoted back: at most ``limit`` characters, every invisible one
    (controls, bidi overrides) written as an escape (:func:`~digest_core.models.escape`)."""
    return shorten(text, limit)


@dataclass(frozen=True)
class Argument:
    """One argument of a command.

    ``name`` is the option's name (lowercase ASCII) and the handler's keyword; ``label_zh``/
    ``label_zh_tw`` its localized name; ``en``/``zh``/``zh_tw`` its description; ``kind`` its
    type; ``complete`` where its values can be looked up while typing. ``hidden`` keeps it off
    the typed options (words only: ``/approve DATE REVISION`` from a review button).
    ``missing`` is the problem told when a required one is not given (default: 请给出<label>
    / give a <name>), ``bad`` the one told for a word not of its kind (default: the kind's).
    ``passes``: an optional argument that leaves a word not of its kind to the next one
    (``/briefs [N] [DATE]`` read as ``/briefs DATE``). ``optional_words``: ``required`` only
    as a typed option, a command line may leave it out (``/zone`` shows the zone).
    """

    name: str
    en: str
    zh: str
    zh_tw: str
    label_zh: str
    label_zh_tw: str
    kind: Kind = TEXT
    required: bool = False
    complete: Completion | None = None
    hidden: bool = False
    missing: str = ""
    bad: str = ""
    passes: bool = False
    optional_words: bool = False

    def absent(self) -> Any:
        """The handler's value when the argument is not given (False for a flag, else None)."""
        return False if self.kind.type is bool else None

    def read(self, given: object, *, bad: str = "") -> Any:
        """The handler's value of ``given``; :class:`BadArgument` when it does not fit (told
        with ``bad``, this argument's or its kind's problem)."""
        try:
            return self.kind.value(given)
        except ValueError:
            problem = bad or self.bad or f"“{echo(str(given))}” {self.kind.bad}"
            raise BadArgument(problem) from None

    def missing_problem(self) -> BadArgument:
        return BadArgument(self.missing or f"请给出{self.label_zh} / give a {self.name}")


class Group(IntEnum):
    """Where ``/help`` and the menus list a command (then in the order of declaration)."""

    ISSUES = 0
    PRIVATE = 1
    HELP = 2
    ADMIN = 3


@dataclass(frozen=True)
class CommandSpec:
    """One command: what every platform shows for it and who may run it.

    ``needs`` is the capability a user must have (None: everyone); it is what the core checks.
    ``label_zh``/``label_zh_tw`` are localized command names where a platform allows them;
    ``menu`` is False for a command that is answered but not listed (``/start``);
    ``covered_by`` names the typed command that does this one's work where options exist
    (``/brief N`` is ``/briefs n``); ``dm`` marks a command about the reader's private chat,
    answered there; ``quiet`` asks for an answer only the requester sees (admin and ``dm``
    commands are always quiet).

    What other parts run it by: ``dashboard`` puts it on the editor's dashboard (a button
    there runs it, :data:`digest_core.service.dashboard.ACTIONS`); ``running`` is what its
    confirmation prompt says once confirmed, while it runs (default 执行中… / running…);
    ``button_label`` and ``button_style`` draw the action button that runs it
    (:meth:`button`: Approve / Hold under a review).

    How words become the handler's values (:meth:`arguments`): flags are taken from anywhere
    on the line; the other arguments take the words in order, a ``rest`` one all that is left,
    an optional one that ``passes`` leaving a word that does not fit it to the next
    (:attr:`Argument.passes`). With ``any_order`` each word goes to the first argument still
    free that it fits (``/subscribe full 07:00``). Words left over are refused with
    ``too_many`` (default: 参数太多 / too many arguments, or /name 不需要参数 / takes no
    argument for a command without arguments), or ignored when ``lenient``.
    """

    name: str
    zh: str
    zh_tw: str
    en: str
    usage: str
    args: tuple[Argument, ...] = ()
    needs: Capability | None = None
    label_zh: str = ""
    label_zh_tw: str = ""
    menu: bool = True
    group: Group = Group.ISSUES
    covered_by: str = ""
    dm: bool = False
    quiet: bool = False
    too_many: str = ""
    lenient: bool = False
    any_order: bool = False
    dashboard: bool = False
    running: str = ""
    button_label: str = ""
    button_style: Style = Style.SECONDARY

    @property
    def options(self) -> tuple[Argument, ...]:
        """The arguments a platform offers as typed options (all but the hidden ones)."""
        return tuple(a for a in self.args if not a.hidden)

    def arguments(self, request: Request) -> dict[str, Any]:
        """The handler's keyword values for ``request``: its typed option values where the
        platform gave them (:attr:`~digest_core.commands.requests.Request.values`), else its words.
        :class:`~digest_core.errors.BadArgument` says what does not fit."""
        if request.values is not None:
            return self._typed(request.values)
        return self._words(request.args)

    def given(self, request: Request) -> bool:
        """``request`` gives a word or an option value (a flag set counts)."""
        if request.values is not None:
            return any(v is not None and v is not False for v in request.values.values())
        return bool(request.args)

    def _typed(self, given: Mapping[str, object]) -> dict[str, Any]:
        unknown = set(given) - {a.name for a in self.options}
        if unknown:
            raise TypeError(f"/{self.name} has no option {sorted(unknown)}")
        values: dict[str, Any] = {}
        for arg in self.args:
            value = given.get(arg.name)
            if value is None or value is False or (isinstance(value, str) and not value.strip()):
                if arg.required:
                    raise arg.missing_problem()
                values[arg.name] = arg.absent()
            else:
                values[arg.name] = arg.read(value, bad=self._any_order_problem(str(value)))
        return values

    def _any_order_problem(self, word: str) -> str:
        if not self.any_order:
            return ""
        labels = [a for a in self.args if a.kind.type is not bool]
        return (
            f"“{echo(word)}” 不是{'或'.join(a.label_zh for a in labels)} / is not a "
            f"{' or '.join(a.name for a in labels)}"
        )

    def _words(self, words: Sequence[str]) -> dict[str, Any]:
        values = {arg.name: arg.absent() for arg in self.args}
        left = list(words)
        for arg in self.args:
            if arg.kind.type is bool:
                values[arg.name] = any(arg.kind.value(w) for w in left)
                left = [w for w in left if not arg.kind.value(w)]
        ordered_args = [a for a in self.args if a.kind.type is not bool]
        if self.any_order:
            for word in left:
                free = [a for a in ordered_args if values[a.name] is None and a.kind.fits(word)]
                if not free:
                    raise BadArgument(self._any_order_problem(word))
                values[free[0].name] = free[0].read(word)
            return values
        given: list[tuple[Argument, str]] = []
        for i, arg in enumerate(ordered_args):
            if not left:
                break
            if arg.kind.rest:
                given.append((arg, " ".join(left)))
                left = []
            elif not arg.passes or i + 1 == len(ordered_args) or arg.kind.fits(left[0]):
                given.append((arg, left.pop(0)))
        if left and not self.lenient:
            raise BadArgument(self.too_many or self._too_many())
        named = {arg.name for arg, _ in given}
        for arg in ordered_args:
            if arg.required and not arg.optional_words and arg.name not in named:
                raise arg.missing_problem()
        for arg, word in given:
            if arg.kind.rest and not word.strip():
                if arg.required and not arg.optional_words:
                    raise arg.missing_problem()
                continue
            values[arg.name] = arg.read(word)
        return values

    def _too_many(self) -> str:
        if self.args:
            return "参数太多 / too many arguments"
        return f"/{self.name} 不需要参数 / takes no argument"

    @property
    def admin(self) -> bool:
        """Admin-only: a capability is needed."""
        return self.needs is not None

    @property
    def private(self) -> bool:
        """Answered so that only the requester sees it."""
        return self.quiet or self.dm or self.admin

    def button(self, *args: str) -> CommandButton:
        """The action button that runs ``/name args`` as its presser (its declared label,
        the name without one, and style)."""
        return CommandButton(self.button_label or self.name, self.name, args, self.button_style)


def command(
    name: str,
    *,
    zh: str,
    zh_tw: str,
    en: str,
    usage: str,
    args: tuple[Argument, ...] = (),
    needs: Capability | None = None,
    label_zh: str = "",
    label_zh_tw: str = "",
    menu: bool = True,
    group: Group | None = None,
    covered_by: str = "",
    dm: bool = False,
    quiet: bool = False,
    too_many: str = "",
    lenient: bool = False,
    any_order: bool = False,
    dashboard: bool = False,
    running: str = "",
    button_label: str = "",
    button_style: Style = Style.SECONDARY,
) -> Callable[[_F], _F]:
    """Declare the decorated handler as the answer to ``/name`` (see :class:`CommandSpec`; an
    admin command, one with ``needs``, is listed in :attr:`Group.ADMIN` unless told)."""
    if group is None:
        group = Group.ADMIN if needs is not None else Group.PRIVATE if dm else Group.ISSUES
    spec = CommandSpec(
        name, zh, zh_tw, en, usage, args, needs, label_zh, label_zh_tw, menu, group,
        covered_by, dm, quiet, too_many, lenient, any_order, dashboard, running, button_label,
        button_style,
    )  # fmt: skip

    def declare(handler: _F) -> _F:
        setattr(handler, DECLARED, spec)
        return handler

    return declare


def spec_of(handler: Callable[..., Awaitable[Reply]]) -> CommandSpec:
    """The declaration on ``handler`` (a function or method decorated with :func:`command`).

    Raises:
        TypeError: ``handler`` declares no command.
    """
    spec = getattr(handler, DECLARED, None)
    if not isinstance(spec, CommandSpec):
        raise TypeError(f"{handler!r} declares no command")
    return spec


def declared(owner: object) -> list[tuple[CommandSpec, str]]:
    """The commands declared on ``owner`` (a class, an instance's class or a module), with the
    attribute name of each handler, in the order of declaration."""
    of_own = isinstance(owner, type | ModuleType)
    space: Mapping[str, Any] = vars(owner) if of_own else vars(type(owner))
    found = []
    for attr, value in space.items():
        spec = getattr(value, DECLARED, None)
        if isinstance(spec, CommandSpec):
            found.append((spec, attr))
    return found


def ordered(specs: Iterable[CommandSpec]) -> tuple[CommandSpec, ...]:
    """``specs`` as ``/help`` lists them: by :class:`Group`, then in the order given."""
    return tuple(sorted(specs, key=lambda s: s.group))


def help_line(entry: CommandSpec) -> str:
    """The line of ``entry`` in ``/help``: usage, Chinese and English description."""
    return f"{entry.usage} — {entry.zh} / {entry.en}"


HELP_HEADER = "AI 技术日报 机器人 · commands"
ADMIN_HEADER = "管理员 / admins:"


def help_text(specs: Iterable[CommandSpec], *, admin: bool) -> str:
    """``/help`` of ``specs``: every listed reader command, and for admins the admin commands."""
    listed = ordered(s for s in specs if s.menu)
    lines = [HELP_HEADER, *(help_line(s) for s in listed if not s.admin)]
    if admin:
        lines += ["", ADMIN_HEADER, *(help_line(s) for s in listed if s.admin)]
    return "\n".join(lines)
