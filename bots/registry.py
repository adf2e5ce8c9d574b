"""The platform registry: one explicit table of platform names and the module declaring each.

Why a table here and not ``[project.entry-points]``: every platform lives in this repository,
and entry points are read from the installed metadata, so adding or renaming one would need a
``pip install -e .`` in every checkout and virtualenv before anything (tests included) saw it,
and scanning the metadata costs every CLI start. A table is read from the source, checked by
mypy and ruff, and costs nothing: ``names()`` imports no platform, and ``spec()`` imports only
the platform's small declaration module (its settings model; never its SDK).

Adding a platform: a folder ``bots/<name>/`` whose ``spec.py`` defines ``PLATFORM``, a
:class:`~bots.platformspec.PlatformSpec` (from the leaf module :mod:`bots.platformspec`, not
from here: the registry names the declarations, they never import it), and one line in
:data:`PLATFORMS` (and one in :data:`bots.cli.PLATFORM_COMMANDS` for CLI commands of its own,
``digest-bot <name> …``: the CLI's table, as the CLI's modules lead to the runtime, which reads
this one).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bots.platformspec import PlatformSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

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
