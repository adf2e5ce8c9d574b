"""The console platform: posts are printed to stdout; lines typed on stdin are commands."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, TextIO

from bots.inflight import RESTARTING, InFlight
from bots.logs import quiet_libraries, route_to_terminal
from digest_core.port import (
    ADMIN,
    CANCEL_DATA,
    Action,
    CommandButton,
    Message,
    PartKey,
    RenderOptions,
    Reply,
    Request,
    Target,
    TargetKind,
    confirm_data,
    escape,
    notice,
    parse_command_line,
    preview,
    shorten,
)
from digest_core.rendering import plain as plain_render

if TYPE_CHECKING:
    from digest_core.port import PlatformLimits, Port, Renderer

log = logging.getLogger(__name__)

#: the most characters of a typed command echoed above its answer
MAX_ECHO_LINE = 80

#: shown where the operator types, when stdin and stdout are a terminal
PROMPT = "digest-bot> "

#: what the greeting adds: who the operator is here, and how to see a reader's view
ROLE_NOTE = (
    "你是管理员 / you are an admin here: /repost asks to confirm (y/N), as on Telegram and "
    "Discord; /as reader shows what a reader sees, /as admin back"
)

NOT_A_COMMAND = (
    "命令以 / 开头，例如 /today 或 /help\nCommands start with a slash, e.g. /today or /help"
)
CONFIRM_QUESTION = "确认？输入 y 确认，其他取消 / Confirm? y confirms, anything else cancels [y/N]"
AS_USAGE = "用法 / usage: /as reader | /as admin"
AS_READER = "现在以读者身份 / you now see what a reader sees (/as admin to go back)"
AS_ADMIN = "现在以管理员身份 / you are an admin again"

#: answers that confirm a pending prompt
YES = frozenset({"y", "yes", "是", "确认"})


class ConsolePlatform:
    """An Adapter whose one target is the terminal and whose one user is the operator.

    It never fails and needs no pacing; it exists so `digest-bot run` shows the whole bot working
    (schedule, ledger, commands) without tokens. The operator is an admin (``/as reader``
    drops the capabilities, ``/as admin`` restores them) and confirms admin actions as on
    the chat platforms: the core's prompt is printed and the next line typed answers it
    (``y`` runs it, anything else cancels).

    On a terminal (stdin and the output both ttys) a :data:`PROMPT` is shown where the
    operator types, the terminal's own echo is the only echo, and log records are printed
    above the prompt; otherwise (piped input) each line read is echoed as ``> line`` before
    what it causes.
    """

    name = "console"
    flavor: Renderer = plain_render
    post_options = RenderOptions(buttons=False)
    target = Target("console", "stdout", TargetKind.CHANNEL)
    #: alerts are printed on the operator's terminal, so the service does not log them again
    alerts_on_terminal = True

    def __init__(
        self,
        *,
        limits: PlatformLimits,
        out: TextIO | None = None,
        stdin: TextIO | None = None,
        interactive: bool = True,
        in_flight: InFlight | None = None,
    ):
        """``limits``: the pacing its spec states (:mod:`bots.console.spec`)."""
        self.limits = limits
        self._out = out or sys.stdout
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self._stdin = stdin
        self._interactive = interactive
        self._ids = itertools.count(1)
        self._prompts = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._capabilities = ADMIN
        source = stdin if stdin is not None else sys.stdin
        self._tty = _isatty(source) and _isatty(self._out)
        #: the prompt is on the screen (the reader waits for a line)
        self._prompting = False
        self._lock = threading.Lock()  # log records come from threads too
        if self._tty:  # built before the scheduler starts: its first INFO lines are kept out
            quiet_libraries()

    # ------------------------------------------------------------ Platform

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """Print ``message``; returns a running number as the message id (``key`` unused)."""
        message_id = str(next(self._ids))
        self.write(preview(message, self.flavor), header=f"── {target.id} #{message_id} ──")
        return message_id

    def write(self, text: str, *, header: str = "") -> None:
        """Print ``text`` (under ``header``) as a block; on a terminal, above the prompt."""
        block = _terminal_safe(text.rstrip("\n")) + "\n\n"
        if header:
            block = _terminal_safe(header) + "\n" + block
        self._print(block)

    def _print(self, block: str) -> None:
        with self._lock:
            if self._prompting:
                self._out.write("\r\x1b[K")  # the prompt's line, cleared
            self._out.write(block)
            if self._prompting:
                self._out.write(PROMPT)
            self._out.flush()

    def _log_line(self, line: str) -> None:
        """A formatted log record, printed above the prompt (see :func:`route_to_terminal`)."""
        self._print(line + "\n")

    def _show_prompt(self) -> None:
        if not self._tty:
            return
        with self._lock:
            self._prompting = True
            self._out.write(PROMPT)
            self._out.flush()

    # ------------------------------------------------------------ Adapter

    def channel_targets(self) -> list[Target]:
        return [self.target]

    async def alert_admins(self, text: str) -> None:
        self.write(text, header="⚠ alert")

    async def message_admins(
        self, messages: Sequence[Message], *, actions: Sequence[CommandButton] = ()
    ) -> int:
        """Print ``messages`` for the operator (the admin), each action as the command to type."""
        for message in messages:
            self.write(preview(message, self.flavor), header="── admin ──")
        if actions:
            self.write("  ".join(f"[{a.label}] /{' '.join((a.command, *a.args))}" for a in actions))
        return 1

    async def start(self, port: Port, *, receive: bool = True) -> None:
        if not (receive and self._interactive):
            return
        # what is current, when the next post comes (it may be hours away) and what to type
        greeting = await port.greeting()
        self.write(f"{greeting}\n{ROLE_NOTE}", header="── digest-bot ──")
        if self._tty:
            route_to_terminal(self._log_line)
        self._task = asyncio.create_task(self._serve(port), name="console-commands")

    async def stop(self) -> None:
        """Stop reading commands; one being answered is cut short and the operator told."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await self.in_flight.apologise(within=1.0)
        if self._tty:
            route_to_terminal(None)
            with self._lock:
                if self._prompting:
                    self._out.write("\r\x1b[K")
                    self._out.flush()
                self._prompting = False

    async def _serve(self, port: Port) -> None:
        lines = read_lines(self._stdin)
        self._show_prompt()
        async for line in lines:
            with self._lock:
                self._prompting = False  # the terminal moved to the next line
            if line.strip():
                await self._take(port, lines, line)
            self._show_prompt()
        log.info("stdin closed; the bot keeps running (Ctrl-C to stop)")

    def _echo(self, line: str) -> None:
        """Piped input is not shown by a terminal: echo the line before what it causes."""
        if not self._tty:
            self._print(f"> {shorten(line.strip(), MAX_ECHO_LINE)}\n")

    async def _take(self, port: Port, lines: AsyncIterator[str], line: str) -> None:
        """Answer one typed ``line`` (reading the answer to a confirmation from ``lines``)."""
        self._echo(line)
        parsed = parse_command_line(line)
        if parsed is None:
            self._notice(NOT_A_COMMAND)
            return
        command, args = parsed
        if command == "as":
            self._switch(args)
            return
        request = Request(
            command,
            args,
            platform=self.name,
            flavor=self.flavor,
            user="operator",
            chat=self.target.id,
            capabilities=self._capabilities,
        )
        reply = await self._run(port, request, line)
        if reply is None:
            return
        for m in reply.messages:
            self.write(preview(m, self.flavor))
        if reply.confirm is not None:
            await self._confirm(port, lines, reply, request)

    async def _run(self, port: Port, request: Request, line: str) -> Reply | None:
        """The command's reply; None if it failed (logged) or the bot is stopping (the operator
        was told)."""
        try:
            return await self.in_flight.run(
                f"console {line.strip()}",
                functools.partial(port.handle, request),
                apologise=self._restarting,
            )
        except Exception:  # a command must never end the console
            log.exception("command %r failed", line.strip())
            return None

    async def _confirm(
        self, port: Port, lines: AsyncIterator[str], reply: Reply, asked: Request
    ) -> None:
        """Ask the operator the prompt's yes/no; the core decides what a press does, as for a
        button on Telegram or Discord (:mod:`digest_core.commands.confirmation`)."""
        confirmations = port.confirmations
        # a typed answer carries no button data: the platforms' byte limit does not apply
        limit = plain_render.Limits.button_data_maxlen
        prompt = confirmations.prompt(reply, limit=limit)
        if not prompt.buttons:  # it cannot be confirmed
            for m in prompt.messages:
                self.write(preview(m, self.flavor))
            return
        self._notice(CONFIRM_QUESTION)
        self._show_prompt()
        answer = await anext(lines, "")
        with self._lock:
            self._prompting = False
        self._echo(answer)
        yes = answer.strip().lower() in YES
        data = CANCEL_DATA
        if yes:
            data = confirm_data(prompt.request, limit=limit) or CANCEL_DATA
        by = Request("", platform=self.name, flavor=self.flavor, user=asked.user,
                     chat=asked.chat, capabilities=self._capabilities)  # fmt: skip
        async with confirmations.press(
            data, by=by, prompt=next(self._prompts), asked_by=asked.user
        ) as decision:
            if decision.note:
                self._notice(decision.note)
            elif decision.text:
                self._notice(decision.text)
            if decision.action is Action.RUN:
                done = await self.in_flight.run(
                    f"console {asked.command} confirmed",
                    functools.partial(confirmations.run, decision),
                    apologise=self._restarting,
                )
                for m in done.messages if done is not None else ():
                    self.write(preview(m, self.flavor))

    def _switch(self, args: Sequence[str]) -> None:
        role = args[0].lower() if len(args) == 1 else ""
        if role == "reader":
            self._capabilities = frozenset()
            self._notice(AS_READER)
        elif role == "admin":
            self._capabilities = ADMIN
            self._notice(AS_ADMIN)
        else:
            self._notice(AS_USAGE)

    def _notice(self, text: str) -> None:
        for m in notice(text, self.flavor):
            self.write(preview(m, self.flavor))

    async def _restarting(self) -> None:
        for m in notice(RESTARTING, self.flavor):
            self.write(preview(m, self.flavor))


async def read_lines(stream: TextIO | None = None) -> AsyncIterator[str]:
    """Yield lines typed on ``stream`` (default stdin) until it is closed.

    A daemon thread does the blocking reads, so the event loop never waits on the terminal.
    """
    source = stream or sys.stdin
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        try:
            for line in source:
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):  # closed
        return False


def _terminal_safe(text: str) -> str:
    """``text`` with every control character but the line break written as an escape
    (``\\x1b``), so nothing typed or quoted can move the cursor or recolour the terminal."""
    return "\n".join(escape(line) for line in text.split("\n"))
