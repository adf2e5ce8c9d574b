"""The platform registry: one explicit table of platform names and the module declaring each.

Why a table here and not ``[project.entry-points]``: every platform lives in this repository,
and entry points are read from the installed metadata, so adding or renaming one would need a
``pip install -e .`` in every checkout and virtualenv before anything (tests included) saw it,
and scanning the metadata costs every CLI start. A table is read from the source, checked by
mypy and ruff, and costs nothing: ``names()`` imports no platform, and ``spec()`` imports only
the platform's small declaration module (its settings model; never its SDK).

Adding a platform: a folder ``bots/<name>/`` whose ``spec.py`` defines ``PLATFORM``, a
:class:`PlatformSpec`, and one line in :data:`PLATFORMS` (and one in
:data:`PLATFORM_COMMANDS` for CLI commands of its own, ``digest-bot <name> …``).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

if TYPE_CHECKING:
    from pydantic import BaseModel

    from bots.inflight import InFlight
    from digest_core.clock import Clock
    from digest_core.port import Adapter, PlatformLimits
    from digest_core.rendering import Renderer
    from digest_core.settings import Settings

log = logging.getLogger(__name__)

#: name -> the module defining ``PLATFORM``; the order is the order of ``--only``, ``status``
#: and of delivery
PLATFORMS: dict[str, str] = {
    "console": "bots.console.spec",
    "telegram": "bots.telegram.spec",
    "discord": "bots.discord.spec",
    "feishu": "bots.feishu.spec",
    "dingtalk": "bots.dingtalk.spec",
    "wecom": "bots.wecom.spec",
    "email": "bots.email.spec",
}


class PlatformCommand(NamedTuple):
    """A platform's own ``digest-bot`` command (``digest-bot discord sync``)."""

    #: the command, and the platform it belongs to
    name: str
    #: ``"module:function"`` adding its options and actions to its parser,
    #: ``function(parser, common_parent)``
    configure: str
    #: its line in ``digest-bot --help``
    help: str
    #: the SDK's import name: the command is offered only when it is installed
    sdk_module: str


#: the platforms' own CLI commands, in registry order: a table beside :data:`PLATFORMS` and
#: not in the declarations, so that ``digest-bot --help`` lists them importing no platform
#: (a declaration imports its settings model, and with it pydantic)
PLATFORM_COMMANDS = (
    PlatformCommand(
        "discord", "bots.discord.arguments:configure", "Discord set-up: sync, invite", "discord"
    ),
    PlatformCommand("email", "bots.cli.email:configure", "email readers: export, forget",
                    "aiosmtplib"),
    PlatformCommand("feishu", "bots.feishu.menu:configure", "Feishu app bot set-up: menu",
                    "lark_oapi"),
)  # fmt: skip


@dataclass(frozen=True)
class BuildContext:
    """What an adapter factory may use besides its settings."""

    clock: Clock
    stdin: TextIO | None = None
    out: TextIO | None = None
    in_flight: InFlight | None = None


@dataclass(frozen=True)
class PlatformSpec:
    """Everything the rest of the bot knows about one platform.

    The platform's facts sit here as fields: its renderer (whose module holds the text and
    size limits, ``Limits``) and its pacing (``limits``, the Platform's ``limits`` that its
    adapter sends under). The adapter the factory builds carries the rest: the renderer as
    ``flavor``, and whether readers can subscribe (``subscriptions``).
    """

    name: str
    #: one line for ``--help``
    summary: str
    #: the model of the ``[name]`` table (and ``DIGEST_BOT_NAME__*``); None: no table
    settings: type[BaseModel] | None
    #: the renderer of the platform's posts, notices and ``digest-bot preview``
    renderer: Callable[[], Renderer]
    #: the adapter from the platform's settings, or None when they configure nothing to
    #: post to (no token, no targets); may raise ImportError when the SDK is missing
    build: Callable[[Any, BuildContext], Adapter | None]
    #: what ``--only NAME`` needs when ``build`` gave None (a sentence naming the setting)
    needs: str = ""
    #: the settings key ``needs`` is about
    needs_key: str | None = None
    #: built when no other platform is configured (the console)
    fallback: bool = False
    #: the documented sending limits the core paces this platform's sends under (its adapter's
    #: ``limits``, unless configured otherwise)
    limits: PlatformLimits | None = None
    #: the SDK the adapter imports (the ``digest-bot[name]`` extra), for a missing-SDK error
    sdk: str | None = None
    #: the SDK's import name: the platform's doctor checks run only when it is installed
    sdk_module: str | None = None
    #: ``"module:function"`` of the platform's ``digest-bot doctor`` checks,
    #: ``async checks(settings_section, *, now) -> list[bots.doctor.Check]`` (an empty list
    #: when the section configures nothing); they MUST NOT send to any chat
    doctor: str | None = None


def names() -> tuple[str, ...]:
    """Every platform's name, in registry order (imports no platform)."""
    return tuple(PLATFORMS)


def spec(name: str) -> PlatformSpec:
    """The declaration of platform ``name``.

    Raises:
        KeyError: no such platform.
    """
    declared = importlib.import_module(PLATFORMS[name]).PLATFORM
    if not isinstance(declared, PlatformSpec) or declared.name != name:
        raise TypeError(f"{PLATFORMS[name]}.PLATFORM must be the PlatformSpec named {name!r}")
    return declared


def specs() -> list[PlatformSpec]:
    """Every platform's declaration, in registry order."""
    return [spec(name) for name in PLATFORMS]


def settings_models() -> dict[str, type[BaseModel]]:
    """The settings model of each platform with a table."""
    return {s.name: s.settings for s in specs() if s.settings is not None}


def load_settings(
    path: Path | str | None = None, *, overrides: dict[str, Any] | None = None
) -> Settings:
    """:func:`digest_core.settings.load_settings` with every registered platform's table.

    Raises:
        ConfigError: as the core's ``load_settings``.
    """
    from digest_core.settings import load_settings as load

    return load(path, overrides=overrides, platforms=settings_models())


def load_core_settings(
    path: Path | str | None = None, *, overrides: dict[str, Any] | None = None
) -> Settings:
    """The core's settings alone, for ``archive search`` (an editor's look-up that uses no
    platform): the platforms' tables are set aside unread, so no platform's settings model is
    imported or built (a sixth of its start-up) and a platform's bad value does not stop it.
    Every other command checks them all.

    Raises:
        ConfigError: as the core's ``load_settings``, for the core's keys.
    """
    from digest_core.settings import load_settings as load

    return load(path, overrides=overrides, unchecked=names())


def platform_commands() -> list[PlatformCommand]:
    """The platforms' own CLI commands whose SDK is installed (found without importing it)."""
    return [c for c in PLATFORM_COMMANDS if importlib.util.find_spec(c.sdk_module) is not None]
