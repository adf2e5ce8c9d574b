"""Readers first: the archive's background work (bringing the search index up to date after a
start) steps aside while a reader is being served.

Python runs one thread at a time. A background thread that stat's ten years of files and
reads the index's table of them holds the interpreter for most of a quarter of a second
after a start, and a reader's ``/today`` sent meanwhile gets about half of it: the first
command after a restart took four times as long with 3,650 files as with 5. The background
work calls :meth:`ReaderFirst.step` between small steps (a few dozen files); while any reader
is being served (:meth:`ReaderFirst.serving`) it waits there, at most :data:`MAX_WAIT` seconds
at a time, so a steady stream of readers slows it but never stops it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

#: the longest one step of background work waits for readers to be served
MAX_WAIT = 0.05
#: how many files background work handles between two steps
STEP_FILES = 32


class ReaderFirst:
    """Readers being served now, and the background threads that step aside for them."""

    def __init__(self) -> None:
        self._served = 0
        self._idle = threading.Condition(threading.Lock())
        self._background = threading.local()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """A reader's call is in progress (nests; any thread)."""
        with self._idle:
            self._served += 1
        try:
            yield
        finally:
            with self._idle:
                self._served -= 1
                if not self._served:
                    self._idle.notify_all()

    @contextlib.contextmanager
    def background(self) -> Iterator[None]:
        """The calling thread does background work: its :meth:`step` calls step aside.
        Elsewhere (a reader's own call, a one-shot CLI building the index) they return at once."""
        self._background.on = True
        try:
            yield
        finally:
            self._background.on = False

    def step(self) -> None:
        """Between two steps of background work: wait while readers are being served (at most
        :data:`MAX_WAIT`); at once in any other thread, or when no reader is."""
        if not getattr(self._background, "on", False):
            return
        with self._idle:
            if self._served:
                self._idle.wait_for(lambda: not self._served, timeout=MAX_WAIT)

    @property
    def readers(self) -> int:
        """Readers being served now."""
        return self._served
