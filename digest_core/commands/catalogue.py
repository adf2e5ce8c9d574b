"""Every command's declaration, collected: what menus, slash commands and ``/help`` derive from.

A command is declared once, on its handler (:func:`digest_core.commands.declaration.command`):
its name, its description in simplified Chinese (``zh``), traditional Chinese (``zh_tw``) and
English (``en``), its usage line, its typed arguments and the capability it needs. The
handlers' owners are listed once, in :data:`OWNERS`:
:class:`~digest_core.commands.dispatch.Commands` answers every command declared on them, and
this module lists those commands in ``/help``'s order: :data:`CATALOGUE`. Adapters build
their menus from it (Telegram's ``setMyCommands`` reader and admin scopes, Discord's app
commands, their options and localizations); ``/help`` and the console's help are
:func:`help_text`. Descriptions fit every platform's limit (:data:`MAX_DESCRIPTION`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any

from digest_core.commands import editor as editor_commands
from digest_core.commands.admin import AdminCommands
from digest_core.commands.declaration import (
    ADMIN_HEADER,
    HELP_HEADER,
    MAX_DESCRIPTION,
    Argument,
    CommandSpec,
    Completion,
    Kind,
    declared,
    help_line,
    ordered,
)
from digest_core.commands.declaration import help_text as _help_text
from digest_core.commands.reading import Reading
from digest_core.subscriptions.commands import ReaderCommands
from digest_core.subscriptions.signup import SignupCommands

log = logging.getLogger(__name__)

__all__ = [
    "ADMIN_HEADER",
    "BY_NAME",
    "CATALOGUE",
    "HELP_HEADER",
    "MAX_DESCRIPTION",
    "OWNERS",
    "Argument",
    "CommandSpec",
    "Completion",
    "Kind",
    "help_line",
    "help_text",
    "menu",
    "spec",
]

#: whatever declares commands, the one list of them: a class that
#: :class:`~digest_core.commands.dispatch.Commands` builds as ``Owner(commands)`` (its
#: ``available`` method, where it has one, may answer its commands first), or a module of
#: handlers called with the commands
OWNERS: tuple[type[Any] | ModuleType, ...] = (
    Reading,
    AdminCommands,
    editor_commands,
    ReaderCommands,
    SignupCommands,
)

#: every command, in the order ``/help`` and the menus list them
CATALOGUE: tuple[CommandSpec, ...] = ordered(
    spec for owner in OWNERS for spec, _ in declared(owner)
)

#: the catalogue by command name
BY_NAME: Mapping[str, CommandSpec] = MappingProxyType({spec.name: spec for spec in CATALOGUE})


def spec(name: str) -> CommandSpec:
    """The entry of command ``name``; KeyError names the command when it is not catalogued."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"/{name} is not in digest_core.commands.catalogue.CATALOGUE") from None


def menu(*, admin: bool) -> tuple[CommandSpec, ...]:
    """The listed commands a reader sees (``admin=False``) or an admin sees (all of them)."""
    return tuple(s for s in CATALOGUE if s.menu and (admin or not s.admin))


def help_text(*, admin: bool) -> str:
    """``/help``: every listed reader command, and for admins the admin commands after them."""
    return _help_text(CATALOGUE, admin=admin)
