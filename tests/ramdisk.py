"""The test run's temporary files in RAM: ``TMPDIR`` on /dev/shm unless it is set already.

Every test's ``tmp_path``, the PostgreSQL servers' clusters (tests/pg.py: a
``CREATE DATABASE`` copies template0's files for each test, a ``DROP`` deletes them) and the
SQLite ledgers' write-ahead logs were written to this machine's disk: a third of the delivery
tests' CPU time was the kernel's (27 s of 52 s for test_ledger.py and test_fanout.py, 7 s on a
tmpfs). The controller moves the run's temporary folder before pytest picks its base folder
(xdist's workers, and every process a test starts, inherit the variable). Where ``TMPDIR`` is
set, or /dev/shm is missing, small or not writable, nothing changes.
"""

from __future__ import annotations

import os
import shutil
import tempfile

RAM = "/dev/shm"
#: what the suite may hold at once (a virtualenv, PostgreSQL clusters, ledgers), with room
NEEDED_BYTES = 4 << 30


def use_ram_for_temporary_files() -> None:
    """Point ``TMPDIR`` (and :mod:`tempfile`) at /dev/shm, where that is possible."""
    if os.environ.get("TMPDIR") or not os.path.isdir(RAM) or not os.access(RAM, os.W_OK):
        return
    if shutil.disk_usage(RAM).free < NEEDED_BYTES:
        return
    os.environ["TMPDIR"] = RAM
    tempfile.tempdir = None  # (computed again from the variable at next use)
