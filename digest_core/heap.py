"""The process's objects that live long, kept out of the garbage collector's full passes: a
large delivery's while it runs (:func:`frozen_heap`), and what a long-running process's start
built (:func:`freeze_start_up`, :func:`start_up_frozen`)."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator

#: deliveries under way in this process that froze the heap
_freezers = 0
#: the youngest generation's threshold while one runs (see :func:`frozen_heap`)
YOUNG_THRESHOLD = 20_000
#: the collector's thresholds before the first of them began
_thresholds: tuple[int, int, int] | None = None
#: whether the heap was frozen before the first of them began (then they leave it as it is)
_frozen_before = False
#: the process whose start-up :func:`freeze_start_up` froze, until a delivery gives it back
_start_up: int | None = None
#: the process that found its heap frozen by another (a forking parent): nothing here ever
#: gives that back, so it is asked once
_inherited: int | None = None
#: the process that froze its heap for the children it forks (:func:`freeze_for_children`)
_parent: int | None = None


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """While a delivery runs, keep the objects it builds out of the collector's full passes.

    A full pass walks every tracked object; a delivery to 100k targets holds about ten per
    target (targets, planned rows, runs, reports), and building them set off a full pass
    again and again, each 0.2-1.5 s with the event loop stalled (benchmarks/scale.py).
    ``gc.freeze`` (called here and by :func:`refreeze` as they are built) moves what is alive
    to the permanent generation, which passes skip; moving is cheap (lists are spliced).
    The last delivery to finish gives them back (``gc.unfreeze``) after dropping what it
    no longer needs, so garbage cycles among them are still collected afterwards.

    Meanwhile the youngest generation is collected after :data:`YOUNG_THRESHOLD`
    allocations instead of Python's 700 (the thresholds are put back by the last delivery):
    a send's objects (its task, futures, the ledger's ops) live until its batch is
    committed, hundreds of sends later, so each young pass found them alive and collected
    nothing (at 100k subscribers, 5,400 passes, about 6% of the delivery's CPU). What a
    delivery builds is frozen by :func:`refreeze` every 500 targets or sends, before the
    count gets there; a garbage cycle made meanwhile is frozen with it and collected after
    the last delivery's end, as one made just before a freeze always was.

    A heap that was already frozen when the first delivery began (by the process that forked
    this one, to share its pages with its children, as a pre-forking server does) is left as
    it was: deliveries neither add to it nor give it back, since ``gc.unfreeze`` would give
    back everything and each full pass after it would walk, and copy, the parent's pages
    too. Their full passes still skip what was frozen.
    """
    global _freezers, _thresholds, _frozen_before, _start_up
    if not _freezers:
        _frozen_before = _frozen_by_another()
        _thresholds = gc.get_threshold()
        gc.set_threshold(max(_thresholds[0], YOUNG_THRESHOLD), *_thresholds[1:])
    if not _frozen_before:
        gc.freeze()
    _freezers += 1
    try:
        yield
    finally:
        _freezers -= 1
        if not _freezers:
            if _thresholds is not None:
                gc.set_threshold(*_thresholds)
                _thresholds = None
            if not _frozen_before:
                gc.unfreeze()
                _start_up = None


def _frozen_by_another() -> bool:
    """Whether the heap is frozen, and not by this process's start-up (:func:`freeze_start_up`,
    the deliveries' to give back). The collector's answer walks the permanent generation:
    free where nothing is frozen, about 50 ms in a process forked from the suite's fork
    server, 80 ms in a test worker whose whole heap was frozen (December 2026); so it is
    asked only while nothing is known, and a parent's freeze is remembered."""
    global _inherited
    pid = os.getpid()
    if _start_up == pid:
        return False
    if _inherited == pid or _parent not in (None, pid):
        return True
    if gc.get_freeze_count() > 0:
        _inherited = pid
        return True
    return False


def freeze_for_children() -> None:
    """Freeze the heap before forking children that are to share its pages (a pre-forking
    host; the test suite's fork server): a full pass in a child then neither walks nor
    copies them. A child's deliveries leave that freeze as it is (see :func:`frozen_heap`),
    and know it without asking the collector (about 50 ms a child, December 2026)."""
    global _parent
    gc.freeze()
    _parent = os.getpid()


def freeze_start_up() -> None:
    """What is alive now lives as long as the process (its modules, settings, services, the
    archive's listing): freeze it out of full passes. The first delivery to run afterwards
    treats this freeze as its own: it freezes what it builds too and gives everything back
    at its end (a full pass then walks it again, until the next start-up freeze).

    A heap already frozen by another process (a forking parent, sharing its pages with this
    one) is not this process's to give back: what is alive is added to it, and deliveries
    leave it all as it is. (Finding that out walks the frozen objects once: free where
    nothing is frozen.)
    """
    global _start_up
    if not _freezers and not _frozen_by_another():
        _start_up = os.getpid()
    gc.freeze()


@contextlib.contextmanager
def start_up_frozen() -> Iterator[None]:
    """:func:`freeze_start_up` before the block (``digest-bot run``, once started) and after
    it: what is left at its end goes with the process, and frozen, the interpreter's last
    collections skip it (SIGTERM to exit on the console: 110 ms with it given back by a
    delivery, 17 ms frozen; December 2026). In a process that goes on (a test's), the next
    delivery gives it back, as after a start."""
    freeze_start_up()
    try:
        yield
    finally:
        freeze_start_up()


def refreeze() -> None:
    """Freeze what was built since, inside a :func:`frozen_heap` that froze the heap (a
    no-op otherwise)."""
    if _freezers and not _frozen_before:
        gc.freeze()
