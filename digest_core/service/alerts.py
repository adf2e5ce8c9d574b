"""Alerts to the admins of every platform: sent at once, queued when a platform cannot be
reached (the :class:`~digest_core.delivery.resuming.Resumer` sends them again), and the texts
of the ledger's trouble and recovery."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Mapping

from digest_core.delivery.health import Trouble, short_error
from digest_core.errors import TransientError
from digest_core.port import Adapter

log = logging.getLogger(__name__)

#: ``queue(platform, text, reason)``: keep an alert no admin of the platform got
Queue = Callable[[str, str, str], None]


class Alerts:
    """Tells every platform's admins; what no admin of a platform got is given to ``queue``."""

    def __init__(self, platforms: Mapping[str, Adapter], queue: Queue) -> None:
        self.platforms = platforms
        self._queue = queue
        #: alerts under way (about the ledger's health: they never touch the ledger)
        self._sending: set[asyncio.Task[None]] = set()

    async def alert(self, text: str) -> None:
        """Tell every platform's admins ``text``; logged at WARNING, unless a platform shows
        alerts on the operator's terminal itself (``alerts_on_terminal``, the console): the
        operator reads it once."""
        if not any(getattr(p, "alerts_on_terminal", False) for p in self.platforms.values()):
            log.warning("alert: %s", text)
        for platform in self.platforms.values():
            try:
                await platform.alert_admins(text)
            except TransientError as exc:  # nobody got it: sent again once it answers
                self._queue(platform.name, text, short_error(exc))
            except Exception:  # an alert must never take the bot down
                log.exception("could not alert %s admins", platform.name)

    def soon(self, text: str) -> None:
        """:meth:`alert` in a task of its own (from a callback, or not to wait for it)."""
        task = asyncio.get_running_loop().create_task(self.alert(text), name="delivery-alert")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def settle(self, *, within: float) -> None:
        """Wait up to ``within`` seconds for the alerts under way (on shutdown, before the
        adapters stop)."""
        if self._sending:
            await asyncio.wait(list(self._sending), timeout=max(within, 0.01))


def ledger_health_text(
    trouble: Trouble,
    cleared_at: dt.datetime | None,
    zone: dt.tzinfo,
    stopped: list[tuple[str, dt.date, bool]],
) -> str:
    """The admins' alert when the ledger's database fails (``cleared_at`` None) or answers
    again; ``stopped``: the deliveries it interrupted (platform, day, whether each resumes)."""
    if cleared_at is None:
        return (
            f"账本数据库出错，推送在等待 / {trouble.describe(zone)}: deliveries wait and "
            "resume by themselves once it answers; nothing is sent twice"
        )
    seconds = (cleared_at - trouble.since).total_seconds()
    then = "deliveries go on"
    if stopped:
        names = ", ".join(f"{platform} {day}" for platform, day, _ in stopped)
        resuming = all(resumes for _, _, resumes in stopped)
        then = f"{len(stopped)} interrupted delivery(ies) ({names}) " + (
            "resume now" if resuming else "wait for `digest-bot post`"
        )
    return (
        f"账本数据库已恢复 / the ledger answers again after {seconds:.0f} s (trouble "
        f"since {trouble.since.astimezone(zone):%H:%M}: {trouble.error}); {then}"
    )
