"""A small filesystem of the tests' own, to fill for real (a tmpfs: needs root)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(folder: Path, megabytes: int) -> Iterator[Path]:
    """``folder`` (created) as a tmpfs of ``megabytes`` MiB while the block runs; the test is
    skipped where it cannot be mounted (not root)."""
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)],
        capture_output=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)
