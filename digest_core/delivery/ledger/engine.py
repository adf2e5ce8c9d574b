"""The SQLAlchemy engine factory, the file of an SQLite URL and its checks before opening, and
the one-line errors of a database that cannot be opened."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    event,
    make_url,
)
from sqlalchemy.exc import InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from digest_core.delivery.health import short_error
from digest_core.delivery.identity import (
    RUN_NEW_LEDGER,
)
from digest_core.delivery.ledger.schema import (
    CONFIG_KEY,
)
from digest_core.errors import ConfigError, LedgerError

__all__ = [
    "PG_SERVER_SETTINGS",
    "WAL_AUTOCHECKPOINT_PAGES",
    "WAL_LIMIT_BYTES",
    "create_engine",
    "generic_plans",
    "open_error",
    "open_existing_only",
    "set_aside_orphans",
    "sqlite_file",
    "unwritable_reason",
]

log = logging.getLogger(__name__)


#: PostgreSQL settings of every ledger connection. asyncpg prepares each statement once per
#: connection, and after five runs PostgreSQL may plan a prepared statement generically,
#: without its values: for planning's ``target IN (500 values)`` that is a scan of the whole
#: parts table per batch, so planning 10k subscribers took 25 s instead of 0.5 s
#: (benchmarks/scale.py). The ledger's statements are cheap to plan with their values.
#: (PostgreSQL 12 or newer.)
PG_SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan"}

#: an SQLite ledger's write-ahead log is checkpointed into the database once it holds this
#: many pages (SQLite's default is 1000, 4 MB at 4 KiB pages: on a 2 MB filesystem the log
#: filled the disk before its first checkpoint, with the database itself 4 KB)
WAL_AUTOCHECKPOINT_PAGES = 256
#: and cut back to at most this many bytes when it starts over (SQLite keeps the file at its
#: largest size otherwise: what a full disk's backlog grew it to stays taken)
WAL_LIMIT_BYTES = 1 << 20


@asynccontextmanager
async def generic_plans(conn: AsyncConnection, *, restore: bool = True) -> AsyncIterator[None]:
    """Within the block, PostgreSQL plans prepared statements generically, once (the ledger's
    connections force custom plans: see :data:`PG_SERVER_SETTINGS`). For statements that find
    rows by primary key or take arrays, and for the foreign-key check of each inserted row,
    planning anew per execution cost more than running them. Without ``restore`` the setting
    lasts to the end of the transaction. Nothing on other databases."""
    postgresql = conn.dialect.name == "postgresql"
    if postgresql:
        await conn.exec_driver_sql("SET LOCAL plan_cache_mode = auto")
    yield
    if postgresql and restore:
        await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")


def _server_settings(parsed: Any) -> dict[str, Any]:
    """asyncpg's ``connect`` arguments for the ledger (none for other drivers)."""
    if parsed.get_driver_name() != "asyncpg":
        return {}
    return {"server_settings": dict(PG_SERVER_SETTINGS)}


#: the URLs a ConfigError about the database URL shows
_EXAMPLE = "e.g. sqlite+aiosqlite:///var/digest-bot.db or postgresql+asyncpg://user@host/db"


def create_engine(url: str, *, echo: bool) -> AsyncEngine:
    """An async engine for ``url``; every way the URL itself can be wrong is a ConfigError
    naming ``database_url``, never showing the password."""
    example = _EXAMPLE
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ConfigError(
            f"not a database URL: {_redact(url)!r} ({example})", key=CONFIG_KEY
        ) from exc
    shown = parsed.render_as_string(hide_password=True)
    sqlite = parsed.get_backend_name() == "sqlite"
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    engine = _engine_for(parsed, shown, echo=echo, in_memory=sqlite and in_memory)
    if not sqlite:
        return engine
    # ?timeout=SECONDS in the URL sets how long a write waits for another's lock
    timeout = parsed.query.get("timeout", "5")
    try:
        busy_ms = int(float(timeout if isinstance(timeout, str) else timeout[-1]) * 1000)
    except ValueError:
        raise ConfigError(f"{shown}: timeout is not a number of seconds", key=CONFIG_KEY) from None
    if not in_memory:
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise open_error(exc, database, Path(database)) from exc
    _set_pragmas(engine, busy_ms)
    return engine


def _engine_for(parsed: Any, shown: str, *, echo: bool, in_memory: bool) -> AsyncEngine:
    """The engine of a parsed URL (an in-memory SQLite database: one shared connection);
    a driver that is unknown, synchronous or missing is a ConfigError."""
    example = _EXAMPLE
    sqlite = parsed.get_backend_name() == "sqlite"
    try:
        if in_memory:
            # one shared connection, or every connection would see its own empty database
            engine = create_async_engine(
                parsed, echo=echo, poolclass=StaticPool, pool_reset_on_return=None
            )
            _roll_back_open_transactions(engine)
        elif sqlite:
            engine = create_async_engine(parsed, echo=echo, pool_reset_on_return=None)
            _roll_back_open_transactions(engine)
        else:
            engine = create_async_engine(
                parsed, echo=echo, pool_pre_ping=True, connect_args=_server_settings(parsed)
            )
    except NoSuchModuleError as exc:
        raise ConfigError(
            f"{shown}: unknown database kind or driver {parsed.drivername!r} ({example})",
            key=CONFIG_KEY,
        ) from exc
    except InvalidRequestError as exc:  # a synchronous driver
        hint = "sqlite+aiosqlite" if sqlite else f"{parsed.get_backend_name()}+<async driver>"
        raise ConfigError(
            f"{shown}: driver {parsed.get_driver_name()!r} is not async; use {hint}:// ({example})",
            key=CONFIG_KEY,
        ) from exc
    except ImportError as exc:
        extra = (
            " (pip install 'digest-bot[postgres]')"
            if parsed.get_backend_name() == ("postgresql")
            else ""
        )
        raise ConfigError(
            f"{shown}: the database driver is not installed: {exc.name or exc}{extra}",
            key=CONFIG_KEY,
        ) from exc
    except Exception as exc:  # bad query arguments and the like
        raise ConfigError(f"{shown}: {type(exc).__name__}: {exc}", key=CONFIG_KEY) from exc
    return engine


def _roll_back_open_transactions(engine: AsyncEngine) -> None:
    """The pool's reset of a connection checked in: a rollback only if a transaction is open.

    SQLAlchemy rolls back every connection checked in (``reset_on_return``), committed or
    not; on SQLite that rollback does nothing when no transaction is open (sqlite3 looks
    first), but through aiosqlite it is still a trip to the connection's thread and back:
    one of each transaction's five, every part sent twice (its claim, its record). The
    engine is made with ``pool_reset_on_return=None`` and this reset in its place."""

    @event.listens_for(engine.sync_engine, "reset")
    def _reset(dbapi_connection: Any, _record: Any, reset_state: Any) -> None:
        if not reset_state.asyncio_safe or reset_state.transaction_was_reset:
            return  # (as SQLAlchemy's own reset: nothing may run now, or nothing is open)
        try:
            is_open = bool(dbapi_connection.driver_connection.in_transaction)
        except Exception:  # no such attribute, a closed connection: roll back to be sure
            is_open = True
        if is_open:
            dbapi_connection.rollback()


def _set_pragmas(engine: AsyncEngine, busy_ms: int) -> None:
    """Set an SQLite engine's pragmas on every connection it opens."""

    @event.listens_for(engine.sync_engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        # https://www.sqlite.org/wal.html: readers never block the writer; with WAL,
        # synchronous=NORMAL loses no commit when the process dies, only on power loss.
        _wal(cursor, busy_ms)
        cursor.execute("PRAGMA synchronous=NORMAL")
        # a bounded log: checkpointed often enough, and truncated when it is reset
        cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        cursor.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def open_existing_only(engine: AsyncEngine, database: Path) -> None:
    """From now on, a connection the engine opens to the SQLite file ``database`` finds it
    or fails (SQLite's ``mode=rw``, SQLITE_CANTOPEN: trouble, waited out) instead of
    creating it. Called once the ledger is open: a connection the pool opened after the file
    was deleted, before the watchdog noticed or while the bot stopped, left a new, empty
    database in its place, and the next start refused that as "a new, empty database"
    instead of saying the ledger was missing (a fresh-clone test run saw it)."""
    uri = database.resolve().as_uri() + "?mode=rw"

    @event.listens_for(engine.sync_engine, "do_connect")
    def _existing(_dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
        cargs[:1] = [uri]
        cparams["uri"] = True


def _wal(cursor: Any, busy_ms: int) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while another connection holds the file: on a
    new database several openers switch it at once, and SQLite answers a switch that would
    deadlock with a reader "database is locked" at once, without its busy handler (several
    processes started together failed to open a new ledger so, about one start in seven).
    The pauses are short (a start-up race only) and bounded by the busy timeout."""
    waited, pause = 0.0, 0.002
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except Exception as exc:  # the driver's OperationalError, whichever adapter
            if "locked" not in str(exc) or waited * 1000 >= busy_ms:
                raise
        time.sleep(pause)
        waited += pause
        pause = min(pause * 2, 0.02)


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite URL (None for other databases and in-memory SQLite)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):  # a URI filename: file:path?mode=…
        if parsed.query.get("uri") in (None, "false") or database.startswith("file::memory:"):
            return None
        database = database.removeprefix("file:").split("?", 1)[0]
    return Path(database)


def set_aside_orphans(database: Path, now: dt.datetime) -> None:
    """Rename the ``-wal`` and ``-shm`` files a deleted database left behind: SQLite would
    replay that old log into the new, empty file."""
    for suffix in ("-wal", "-shm"):
        orphan = database.with_name(database.name + suffix)
        if orphan.exists():
            aside = orphan.with_name(f"{orphan.name}.orphaned-{now:%Y%m%dT%H%M%S}")
            try:
                orphan.rename(aside)
            except OSError as exc:
                log.warning("could not set aside %s: %s", orphan, exc)
            else:
                log.warning("%s has no database; moved it to %s", orphan, aside)


def unwritable_reason(database: Path) -> str | None:
    """Why SQLite could not write ``database`` and its ``-wal`` beside it, or None. Asks the
    kernel (``access``), which also refuses root an immutable file or a read-only mount."""
    folder = database.parent
    if database.is_dir():
        return f"{database} is a folder, not a file"
    if folder.is_dir() and not os.access(folder, os.W_OK):
        return f"the folder {folder} is read-only"
    if database.is_file() and not os.access(database, os.W_OK):
        return f"{database} is read-only"
    return None


def open_error(
    exc: BaseException | None, shown: str, database: Path | None, *, reason: str = ""
) -> LedgerError:
    """One line for a database that cannot be opened: what is wrong with which file, and the
    fix (restore a backup, make it writable, wait for the lock)."""
    reason = reason or (short_error(exc) if exc is not None else "unknown error")
    if isinstance(exc, OSError) and exc.strerror:
        reason = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if database is not None:
        for folder in database.parents:
            if folder.exists() and not folder.is_dir():
                reason = f"{folder} is a file, not a folder"
                break
        if database.is_dir():
            reason = f"{database} is a folder, not a file"
    low = reason.lower()
    where = f"ledger {shown} ({CONFIG_KEY})"
    restore = (
        f"restore it from a backup (copy the backup to {shown}, removing any {shown}-wal "
        f"and {shown}-shm), or move it aside and run `{RUN_NEW_LEDGER}` to begin an empty "
        "ledger"
    )
    if "not a database" in low or "malformed" in low or "damaged" in low or "corrupt" in low:
        text = f"{where} is damaged or truncated ({reason}); {restore}"
    elif "locked" in low or "busy" in low:
        text = (
            f"{where} is locked by another program ({reason}); start again once it has "
            "finished, or stop it"
        )
    elif database is not None:
        text = (
            f"{where} cannot be opened for writing ({reason}); make {shown} and its folder "
            f"writable by this user (SQLite also writes {database.name}-wal and "
            f"{database.name}-shm beside it), or set {CONFIG_KEY} to another file"
        )
    else:
        text = (
            f"{where} cannot be used ({reason}); check that the database server is running "
            f"and that {CONFIG_KEY} is right"
        )
    return LedgerError(text, where=shown)


def _redact(url: str) -> str:
    """``url`` with anything between ``user:`` and ``@`` hidden (it may not even parse)."""
    return re.sub(r"(://[^/@:]*:)[^@]*@", r"\1***@", url)
