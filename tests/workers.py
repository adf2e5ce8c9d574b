"""What an xdist worker of this suite does differently from a plain Python process.

- **Fewer full garbage-collector passes.** A worker holds everything the suite imported (the
  bot, five platforms' libraries, Hypothesis, a browser driver): a full pass walks it all,
  0.3-0.8 s each on a 2-core machine, and with Python's thresholds (700, 10, 10) a worker ran
  10-17 of them (6-10 s of its time, gc.callbacks). A full pass waits for
  :data:`THRESHOLDS`'s 100 middle-generation passes instead of 10: 2-3 a worker. Garbage
  cycles are still collected, later; a worker's peak memory stayed under 0.6 GB. A delivery
  run in the worker sets its own thresholds and puts these back (``digest_core.heap``).
- **No last full pass of pytest's own.** pytest's unraisable-exception plugin runs a full
  pass at its ``pytest_unconfigure`` to find ``__del__`` errors of garbage cycles left at
  the end: 0.3-1.2 s a worker (measured December 2026), the last worker's on the
  controller's path. A worker skips it (:func:`tune`): it ends without finalizing, so what
  that pass could free it leaves alone anyway, and an unraisable error during a test is
  still reported with that test. (The plugin's own stash key for the number of passes,
  which pytest's ``pytester`` sets the same way.)
- **No interpreter finalization at the end.** A worker's results have gone to the controller
  once its session has finished (xdist's ``workerfinished``); then xdist kept every worker
  alive until the last one finished, and all of them freed their objects at once, 2-5 s the
  controller waited for. :func:`exit_once_unconfigured` runs the process's ``atexit``
  handlers (the fork servers stop there, :mod:`tests.forkserver`), flushes the output and
  ends the process.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys

import pytest
from _pytest.unraisableexception import gc_collect_iterations_key

#: the garbage collector's thresholds in a worker (Python's are 700, 10, 10)
THRESHOLDS = (700, 10, 100)


def tune(config: pytest.Config) -> None:
    """Called in each worker's ``pytest_configure``."""
    gc.set_threshold(*THRESHOLDS)
    config.stash[gc_collect_iterations_key] = 0


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """In a worker, after every other plugin's ``pytest_unconfigure``: end the process."""
    if hasattr(config, "workerinput"):
        exit_once_unconfigured()


def exit_once_unconfigured() -> None:
    """Run the ``atexit`` handlers, flush, and end the process without finalizing it."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    os._exit(0)
