"""A command's one declaration: ``@command(...)`` on its handler (texts, arguments, capability).

One declaration per command, on the handler that answers it (errbot's ``@botcmd`` is the
model)::

    @command("status", en="Admins: …", zh="管理员：…", zh_tw="管理員：…", usage="/status",
             needs=Capability.STATUS, label_zh="状态", label_zh_tw="狀態")
    async def status(self, request: Request) -> Reply: ...

:class:`~digest_core.commands.Commands` answers every declared handler it is given
(:meth:`~digest_core.commands.Commands.declare`) and checks ``needs`` before the handler runs;
:mod:`digest_core.catalogue` collects the declarations for menus, slash commands and ``/help``.
Arguments are typed (:class:`Kind`) for platforms with typed options (Discord); the core still
reads every command as words, whichever platform it came from.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from types import ModuleType
from typing import Any, TypeVar

from digest_core.requests import Capability, Reply

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
    """What an argument's value is: ``int`` between ``low`` and ``high``, ``str`` of ``low``
    to ``high`` characters, one of ``choices``, or ``bool`` (a flag: ``word`` on the line)."""

    type: type[Any]
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    word: str = ""

    def words(self, value: object) -> tuple[str, ...]:
        """The command-line words of a typed ``value`` (None and False are no word)."""
        if value is None or value is False:
            return ()
        if value is True:
            return (self.word,)
        word = str(value).strip()
        return (word,) if word else ()


def text(low: int, high: int) -> Kind:
    """A text of ``low`` to ``high`` characters."""
    return Kind(str, low, high)


def number(low: int, high: int) -> Kind:
    """A whole number from ``low`` to ``high``."""
    return Kind(int, low, high)


def one_of(*choices: str) -> Kind:
    """One word of ``choices``."""
    return Kind(str, choices=choices)


def flag(word: str) -> Kind:
    """A yes/no option, ``word`` on a command line when yes."""
    return Kind(bool, word=word)


#: a word or a few (1 to 64 characters): the kind of an argument unless told
TEXT = text(1, 64)


@dataclass(frozen=True)
class Argument:
    """One argument of a command, for platforms with typed options.

    ``name`` is the option's name (lowercase ASCII); ``label_zh``/``label_zh_tw`` its localized
    name; ``en``/``zh``/``zh_tw`` its description; ``kind`` its type; ``complete`` where its
    values can be looked up while typing.
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

    @property
    def admin(self) -> bool:
        """Admin-only: a capability is needed."""
        return self.needs is not None

    @property
    def private(self) -> bool:
        """Answered so that only the requester sees it."""
        return self.quiet or self.dm or self.admin


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
) -> Callable[[_F], _F]:
    """Declare the decorated handler as the answer to ``/name`` (see :class:`CommandSpec`; an
    admin command, one with ``needs``, is listed in :attr:`Group.ADMIN` unless told)."""
    if group is None:
        group = Group.ADMIN if needs is not None else Group.PRIVATE if dm else Group.ISSUES
    spec = CommandSpec(
        name, zh, zh_tw, en, usage, args, needs, label_zh, label_zh_tw, menu, group,
        covered_by, dm, quiet,
    )  # fmt: skip

    def declare(handler: _F) -> _F:
        setattr(handler, DECLARED, spec)
        return handler

    return declare


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
