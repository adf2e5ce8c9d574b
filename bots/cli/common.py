"""What every `digest-bot` command shares: exit statuses, the date argument, running a
coroutine, the version (apart from :mod:`bots.cli`, so that commands import these and not the
parser)."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Coroutine
from typing import Any, TypeVar

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_T = TypeVar("_T")


def version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("digest-bot")
    except PackageNotFoundError:
        from digest_core import __version__

        return __version__


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
