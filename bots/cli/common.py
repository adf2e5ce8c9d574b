"""What every `digest-bot` command shares: exit statuses, the date argument, running a
coroutine, the version (:func:`bots.version`; apart from :mod:`bots.cli`, so that commands
import these and not the parser)."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Coroutine
from typing import Any, TypeVar

from bots import version as version

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_T = TypeVar("_T")


def parse_date(text: str) -> dt.date:
    """An argument ``YYYY-MM-DD``."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run``, imported only by the commands that run the bot."""
    import asyncio

    return asyncio.run(coro)
