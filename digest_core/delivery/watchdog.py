"""The ledger watchdog: notices a ledger database deleted or replaced under the running bot."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from digest_core.clock import Clock
from digest_core.delivery.identity import RUN_NEW_LEDGER
from digest_core.delivery.ledger import Ledger
from digest_core.errors import LedgerLost

log = logging.getLogger(__name__)

#: seconds between two looks unless configured (``delivery.ledger_check_seconds``)
DEFAULT_INTERVAL = 20.0


def file_change(path: Path, opened: tuple[int, int]) -> str | None:
    """How the file at ``path`` differs from the one opened as ``(st_dev, st_ino)``: "deleted",
    "replaced", or None when it is the same file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "deleted"
    except OSError as exc:  # a vanished folder, an unreadable one: not the file we use
        return f"unreachable ({exc.strerror})"
    return None if (st.st_dev, st.st_ino) == opened else "replaced"


async def identity_change(ledger: Ledger) -> str | None:
    """For a database without a file to watch: "replaced" when its ledger id is not the one
    read at open. A database that does not answer is not judged (that is trouble, not loss)."""
    try:
        found = await ledger.read_identity()
    except Exception as exc:
        log.debug("watchdog: could not read the ledger id: %s", exc)
        return None
    return None if found == ledger.ledger_id else "replaced"


def lost_error(ledger: Ledger, change: str, *, shown: str) -> LedgerLost:
    """The one-line error of a ledger that went away (``change`` says how)."""
    return LedgerLost(
        f"ledger {shown} (database_url) was {change} while the bot ran; stopped delivering "
        f"so nothing is sent twice. Restore it: copy your backup to {shown} (removing any "
        f"{shown}-wal and {shown}-shm) and start again, or run `{RUN_NEW_LEDGER}` to accept "
        "an empty ledger",
        where=shown,
    )


class LedgerWatchdog:
    """Looks every ``interval`` seconds whether the ledger's database is still the one opened.

    For SQLite it compares the file's ``(st_dev, st_ino)`` (a deleted file keeps working for
    the connections that have it open, silently); for every database, the ledger id row.
    On the first difference it calls ``ledger.lose()`` (nothing more is claimed, so nothing
    more is sent), then awaits ``on_lost(error)`` once, and stops looking.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        clock: Clock,
        interval: float = DEFAULT_INTERVAL,
        shown: str,
        on_lost: Callable[[LedgerLost], Awaitable[None]],
    ) -> None:
        if interval <= 0:
            raise ValueError("the watchdog interval must be positive")
        self.ledger = ledger
        self.clock = clock
        self.interval = interval
        self.shown = str(ledger.path) if ledger.path is not None else shown
        self.on_lost = on_lost
        self.lost: LedgerLost | None = None

    async def check(self) -> LedgerLost | None:
        """Look once; returns the error if the ledger is lost (and acts on it)."""
        if self.lost is not None:
            return self.lost
        ledger = self.ledger
        change = None
        if ledger.path is not None and ledger.file_id is not None:
            change = file_change(ledger.path, ledger.file_id)
        if change is None and ledger.ledger_id is not None:
            # a file overwritten in place, or a database server's ledger dropped and recreated
            change = await identity_change(ledger)
        if change is None:
            return None
        self.lost = lost_error(ledger, change, shown=self.shown)
        log.error("%s", self.lost)
        ledger.lose(self.lost)
        await self.on_lost(self.lost)
        return self.lost

    async def run(self) -> None:
        """Look until the ledger is lost or the task is cancelled."""
        while True:
            await self.clock.sleep(self.interval)
            try:
                if await self.check() is not None:
                    return
            except asyncio.CancelledError:
                raise
            except Exception:  # the watchdog must not die of one bad look
                log.exception("ledger watchdog: the check failed")
