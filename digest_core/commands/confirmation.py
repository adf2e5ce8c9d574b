"""Confirming admin actions (a repost): prompt, buttons, who may press, texts, one run at once.

A command that needs a yes/no answers with a :class:`~digest_core.commands.Reply` whose
``confirm`` holds the request to re-issue. The adapter shows :meth:`Confirmations.prompt`'s
messages with its two buttons and, when one is pressed, asks :meth:`Confirmations.press`
what to do; the rules and the texts are here, once, so every platform behaves the same:

- Cancel closes the prompt (admins only: anyone else is refused by the core, not audited).
- Confirm by someone without the command's capability runs the request anyway, as them: the
  core refuses it and writes the audit entry; nothing is done.
- Where the prompt knows who asked (a platform that keeps its prompts), only that admin may
  press; a press by another is refused and not audited (nothing was attempted).
- A prompt being run is not run again by a second press meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, replace
from enum import StrEnum

from digest_core.commands import Reply, Request
from digest_core.commands.declaration import CommandSpec
from digest_core.commands.dispatch import Commands
from digest_core.errors import CommandRefused
from digest_core.rendering import Message, notice, plain_renderer, preview

log = logging.getLogger(__name__)

#: Button data of a confirmation: ``cf:<command>:<args>`` re-issues the command confirmed,
#: ``cx`` cancels. Stateless, so a prompt still works after a restart.
CONFIRM_PREFIX = "cf"
CANCEL_DATA = "cx"
#: the smallest button-data limit of the platforms with stateless buttons (UTF-8 bytes; a
#: Telegram callback_data holds 64)
MAX_BUTTON_DATA = 64
#: How long a prompt that the platform keeps in memory stays usable (seconds).
CONFIRM_TIMEOUT_SECONDS = 300.0

CONFIRM_LABEL = "确认 / Confirm"
CANCEL_LABEL = "取消 / Cancel"

TOO_LONG = "参数太长，无法确认 / arguments too long to confirm"
NOT_YOURS = "只有发起的管理员可以确认。/ Only the admin who asked can confirm."
ADMINS_ONLY = "只有管理员可以操作 / admins only"
BUSY = "已在处理 / already running"
WORKING = "正在执行… / working…"
CANCELLED = "已取消 / cancelled"
CANCELLED_NOTE = "✖ 已取消。/ Cancelled."
#: what a confirmed prompt says while its command runs, unless its declaration tells
#: (:attr:`~digest_core.commands.declaration.CommandSpec.running`)
RUNNING = "执行中… / running…"
#: the action a press of Cancel is, as a refusal names it
CANCEL = "cancel"


def confirmed_note(request: Request, spec: CommandSpec | None = None) -> str:
    """What a confirmed prompt becomes while its action runs (``spec``: the declaration of
    the command confirmed)."""
    doing = spec.running if spec is not None and spec.running else RUNNING
    return f"✔ 已确认，{doing} (confirmed by {request.user})"


def confirm_data(request: Request, *, limit: int = MAX_BUTTON_DATA) -> str | None:
    """``cf:repost:2026-11-27 force`` for a request to confirm; None if over ``limit`` bytes."""
    data = f"{CONFIRM_PREFIX}:{request.command}:{' '.join(request.args)}"
    return data if len(data.encode("utf-8")) <= limit else None


def parse_confirm_data(data: str) -> Request | None:
    """The inverse of :func:`confirm_data` (command and args only; the rest comes from the
    press: who pressed decides the capabilities)."""
    parts = data.split(":", 2)
    if len(parts) != 3 or parts[0] != CONFIRM_PREFIX or not parts[1]:
        return None
    return Request(parts[1], tuple(a for a in parts[2].split(" ") if a))


@dataclass(frozen=True)
class Button:
    """One button under a prompt: its label and its data (a platform that keeps its prompts in
    memory may use its own ids instead)."""

    label: str
    data: str


@dataclass(frozen=True)
class Prompt:
    """A confirmation as the adapter shows it: ``messages``, with ``buttons`` on the last one
    (empty when the request cannot be confirmed: the messages then say why)."""

    messages: list[Message]
    buttons: tuple[Button, ...]
    #: the request Confirm re-issues (``confirmed``)
    request: Request


class Action(StrEnum):
    """What a press of a confirmation button leads to."""

    #: answer ``text``, replace the prompt by ``note``, then :meth:`~Confirmations.run`
    RUN = "run"
    #: answer ``text`` to the presser and replace the prompt by ``note``
    CANCEL = "cancel"
    #: answer ``text`` to the presser only (an alert); the prompt stays
    REFUSE = "refuse"
    #: the prompt is being run already: answer ``text``
    BUSY = "busy"
    #: not a confirmation button (or an unreadable one): just acknowledge the press
    IGNORE = "ignore"


@dataclass(frozen=True)
class Decision:
    """What to do about one press, and what to say."""

    action: Action
    #: the short answer to the presser (a callback answer, an ephemeral message)
    text: str = ""
    #: what the prompt becomes (RUN, CANCEL)
    note: str = ""
    #: the request to run (RUN), as the presser
    request: Request | None = None


class Confirmations:
    """The confirmation flow over one :class:`~digest_core.commands.dispatch.Commands`."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        #: (platform, prompt) of the confirmed actions running
        self._running: set[tuple[str, Hashable]] = set()

    def prompt(self, reply: Reply, *, limit: int = MAX_BUTTON_DATA) -> Prompt:
        """The prompt of a reply whose ``confirm`` is set (``limit``: the platform's button
        data limit in bytes).

        Raises:
            ValueError: ``reply`` asks for no confirmation.
        """
        if reply.confirm is None:
            raise ValueError("the reply asks for no confirmation")
        request = reply.confirm
        data = confirm_data(request, limit=limit)
        if data is None:
            return Prompt(notice(TOO_LONG, request.flavor), (), request)
        buttons = (Button(CONFIRM_LABEL, data), Button(CANCEL_LABEL, CANCEL_DATA))
        return Prompt(list(reply.messages), buttons, request)

    @staticmethod
    def is_ours(data: str) -> bool:
        """Whether button ``data`` is a confirmation's (Confirm or Cancel)."""
        return data == CANCEL_DATA or data.startswith(CONFIRM_PREFIX + ":")

    @contextlib.asynccontextmanager
    async def press(
        self, data: str, *, by: Request, prompt: Hashable, asked_by: str | None = None
    ) -> AsyncIterator[Decision]:
        """Decide what the press of button ``data`` on ``prompt`` does; while the block runs,
        a RUN holds ``prompt`` (another press of it is BUSY).

        ``by`` is the presser as a request (platform, flavor, user, chat, capabilities; its
        command is ignored); ``asked_by`` the user who asked for the prompt, where known. A
        press by someone without the capability is run as them here, so the core refuses and
        audits it (REFUSE with the refusal's text).
        """
        decision = await self._decide(data, by=by, asked_by=asked_by)
        key = (by.platform, prompt)  # prompts are the platform's: its ids never meet another's
        if decision.action is Action.RUN:
            if key in self._running:
                decision = Decision(Action.BUSY, BUSY)
            else:
                self._running.add(key)
                try:
                    yield decision
                finally:
                    self._running.discard(key)
                return
        yield decision

    async def run(self, decision: Decision) -> Reply:
        """Run a RUN decision's request; its reply (never raises: a failure is an apology)."""
        assert decision.action is Action.RUN and decision.request is not None
        request = decision.request
        reply = await self.commands.handle(request)
        who = f"{request.platform}:{request.user}"
        log.info("/%s confirmed by %s: %s", request.command, who, reply.status)
        return reply

    async def _decide(self, data: str, *, by: Request, asked_by: str | None) -> Decision:
        cancel = data == CANCEL_DATA
        asked = None if cancel else parse_confirm_data(data)
        if not cancel and asked is None:
            return Decision(Action.IGNORE)
        if asked_by is not None and by.user != asked_by:
            return Decision(Action.REFUSE, NOT_YOURS)
        plain = plain_renderer()
        if cancel:
            if not by.capabilities:
                # any admin may cancel; the core answers anyone else (nothing to audit)
                refusal = CommandRefused(CANCEL, "admin", told=ADMINS_ONLY, audited=False)
                refused = await self.commands.refuse(replace(by, flavor=plain), refusal)
                return Decision(Action.REFUSE, _told(refused))
            return Decision(Action.CANCEL, CANCELLED, CANCELLED_NOTE)
        assert asked is not None
        request = replace(by, command=asked.command, args=asked.args, confirmed=True)
        if not by.capabilities:
            # the core refuses and writes the audit entry; nothing is run
            refused = await self.commands.handle(replace(request, flavor=plain))
            return Decision(Action.REFUSE, _told(refused))
        spec = self.commands.spec(request.command)
        return Decision(Action.RUN, WORKING, confirmed_note(request, spec), request)


def _told(refused: Reply) -> str:
    """The text of a refusal (plain), for the presser's short answer."""
    plain = plain_renderer()
    return preview(refused.messages[0], plain) if refused.messages else ADMINS_ONLY
