"""Processes whose clock is off: libfaketime preloaded, for the clock-skew tests."""

from __future__ import annotations

import glob

import pytest

#: where Debian's libfaketime package puts the library (``apt-get install faketime``)
_LIBRARIES = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)


def skewed_env(offset: str) -> dict[str, str]:
    """Environment variables that run a program with its clock ``offset`` off (``"+120s"``,
    ``"-120s"``; ``""``: the real clock, none). What the process reads as the time changes,
    SQLite's ``CURRENT_TIMESTAMP`` and ``julianday('now')`` included. The library is preloaded
    into the program itself (the ``faketime`` command would run it as its child, so a test
    could not SIGKILL it by the pid it started).

    Skips the test when libfaketime is not installed (``apt-get install faketime``; .ci/run
    installs it).
    """
    if not offset:
        return {}
    found = sorted(f for pattern in _LIBRARIES for f in glob.glob(pattern))
    if not found:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    return {"LD_PRELOAD": found[0], "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
