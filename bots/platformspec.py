"""A platform's declaration (:class:`PlatformSpec`), what each ``bots/<name>/spec.py`` defines as
``PLATFORM``, and what its adapter factory may use (:class:`BuildContext`).

A leaf: the declarations import it and nothing of the registry, which names them in its table
(:data:`bots.registry.PLATFORMS`), so no declaration depends on the table that names it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from pydantic import BaseModel

    from bots.inflight import InFlight
    from digest_core.clock import Clock
    from digest_core.port import Adapter, PlatformLimits
    from digest_core.rendering import Renderer


def load_adapter(path: str) -> Any:
    """The adapter class ``path`` names, ``"bots.<platform>.<module>:<Class>"``, imported on
    first use. The declarations' imports by name are here (this one, and
    :meth:`PlatformSpec.renderer`'s of a renderer module), none under ``bots/<platform>/``
    (tests/bots/test_port.py: there every import of the core is written out); this one loads
    only the bot's own modules.

    Raises:
        ValueError: ``path`` is not a module of ``bots``.
    """
    module, _, name = path.partition(":")
    if not module.startswith("bots.") or not name:
        raise ValueError(f"{path!r} is not 'bots.<module>:<name>'")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class BuildContext:
    """What an adapter factory may use besides its settings."""

    clock: Clock
    #: the pacing the adapter sends under: its spec's for these settings
    #: (:meth:`PlatformSpec.pacing`); the factory hands it to the adapter, which chooses none
    limits: PlatformLimits
    stdin: TextIO | None = None
    out: TextIO | None = None
    in_flight: InFlight | None = None


@dataclass(frozen=True)
class PlatformSpec:
    """Everything the rest of the bot knows about one platform.

    The platform's facts sit here as fields: its renderer module (which holds the text and
    size limits, ``Limits``) and its pacing (``limits``: a value, or a function of its settings;
    :meth:`pacing` gives them, the factory hands them to the adapter in its context, and no
    adapter chooses its own). The adapter the factory builds carries the rest: the renderer
    as ``flavor`` (the same module, which the adapter imports), and whether readers can
    subscribe (``subscriptions``).
    """

    name: str
    #: one line for ``--help``
    summary: str
    #: the model of the ``[name]`` table (and ``DIGEST_BOT_NAME__*``); None: no table
    settings: type[BaseModel] | None
    #: the module of :mod:`digest_core.rendering` that renders the platform's posts, notices
    #: and ``digest-bot preview`` (``"digest_core.rendering.telegram"``), imported on first
    #: use (:meth:`renderer`): the one its adapter imports as its ``flavor``
    renderer_module: str
    #: the adapter from the platform's settings, or None when they configure nothing to
    #: post to (no token, no targets); may raise ImportError when the SDK is missing
    build: Callable[[Any, BuildContext], Adapter | None]
    #: the sending limits the core paces this platform's sends under: its documented limits, or
    #: a function of its settings section (a configured relay's rate, Telegram's paid
    #: broadcast) giving them; ``build`` gets them in its context (:meth:`pacing`) and its
    #: adapter sends under them as its ``limits``
    limits: PlatformLimits | Callable[[Any], PlatformLimits]
    #: what ``--only NAME`` needs when ``build`` gave None (a sentence naming the setting)
    needs: str = ""
    #: the settings key ``needs`` is about
    needs_key: str | None = None
    #: built when no other platform is configured (the console)
    fallback: bool = False
    #: the SDK the adapter imports (the ``digest-bot[name]`` extra), for a missing-SDK error
    sdk: str | None = None
    #: the SDK's import name: the platform's doctor checks run only when it is installed
    sdk_module: str | None = None
    #: ``"module:function"`` of the platform's ``digest-bot doctor`` checks,
    #: ``async checks(settings_section, *, now) -> list[bots.doctor.Check]`` (an empty list
    #: when the section configures nothing); they MUST NOT send to any chat
    doctor: str | None = None

    def renderer(self) -> Renderer:
        """The platform's renderer: its module :attr:`renderer_module`."""
        return cast("Renderer", importlib.import_module(self.renderer_module))

    def pacing(self, settings: Any) -> PlatformLimits:
        """The limits the platform's adapter sends under with ``settings`` (its section, or
        None for a platform without one): :attr:`limits`, or what it gives for them."""
        return self.limits(settings) if callable(self.limits) else self.limits
