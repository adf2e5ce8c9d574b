"""Fields that every log record made inside a block carries (a delivery's id, its platform).

The core marks what it is doing with :func:`log_fields`; the process's log formatter (the bots
side) reads :func:`current_fields` for each record. Tasks created inside the block inherit the
fields (asyncio copies the context), and they end with the block.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType

log = logging.getLogger(__name__)

_EMPTY: Mapping[str, object] = MappingProxyType({})
_fields: ContextVar[Mapping[str, object]] = ContextVar("digest_log_fields", default=_EMPTY)


@contextlib.contextmanager
def log_fields(**fields: object) -> Iterator[None]:
    """Add ``fields`` (JSON-able scalars) to the records logged inside the block."""
    token = _fields.set(MappingProxyType({**_fields.get(), **fields}))
    try:
        yield
    finally:
        _fields.reset(token)


def current_fields() -> Mapping[str, object]:
    """The fields of the block being run (empty outside any)."""
    return _fields.get()
