"""Command handlers under way, tracked in one place so a shutdown can bound and explain them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a user whose command is cut short by a shutdown (or arrives during one) is told.
RESTARTING = "机器人正在重启，请稍后重试 / The bot is restarting, please try again"

#: Tells one user that the bot is restarting (best effort: MAY raise, the error is logged).
Apology = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class _Handler:
    what: str
    apologise: Apology


class InFlight:
    """The command handlers of every platform that are answering someone right now.

    Adapters run each command (slash command, button press, typed line) through :meth:`run`
    with an ``apologise`` callback that tells its user the bot is restarting (a Discord
    follow-up, a Telegram reply, a console line). On shutdown the runtime, while the adapters
    are still connected:

    1. :meth:`close`: commands arriving from now on are told at once to try again;
    2. :meth:`idle`: gives the running ones a grace period to finish their answer;
    3. :meth:`cancel`: cancels the rest and waits (bounded) for them to unwind;
    4. :meth:`apologise`: tells every user whose handler was cancelled, whoever cancelled it
       (the runtime here, or the end of the deliveries' grace for a /repost), to try again.

    So an acknowledged command is either answered or told to try again, never left
    "thinking…". One instance serves every adapter of a process; an adapter built without one
    makes its own.
    """

    def __init__(self) -> None:
        self._running: dict[asyncio.Task[Any], _Handler] = {}
        self._owed: list[_Handler] = []
        self.closing = False

    async def run(
        self, what: str, handler: Callable[[], Awaitable[T]], *, apologise: Apology
    ) -> T | None:
        """Await ``handler()`` in the current task, tracked; ``what`` names it in logs.

        Once :meth:`close` was called, ``handler`` is not run: the user is told to try again
        and None is returned. A handler cancelled while tracked owes ``apologise``, which
        :meth:`apologise` pays; the cancellation propagates.
        """
        if self.closing:
            await self._tell(_Handler(what, apologise))
            return None
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - handlers always run in tasks
            return await handler()
        entry = _Handler(what, apologise)
        self._running[task] = entry
        try:
            return await handler()
        except asyncio.CancelledError:
            self._owed.append(entry)
            raise
        finally:
            self._running.pop(task, None)

    def close(self) -> None:
        """From now on commands are refused with :data:`RESTARTING` (idempotent)."""
        self.closing = True

    async def idle(self, within: float) -> bool:
        """Wait up to ``within`` seconds for the running handlers; True when none is left."""
        tasks = list(self._running)
        if tasks and within > 0:
            await asyncio.wait(tasks, timeout=within)
        return not self._running

    async def cancel(self, *, within: float) -> int:
        """Cancel the running handlers and wait up to ``within`` seconds for them to unwind.

        Returns how many were cancelled.
        """
        tasks = list(self._running)
        for task in tasks:
            log.info("cancelling %s: the bot is stopping", self._running[task].what)
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=max(within, 0.01))
            if stuck:
                log.warning("%d command handler(s) did not unwind after cancel", len(stuck))
        return len(tasks)

    async def apologise(self, *, within: float) -> int:
        """Tell every user whose handler was cancelled that the bot is restarting, all at
        once, for at most ``within`` seconds. Returns how many were told (or tried)."""
        owed, self._owed = self._owed, []
        if not owed:
            return 0
        tells = [asyncio.ensure_future(self._tell(entry)) for entry in owed]
        _, late = await asyncio.wait(tells, timeout=max(within, 0.01))
        for task in late:
            task.cancel()
        if late:
            log.warning("%d restart notice(s) not sent within %.1f s", len(late), within)
        return len(owed)

    async def _tell(self, entry: _Handler) -> None:
        try:
            await entry.apologise()
        except Exception as exc:  # best effort: the user may be gone, the platform down
            log.warning("could not tell the user of %s to try again: %r", entry.what, exc)
