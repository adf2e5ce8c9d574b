"""What commands take and give: Request, Reply, Status, Capability, and the admin backend."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from digest_core.rendering import Message, Renderer, plain_renderer


class Capability(StrEnum):
    """What a user may do beyond reading; adapters map platform roles to these."""

    REPOST = "repost"
    STATUS = "status"
    #: preview unpublished issues, approve or hold them
    PUBLISH = "publish"


ADMIN = frozenset(Capability)


class Status(StrEnum):
    """The machine-readable outcome of a command (:attr:`Reply.status`), for adapters and tests.

    A StrEnum: each member equals its string, so logs and older comparisons keep working.
    """

    #: the command ran; the messages are its answer
    OK = "ok"
    #: a wrong or missing argument, an unknown command, or a command not available here
    #: (subscriptions where none are possible, admin commands while delivery is not running);
    #: the messages explain and give the usage
    USAGE = "usage"
    #: nothing matched: no issue for the date, no search hit, a target that was not deactivated
    NOT_FOUND = "not_found"
    #: an admin command from a user without the capability (audited; the reply is private)
    REFUSED = "refused"
    #: an admin action waits for a yes/no: :attr:`Reply.confirm` holds the request to re-issue
    CONFIRM = "confirm"
    #: the command failed unexpectedly (logged with its traceback); the reader is told to retry
    ERROR = "error"


@dataclass(frozen=True)
class Request:
    """One command as the core sees it, whatever platform it came from."""

    command: str
    args: tuple[str, ...] = ()
    #: the name of the platform the command came from
    platform: str = ""
    #: the renderer of the replies (the platform's)
    flavor: Renderer = field(default_factory=plain_renderer)
    user: str = ""
    chat: str = ""
    capabilities: frozenset[Capability] = frozenset()
    #: the adapter already asked the admin to confirm (Telegram/Discord buttons); the console
    #: operator is trusted and confirms by typing the command.
    confirmed: bool = False
    #: the typed option values by argument name, from a platform with typed options (Discord),
    #: passed as the platform gave them; None: the core reads :attr:`args`, the words
    values: Mapping[str, object] | None = field(default=None, hash=False)
    #: how a request that was not typed came (``/unsubscribe``'s reason, one of
    #: :data:`LEFT_REASONS`): ``""`` for a command typed or pressed in a chat
    via: str = ""


#: why a subscription ended, as the dashboard counts it (``usage_counts`` kind ``left``):
#: the reader's /unsubscribe (typed or its button), the email's unsubscribe link (or its
#: RFC 8058 one-click POST), a mail to its List-Unsubscribe address, a hard bounce (or
#: soft bounces past the limit) or a spam complaint; a target that went away (blocked, chat
#: deleted) is a deactivation instead
LEFT_REASONS = ("command", "link", "mailto", "bounce", "complaint")

#: the prefix of a button's data that runs a reader command (``rd:subscribe 07:00``)
CHOICE_PREFIX = "rd:"
#: the issue commands a :class:`Choice` may run besides the readers' own (previous/next issue,
#: one brief: :attr:`Reply.navigation`)
READING_CHOICES = frozenset({"issue", "brief"})


@dataclass(frozen=True)
class Choice:
    """A button under a reply: pressing it runs ``data``, a command line without its slash
    (``"subscribe 07:00"``), for the presser
    (:func:`digest_core.subscriptions.commands.parse_choice`)."""

    label: str
    data: str


@dataclass
class Reply:
    """What to send back: messages in order; ``private`` asks the adapter to answer only the
    requester where the platform can (Discord ephemeral)."""

    messages: list[Message]
    private: bool = False
    #: set when an admin action needs a yes/no before it runs: the adapter shows the prompt
    #: of :mod:`digest_core.commands.confirmation`, which re-issues the request ``confirmed``.
    confirm: Request | None = None
    #: machine-readable outcome for adapters and tests (every value listed in :class:`Status`)
    status: Status = Status.OK
    extra: dict[str, object] = field(default_factory=dict)
    #: rows of buttons for the last message (``/settings``); adapters draw them
    choices: tuple[tuple[Choice, ...], ...] = ()
    #: rows of issue buttons (previous/next issue, one per brief) for an issue's reply;
    #: drawn like :attr:`choices` by the adapters that opt in (Feishu, DingTalk), after them
    navigation: tuple[tuple[Choice, ...], ...] = ()


class AdminBackend(Protocol):
    """What admin commands need from the running bot (delivery and bookkeeping)."""

    async def repost(
        self,
        date: dt.date,
        *,
        force: bool,
        requested_by: str,
        target: tuple[str, str] | None = None,
    ) -> str:
        """Deliver the issue of ``date`` again (only missing parts unless ``force``), to every
        target or only ``target`` (platform, id); a summary."""
        ...

    async def correct_issue(self, date: dt.date, *, requested_by: str) -> str:
        """Edit the messages already posted for ``date`` to its current revision; a summary."""
        ...

    async def status(self) -> str:
        """Next scheduled post, last delivery per target, failures: a summary."""
        ...

    async def subscribe(self, platform: str, chat: str, *, on: bool) -> bool:
        """(Un)subscribe a private chat to the daily issue; False when nothing changed."""
        ...

    async def reactivate(self, platform: str, target_id: str) -> bool:
        """Send to a target deactivated as gone again; False if it was not deactivated."""
        ...

    async def audit(self, request: Request, *, action: str, allowed: bool, outcome: str) -> None:
        """Record an admin action (or a refused attempt) in the audit log."""
        ...

    async def decide(
        self, date: dt.date, *, approve: bool, revision: str | None, requested_by: str
    ) -> str:
        """Approve (or hold) ``date``'s issue, of ``revision`` when given (a stale one is
        refused); audited; a late approval posts at once. The reply text."""
        ...


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
