"""Logging set-up: human lines stamped in the digest's zone, or JSON lines; quiet libraries.

``digest-bot`` calls :func:`setup_logging` once, before any command runs. Both formats stamp
each record with the time in the digest's zone *and* its UTC offset, so a log line and the
schedule ("08:00 Asia/Shanghai") speak the same time whatever the host's zone. Records made
inside a delivery carry its id, platform and issue date (:mod:`digest_core.logcontext`):
JSON lines as fields, human lines as a ``[delivery=… platform=…]`` suffix.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TextIO

from digest_core.logcontext import current_fields

log = logging.getLogger(__name__)

FORMATS = ("human", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

#: Libraries whose DEBUG output drowns ours (every SQL statement, every HTTP request, every
#: gateway frame): at ``--log-level debug`` they stay at INFO unless ``--debug-libs``.
LIBRARY_LOGGERS = (
    "aiosqlite",
    "asyncpg",
    "sqlalchemy",
    "httpx",
    "httpcore",
    "hpack",
    "telegram",
    "discord",
    "aiohttp",
    "websockets",
    "tornado",
    "apscheduler",
    "asyncio",
)

#: library loggers that chatter at INFO about routine work: kept at WARNING unless the level is
#: DEBUG (APScheduler logs two lines per job run, and the bot's minute jobs made eight a
#: minute in an idle console)
QUIET_LOGGERS = ("apscheduler.executors",)

#: each library logger's level before the first set-up (restored by a later one)
_LIBRARY_LEVELS: dict[str, int] = {}

#: the standard attributes of a LogRecord; anything else was passed as ``extra=``
_RECORD_KEYS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


#: where formatted records go instead of the handler's stream (the console chat), if set
_terminal: Callable[[str], None] | None = None

#: the libraries' levels before :func:`quiet_libraries` raised them
_quieted: dict[str, int] = {}

#: the libraries' records at INFO are shown only when the level was asked for
#: (``--log-level info``); set by :func:`setup_logging`
_level_asked = False


class _Handler(logging.StreamHandler[TextIO]):
    """Our root handler (so a second set-up, as in tests, replaces it instead of adding one)."""

    def emit(self, record: logging.LogRecord) -> None:
        write = _terminal
        if write is None:
            super().emit(record)
            return
        try:
            write(self.format(record))
        except Exception:
            self.handleError(record)


def route_to_terminal(write: Callable[[str], None] | None) -> None:
    """Hand each formatted record of our handler to ``write`` instead of its stream (the
    console, which prints it above its prompt), or, with None, to the stream again (and the
    libraries' levels back: :func:`quiet_libraries`)."""
    global _terminal
    _terminal = write
    if write is None:
        quiet_libraries(False)


def quiet_libraries(quiet: bool = True) -> None:
    """Keep the libraries' INFO records (APScheduler's "Scheduler started" and "Added job"
    lines, one per job) out of a chat on the terminal: at WARNING, unless the level was asked
    for on the command line (``--log-level info``) or is DEBUG. ``quiet=False`` undoes it."""
    if not quiet:  # each level as it was before (SQLAlchemy sets its own on import)
        for name, level in _quieted.items():
            logging.getLogger(name).setLevel(level)
        _quieted.clear()
        return
    if _level_asked or logging.getLogger().level <= logging.DEBUG:
        return
    for name in LIBRARY_LOGGERS:
        lib = logging.getLogger(name)
        _quieted.setdefault(name, lib.level)
        lib.setLevel(max(lib.level, logging.WARNING))


def zoned_time(record: logging.LogRecord, zone: dt.tzinfo) -> dt.datetime:
    """The record's creation time, aware, in ``zone``."""
    return dt.datetime.fromtimestamp(record.created, tz=zone)


class HumanFormatter(logging.Formatter):
    """``2026-12-01 08:00:00.123 +08:00 INFO bots.runtime: message [delivery=3 …]``."""

    def __init__(self, zone: dt.tzinfo) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.zone = zone

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        at = zoned_time(record, self.zone)
        stamp = at.isoformat(sep=" ", timespec="milliseconds")
        return f"{stamp[:23]} {stamp[23:]}"  # the offset apart: "… 08:00:00.123 +08:00"

    def format(self, record: logging.LogRecord) -> str:
        text = f"{self.formatTime(record)} {super().format(record)}"
        fields = current_fields()
        if fields:
            suffix = " ".join(f"{k}={v}" for k, v in fields.items())
            first, nl, rest = text.partition("\n")  # after the message, before a traceback
            text = f"{first} [{suffix}]{nl}{rest}"
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (ISO 8601 in the digest's zone, with its offset),
    ``level``, ``logger``, ``msg``, the block's fields (``delivery_id``, ``platform``,
    ``issue_date``), any ``extra=`` values, and ``exc`` (the traceback) when there is one."""

    def __init__(self, zone: dt.tzinfo) -> None:
        super().__init__()
        self.zone = zone

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": zoned_time(record, self.zone).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(current_fields())
        for key, value in vars(record).items():
            if key not in _RECORD_KEYS and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, ensure_ascii=False, default=str)


def setup_logging(
    level: str,
    *,
    fmt: str = "human",
    zone: dt.tzinfo = dt.UTC,
    debug_libs: bool = False,
    stream: TextIO | None = None,
    asked: bool = False,
) -> None:
    """Send every record of ``level`` and above to ``stream`` (default stderr) as ``fmt``.

    At DEBUG the :data:`LIBRARY_LOGGERS` stay at INFO unless ``debug_libs``. ``asked``: the
    level was given on the command line (the console chat then shows the libraries' INFO
    records too: :func:`route_to_terminal`). Calling it again replaces what an earlier call
    set up (other handlers, such as pytest's, are kept).

    Raises:
        ValueError: an unknown ``level`` or ``fmt``.
    """
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"log level: expected one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    global _level_asked
    _level_asked = asked
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.setFormatter(HumanFormatter(zone) if fmt == "human" else JsonFormatter(zone))
    root.addHandler(handler)
    root.setLevel(level)
    for name in LIBRARY_LOGGERS + QUIET_LOGGERS:
        lib = logging.getLogger(name)
        # a library's own level (SQLAlchemy sets WARNING on import) is kept, but at most INFO
        # at DEBUG; --debug-libs lets everything through
        own = _LIBRARY_LEVELS.setdefault(name, lib.level)
        if debug_libs:
            lib.setLevel(logging.NOTSET)
        elif level == "DEBUG":
            # SQLAlchemy logs each statement at INFO: it stays at its own WARNING
            lib.setLevel(max(own, logging.WARNING if name == "sqlalchemy" else logging.INFO))
        elif name in QUIET_LOGGERS:
            lib.setLevel(max(own, logging.WARNING))
        else:
            lib.setLevel(own)
