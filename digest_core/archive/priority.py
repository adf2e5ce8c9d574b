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
from collections.abc import Iterable, Iterator
from typing import TypeVar

_T = TypeVar("_T")

#: the longest one step of background work waits for readers to be served
MAX_WAIT = 0.05
#: how many files background work handles between two steps
STEP_FILES = 32


class ReaderFirst:
    """Readers being served now, and the background threads that step aside for them.

    ``with gate.serving():`` marks a reader's call (nests; any thread). Cheap on purpose (a
    lock and a counter; the idle event changes only when the count leaves or reaches 0):
    every command passes through it.
    """

    def __init__(self) -> None:
        self._served = 0
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._background = threading.local()

    def serving(self) -> ReaderFirst:
        """A reader's call is in progress while the returned context is entered."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            self._served += 1
            if self._served == 1:
                self._idle.clear()

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._served -= 1
            if not self._served:
                self._idle.set()

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
        if self._served and getattr(self._background, "on", False):
            self._idle.wait(MAX_WAIT)

    def paced(self, items: Iterable[_T]) -> Iterator[_T]:
        """``items``, with a :meth:`step` before every :data:`STEP_FILES`-th: a loop of
        background work over files steps aside for readers this way."""
        for n, item in enumerate(items):
            if n % STEP_FILES == 0:
                self.step()
            yield item

    @property
    def readers(self) -> int:
        """Readers being served now."""
        return self._served
