"""wait_settled on real files and a virtual clock: how long a post waits for a file being saved."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from digest_core.archive.files import StatKey, stat_key
from digest_core.archive.settling import Look, wait_settled
from digest_core.testing import ManualClock


def _look(path: Path) -> Look:
    """A look in the loop itself (one stat): time cannot jump while it runs."""

    async def look() -> tuple[Path, StatKey] | None:
        key = stat_key(path)
        return None if key is None else (path, key)

    return look


async def test_an_old_file_is_posted_at_once(tmp_path: Path) -> None:
    path = tmp_path / "2026-11-27.txt"
    path.write_text("issue", encoding="utf-8")
    os.utime(path, (0, 1_000_000))  # saved long ago
    clock = ManualClock()
    assert await wait_settled(_look(path), clock=clock, settle=10, max_wait=120) == 0.0
    assert clock.monotonic() == 0.0


async def test_a_file_that_keeps_changing_is_posted_after_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer that appends every 4 s never lets a 10 s settle pass: the post waits at
    most max_wait, then goes ahead with a warning naming the file."""
    path = tmp_path / "2026-11-27.txt"
    path.write_text("x", encoding="utf-8")
    clock = ManualClock()

    async def writer() -> None:
        for n in range(1, 1000):
            await clock.sleep(4.0)
            with path.open("a", encoding="utf-8") as f:
                f.write("x")
            os.utime(path, ns=(0, n))  # a new mtime each time, whatever the filesystem's tick

    async def settle() -> float:
        return await wait_settled(
            _look(path), clock=clock, settle=10, max_wait=60, wall=lambda: os.stat(path).st_mtime
        )

    caplog.set_level(logging.INFO, logger="digest_core.archive.settling")
    writing = asyncio.create_task(writer())
    try:
        waited = await settle()
    finally:
        writing.cancel()
    assert waited == pytest.approx(60.0)
    assert f"{path} is still changing after 60 s" in caplog.text
