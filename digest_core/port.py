"""The narrow port: what an adapter may ask of the core (Port) and is to the core (Adapter).

Adapters get a :class:`Port` in :meth:`Adapter.start`, never the service: commands and section
buttons, the confirmation flow, the archive's dates, the deactivated targets, and replies paced
with the deliveries. The service's archive, ledger and engine stay the core's
(tests/bots/test_port.py checks that no adapter reaches for them).

This module is also the one door of the core for adapters: it re-exports (``__all__``) every
type and helper an adapter may use, and an adapter imports the core from here and from its own
renderer module only (tests/bots/test_port.py checks the imports, those through other modules
of ``bots`` too, and that no name here is private). The re-exports are loaded on first use
(PEP 562), so a platform's small declaration modules (``spec.py``, ``settings.py``) importing a
settings base or its pacing from here load neither the ledger nor the scheduler. The service's
side of the port is :class:`~digest_core.service.reception.Reception` (not re-exported:
adapters never see the service).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from digest_core.errors import (
    ConfigError,
    DeliveryError,
    DigestError,
    MessageGone,
    NotPermitted,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    TargetGone,
    TargetMoved,
    TransientError,
)
from digest_core.platform import (
    Opened,
    PartKey,
    Platform,
    PlatformLimits,
    Rate,
    Target,
    TargetKind,
    Threads,
)

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from digest_core.clock import Clock, SystemClock
    from digest_core.commands import (
        ADMIN,
        Capability,
        Choice,
        Reply,
        Request,
        Status,
        parse_command_line,
    )
    from digest_core.commands.buttons import ACTION_PREFIX, CommandButton, Style, parse_action_data
    from digest_core.commands.catalogue import Argument, CommandSpec, Completion, Kind, menu, spec
    from digest_core.commands.confirmation import (
        CANCEL_DATA,
        CANCEL_LABEL,
        CONFIRM_LABEL,
        CONFIRM_TIMEOUT_SECONDS,
        Action,
        Confirmations,
        confirm_data,
    )
    from digest_core.commands.flood import UserRateLimiter, Verdict
    from digest_core.commands.inline import Article
    from digest_core.commands.replies import SendOnce
    from digest_core.delivery import InactiveTarget
    from digest_core.models import Section, escape, shorten
    from digest_core.rendering import (
        BUTTON_PREFIX,
        Message,
        Part,
        Renderer,
        RenderOptions,
        notice,
        parse_button_data,
        plain_renderer,
        preview,
    )
    from digest_core.rendering.types import encode_body
    from digest_core.settings import Settings, TokenSettings
    from digest_core.subscriptions.commands import (
        CHOICE_PREFIX,
        PRIVATE_COMMANDS,
        SUBSCRIBE,
        UNSUBSCRIBE,
        parse_choice,
    )
    from digest_core.subscriptions.preferences import (
        MAX_FOLLOWS,
        MAX_WORD,
        PreferenceRefused,
        ReaderPreferences,
    )
    from digest_core.subscriptions.signup import AddressSignup

#: everything an adapter (``bots/<platform>/``) may use of the core: it imports the core from
#: here and from its own renderer module only (tests/bots/test_port.py checks the imports)
__all__ = [
    "ACTION_PREFIX",
    "ADMIN",
    "BUTTON_PREFIX",
    "CANCEL_DATA",
    "CANCEL_LABEL",
    "CHOICE_PREFIX",
    "CONFIRM_LABEL",
    "CONFIRM_TIMEOUT_SECONDS",
    "MAX_FOLLOWS",
    "MAX_WORD",
    "PRIVATE_COMMANDS",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "Action",
    "Adapter",
    "AddressSignup",
    "Argument",
    "Article",
    "Capability",
    "Choice",
    "Clock",
    "CommandButton",
    "CommandSpec",
    "Completion",
    "ConfigError",
    "Confirmations",
    "DeliveryError",
    "DigestError",
    "InactiveTarget",
    "Kind",
    "Message",
    "MessageGone",
    "NotPermitted",
    "Opened",
    "OutcomeUnknown",
    "Part",
    "PartKey",
    "Platform",
    "PlatformLimits",
    "Port",
    "PreferenceRefused",
    "Rate",
    "RateLimited",
    "ReaderPreferences",
    "Rejected",
    "RenderOptions",
    "Renderer",
    "Reply",
    "Request",
    "Section",
    "SendOnce",
    "Settings",
    "Status",
    "Style",
    "SystemClock",
    "Tallied",
    "Target",
    "TargetGone",
    "TargetKind",
    "TargetMoved",
    "Threads",
    "TokenSettings",
    "TransientError",
    "UserRateLimiter",
    "Verdict",
    "confirm_data",
    "encode_body",
    "escape",
    "menu",
    "notice",
    "parse_action_data",
    "parse_button_data",
    "parse_choice",
    "parse_command_line",
    "plain_renderer",
    "preview",
    "shorten",
    "spec",
]

#: what is loaded on first use: name -> the module defining it
_LAZY: dict[str, str] = {
    name: module
    for module, names in {
        "digest_core.commands.buttons": (
            "ACTION_PREFIX",
            "CommandButton",
            "Style",
            "parse_action_data",
        ),
        "digest_core.commands.catalogue": (
            "Argument",
            "CommandSpec",
            "Completion",
            "Kind",
            "menu",
            "spec",
        ),
        "digest_core.clock": ("Clock", "SystemClock"),
        "digest_core.commands": (
            "ADMIN",
            "Capability",
            "Choice",
            "Reply",
            "Request",
            "Status",
            "parse_command_line",
        ),
        "digest_core.commands.confirmation": (
            "CANCEL_DATA",
            "CANCEL_LABEL",
            "CONFIRM_LABEL",
            "CONFIRM_TIMEOUT_SECONDS",
            "Action",
            "Confirmations",
            "confirm_data",
        ),
        "digest_core.delivery": ("InactiveTarget",),
        "digest_core.commands.flood": ("UserRateLimiter", "Verdict"),
        "digest_core.commands.inline": ("Article",),
        "digest_core.models": ("Section", "escape", "shorten"),
        "digest_core.subscriptions.commands": (
            "CHOICE_PREFIX",
            "PRIVATE_COMMANDS",
            "SUBSCRIBE",
            "UNSUBSCRIBE",
            "parse_choice",
        ),
        "digest_core.rendering": (
            "BUTTON_PREFIX",
            "Message",
            "Part",
            "Renderer",
            "RenderOptions",
            "notice",
            "parse_button_data",
            "plain_renderer",
            "preview",
        ),
        "digest_core.rendering.types": ("encode_body",),
        "digest_core.commands.replies": ("SendOnce",),
        "digest_core.settings": ("Settings", "TokenSettings"),
        "digest_core.subscriptions.preferences": (
            "MAX_FOLLOWS",
            "MAX_WORD",
            "PreferenceRefused",
            "ReaderPreferences",
        ),
        "digest_core.subscriptions.signup": ("AddressSignup",),
    }.items()
    for name in names
}


if not TYPE_CHECKING:  # (mypy sees the imports above; a __getattr__ would hide a typo from it)

    def __getattr__(name: str) -> object:
        """A re-export, imported from its module on first use (PEP 562)."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[__name__], name, value)
        return value


class Port(Protocol):
    """What an adapter may ask of the core. Every method is safe to call from the event loop
    (file and database work happens off it or asynchronously)."""

    @property
    def clock(self) -> Clock:
        """The core's clock (the flood limit and pacing run on it)."""
        ...

    @property
    def command_names(self) -> Sequence[str]:
        """The names of the core's commands (an adapter ignores others' commands in groups)."""
        ...

    @property
    def confirmations(self) -> Confirmations:
        """The confirmation flow of admin actions (prompts, presses)."""
        ...

    async def handle(self, request: Request) -> Reply:
        """Run one command (never raises for bad input)."""
        ...

    async def section(self, request: Request, date: dt.date, section: Section) -> Reply:
        """What a section button of the post of ``date`` answers."""
        ...

    async def archive_dates(self, *, admin: bool = False) -> list[dt.date]:
        """The dates the archive serves an issue for that the user may see (readers: only
        published ones, see :mod:`digest_core.publishing.embargo`), oldest first
        (autocompletion)."""
        ...

    async def receive_issue_file(
        self,
        request: Request,
        *,
        name: str,
        size: int | None,
        download: Callable[[], Awaitable[bytes]],
    ) -> Reply:
        """An issue file sent to the bot privately (``request`` names the sender, their
        capabilities and the words sent with it): checked, stored as ``digest-bot archive add``
        does, and answered (privately) with the errors or the preview. ``download`` is awaited
        only when the file is taken (an admin's, at most 1 MiB) and raises
        :class:`~digest_core.errors.TransientError` when the platform cannot give the file
        (:class:`digest_core.publishing.uploads.IssueUploads`)."""
        ...

    async def greeting(self) -> str:
        """A terminal's start-up block: the current issue, the next post (in the digest's
        zone and the host's), what to type (:func:`digest_core.service.greeting.greeting`)."""
        ...

    async def inactive_targets(self, request: Request) -> list[InactiveTarget]:
        """The targets of ``request.platform`` deactivated as gone, latest first, while its
        user types an argument of ``request.command`` (autocompletion): none for a user the
        command refuses (the core's capability check, not audited)."""
        ...

    async def inline(self, query: str, *, platform: str = "", asker: str = "") -> list[Article]:
        """Inline search: items of published issues matching ``query`` (the newest headline
        for a blank one), never an embargoed issue's. With ``platform``, the hits count as
        the dashboard's search hits once ``asker`` (the reader, held a few seconds in memory
        only) stops typing (:class:`~digest_core.commands.inline.InlineSearches`)."""
        ...

    async def reply(
        self,
        platform: Platform,
        target: Target,
        messages: Sequence[Message],
        *,
        send: SendOnce | None = None,
        paced: list[float] | None = None,
    ) -> list[str]:
        """Send ``messages`` to ``target`` as a reply (not a ledgered delivery), paced under
        the same budget as ``platform``'s deliveries, short 429s waited
        out (:func:`digest_core.commands.replies.send_replies`); their message ids. ``send`` is one
        send of one message (default ``platform.send`` without a part key).

        Raises:
            DeliveryError: a message could not be sent (the rest are not attempted).
        """
        ...

    def account(self, platform: Platform, target: Target) -> None:
        """Count a message sent at once, without waiting for the budget (a notice during a
        shutdown), against ``platform``'s pacing."""
        ...

    def counted(self, platform: Platform, requests: int) -> None:
        """Count ``requests`` just answered outside the pacing (an adapter's logging in)
        against ``platform``'s overall limit, which counts every request of the bot."""
        ...

    async def preferences(self, platform: str, reader: str) -> ReaderPreferences:
        """The delivery time, zone, format and follows of ``reader`` (a subscriber's id, as
        the ledger knows it) on ``platform``: the same preferences the readers' commands
        keep (the defaults when they never chose)."""
        ...

    async def set_preferences(
        self,
        platform: str,
        reader: str,
        *,
        at: str,
        zone: str,
        format: str,
        follows: Sequence[str],
    ) -> ReaderPreferences:
        """Make the words of a preferences form ``reader``'s preferences on ``platform``, all
        at once (:mod:`digest_core.subscriptions.preferences`): ``at`` HH:MM or "" (with the
        daily post), ``zone`` an IANA name or "" (the digest's), ``format`` full, compact or
        headline, ``follows`` keywords (the limits of ``/follow``); what is kept then.

        Raises:
            PreferenceRefused: a field does not fit (its name and why); nothing is stored.
        """
        ...


@runtime_checkable
class Adapter(Platform, Protocol):
    """A Platform that also talks with people: receives commands, knows its channels.

    The runtime calls :meth:`start` once the service is ready and :meth:`stop` on shutdown;
    both MUST return promptly (long-running receive loops run as tasks the adapter owns).
    """

    async def start(self, port: Port, *, receive: bool = True) -> None:
        """Connect; with ``receive``, also begin answering commands through ``port`` (without
        it, only :meth:`send` is used: ``digest-bot post``)."""
        ...

    async def stop(self) -> None:
        """Stop receiving, finish what is being answered, disconnect."""
        ...

    def channel_targets(self) -> list[Target]:
        """Where the daily issue is posted (from config)."""
        ...

    async def alert_admins(self, text: str) -> None:
        """Tell this platform's admins something went wrong (best effort, never raises)."""
        ...


@runtime_checkable
class Tallied(Protocol):
    """An adapter that keeps counts of its own besides the ledger's (the email platform: its
    readers by state, its bounces): ``status`` lists them under the platform, ``/metrics``
    exports each group as ``digest_<group>{platform, kind}``."""

    async def tallies(self) -> Mapping[str, Mapping[str, int]]:
        """Counts by group (a lowercase word, a metric's name), then by kind. Counts only,
        never an address or anything else that names a person."""
        ...
