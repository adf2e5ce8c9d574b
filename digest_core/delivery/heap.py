"""Keeping a large delivery's objects out of the garbage collector's full passes."""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)

#: deliveries under way in this process that froze the heap
_freezers = 0


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
    """
    global _freezers
    gc.freeze()
    _freezers += 1
    try:
        yield
    finally:
        _freezers -= 1
        if not _freezers:
            gc.unfreeze()


def refreeze() -> None:
    """Freeze what was built since, inside :func:`frozen_heap` (a no-op outside it)."""
    if _freezers:
        gc.freeze()
