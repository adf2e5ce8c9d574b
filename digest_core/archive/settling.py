"""Waiting for a file that is still being saved: posted only once it has stopped changing."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from digest_core.archive.files import StatKey
from digest_core.clock import Clock

log = logging.getLogger(__name__)

#: one look at a file: the path it is read from and its key (``None``: not there); it does
#: file I/O, so a caller in the event loop runs it in a worker thread
Look = Callable[[], Awaitable[tuple[Path, StatKey] | None]]


async def wait_settled(
    look: Look,
    *,
    clock: Clock,
    settle: float,
    max_wait: float,
    wall: Callable[[], float] = time.time,
) -> float:
    """Wait until the file ``look`` finds has not changed for ``settle`` seconds; the clock
    seconds waited (0.0 at once for a file changed longer ago, or none at all).

    A file changed less than ``settle`` seconds ago (its mtime against ``wall``, the clock the
    filesystem stamps files with) is looked at again, on ``clock``, until it has
    been unchanged for ``settle`` seconds: each change (path, device, inode, times or size)
    starts the wait anew. After ``max_wait`` seconds it is posted as it is then (WARNING). What
    is waited for is logged.
    """
    seen = await look()
    if seen is None or settle <= 0:
        return 0.0
    path, key = seen
    age = wall() - key[2] / 1e9  # its mtime (a writer moves it; a rename of a whole file not)
    if age >= settle:
        return 0.0
    start = clock.monotonic()
    quiet_since = start - max(0.0, age)
    log.warning(
        "%s was changed %.1f s ago (still being saved?): waiting until it is unchanged for "
        "%.0f s before posting it (at most %.0f s)",
        path,
        max(0.0, age),
        settle,
        max_wait,
    )
    changes = 0
    while True:
        now = clock.monotonic()
        wait = quiet_since + settle - now
        if wait <= 0:
            break
        left = start + max_wait - now
        if left <= 0:
            log.warning(
                "%s is still changing after %.0f s (%d change(s) seen): posting it as it is "
                "now (%d bytes)",
                path,
                now - start,
                changes,
                seen[1][4],
            )
            return now - start
        await clock.sleep(min(wait, left))
        again = await look()
        if again is None:
            log.warning("%s went away while it was being saved", path)
            return clock.monotonic() - start
        if again != seen:
            changes += 1
            log.info(
                "%s changed again (%d -> %d bytes): waiting %.0f s more",
                again[0],
                seen[1][4],
                again[1][4],
                settle,
            )
            seen = again
            quiet_since = clock.monotonic()
    waited = clock.monotonic() - start
    log.warning(
        "%s is unchanged for %.0f s now: posting it (%d bytes; waited %.1f s, %d change(s) "
        "seen meanwhile)",
        seen[0],
        settle,
        seen[1][4],
        waited,
        changes,
    )
    return waited
