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
from bots.renderers import Flavor
from digest_core.actions import CommandButton
from digest_core.commands import ADMIN, Request, parse_command_line
from digest_core.models import escape, shorten
from digest_core.platform import PartKey, PlatformLimits, Rate, Target, TargetKind
from digest_core.rendering import Message, RenderOptions, notice, preview

if TYPE_CHECKING:
    from digest_core.port import Port

log = logging.getLogger(__name__)

#: the most characters of a typed command echoed above its answer
MAX_ECHO_LINE = 80


class ConsolePlatform:
    """An Adapter whose one target is the terminal and whose one user is the operator.

    It never fails and needs no pacing; it exists so `digest-bot run` shows the whole bot working
    (schedule, ledger, commands) without tokens. The operator has every capability.
    """

    name = "console"
    flavor = Flavor.PLAIN
    #: a terminal has no rate limit worth the name
    limits = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})
    post_options = RenderOptions(buttons=False)
    target = Target("console", "stdout", TargetKind.CHANNEL)
    #: alerts are printed on the operator's terminal, so the service does not log them again
    alerts_on_terminal = True

    def __init__(
        self,
        *,
        out: TextIO | None = None,
        stdin: TextIO | None = None,
        interactive: bool = True,
        in_flight: InFlight | None = None,
    ):
        self._out = out or sys.stdout
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self._stdin = stdin
        self._interactive = interactive
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ Platform

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """Print ``message``; returns a running number as the message id (``key`` unused)."""
        message_id = str(next(self._ids))
        self.write(preview(message, self.flavor), header=f"── {target.id} #{message_id} ──")
        return message_id

    def write(self, text: str, *, header: str = "") -> None:
        if header:
            self._out.write(_terminal_safe(header) + "\n")
        self._out.write(_terminal_safe(text.rstrip("\n")) + "\n\n")
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
        self.write(await port.greeting(), header="── digest-bot ──")
        self._task = asyncio.create_task(self._serve(port), name="console-commands")

    async def stop(self) -> None:
        """Stop reading commands; one being answered is cut short and the operator told."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await self.in_flight.apologise(within=1.0)

    async def _serve(self, port: Port) -> None:
        async for line in read_lines(self._stdin):
            if not line.strip():
                continue
            parsed = parse_command_line(line)
            if parsed is None:
                for m in notice("命令以 / 开头，例如 /today 或 /help", self.flavor):
                    self.write(preview(m, self.flavor))
                continue
            command, args = parsed
            request = Request(
                command,
                args,
                platform=self.name,
                flavor=self.flavor,
                user="operator",
                chat=self.target.id,
                capabilities=ADMIN,
                confirmed=True,
            )
            try:
                reply = await self.in_flight.run(
                    f"console {line.strip()}",
                    functools.partial(port.handle, request),
                    apologise=self._restarting,
                )
            except Exception:  # a command must never end the console
                log.exception("command %r failed", line.strip())
                continue
            if reply is None:  # shutting down; the operator was told
                continue
            # the typed line, as the reply's heading: its start is enough
            self._out.write(f"> {shorten(line.strip(), MAX_ECHO_LINE)}\n")
            for m in reply.messages:
                self.write(preview(m, self.flavor))
        log.info("stdin closed; the bot keeps running (Ctrl-C to stop)")

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


def _terminal_safe(text: str) -> str:
    """``text`` with every control character but the line break written as an escape
    (``\\x1b``), so nothing typed or quoted can move the cursor or recolour the terminal."""
    return "\n".join(escape(line) for line in text.split("\n"))
