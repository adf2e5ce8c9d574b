"""Ledger health: whether the database answers, since when it has not; retrying until it does."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from digest_core.clock import Clock
from digest_core.errors import LedgerLost

log = logging.getLogger(__name__)

T = TypeVar("T")


#: SQLSTATE classes (the first two characters) of a server that does not answer now but may
#: later: 08 connection exception (refused, lost, failed), 53 insufficient resources (disk
#: full, out of memory, too many connections), 58 system error (I/O)
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "53", "58"})
#: and single SQLSTATEs: 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
#: (starting up, shutting down, in recovery), 57P05 idle_session_timeout, 40001
#: serialization_failure and 40P01 deadlock_detected (the transaction may simply run again),
#: 55P03 lock_not_available, 25006 read_only_sql_transaction (a standby until a failover ends)
TRANSIENT_SQLSTATES = frozenset(
    {"57P01", "57P02", "57P03", "57P05", "40001", "40P01", "55P03", "25006"}
)
#: SQLite's primary result codes of a database that may answer later (``sqlite_errorcode``):
#: BUSY, LOCKED, NOMEM, IOERR, FULL, CANTOPEN, PROTOCOL
_TRANSIENT_SQLITE_CODES = frozenset({5, 6, 7, 10, 13, 14, 15})


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE a driver gave ``exc`` (asyncpg's ``sqlstate``, psycopg's ``sqlstate``,
    psycopg2's ``pgcode``), looked for on the error, the driver's error it wraps and what
    that was raised from; None when there is none (SQLite, a refused socket)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop(0)
        if err is None or any(err is s for s in seen) or len(seen) > 8:
            continue
        seen.append(err)
        for name in ("sqlstate", "pgcode"):
            code = getattr(err, name, None)
            if isinstance(code, str) and len(code) == 5:
                return code
        todo += [getattr(err, "orig", None), err.__cause__, err.__context__]
    return None


def is_transient(exc: BaseException) -> bool:
    """True for the errors of a database that does not answer now but may later: locked or
    busy, disk full, I/O errors, a lost or refused connection, a server shutting down,
    starting up or in recovery. Errors of the SQL itself (integrity, programming) and a
    corrupt file are not.

    A server's error is judged by its SQLSTATE where the driver gives one (asyncpg raises
    "the database system is shutting down", 57P03, as a plain ``DBAPIError``); SQLite's by
    its result code; otherwise by the DBAPI class (``OperationalError``, ``InterfaceError``)
    or an invalidated connection. A socket error or timeout (no driver error at all) is."""
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        code = sqlstate(exc)
        if code is not None:
            return code[:2] in TRANSIENT_SQLSTATE_CLASSES or code in TRANSIENT_SQLSTATES
        sqlite_code = getattr(exc.orig, "sqlite_errorcode", None)
        if isinstance(sqlite_code, int) and sqlite_code & 0xFF in _TRANSIENT_SQLITE_CODES:
            return True
        if isinstance(exc, OperationalError | InterfaceError):
            return True
        # a driver error raised while connecting, with no code of its own (a reset socket)
        cause = exc.orig.__cause__ if exc.orig is not None else None
        return isinstance(cause, OSError | TimeoutError)
    return isinstance(exc, OSError | TimeoutError)


def short_error(exc: BaseException) -> str:
    """The driver's own words (``database is locked``), without SQL or parameters."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return str(exc.orig).splitlines()[0] or type(exc.orig).__name__
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff between attempts at a ledger transaction. The cap is short:
    a delivery resumes within ``cap`` seconds (plus SQLite's busy timeout) of the fault
    clearing, and a waiting writer costs one attempt per ``cap`` seconds."""

    base: float = 0.25
    cap: float = 4.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (from 1)."""
        return float(min(self.cap, self.base * 2 ** min(failures - 1, 30)))


@dataclass(frozen=True)
class Trouble:
    """The ledger has not answered since ``since`` (aware UTC); ``error`` is the latest."""

    since: dt.datetime
    error: str
    failures: int
    #: who saw it (``host:pid``): the running bot, for ``digest-bot status`` in another process
    reporter: str = ""

    def describe(self, zone: dt.tzinfo) -> str:
        return f"ledger trouble since {self.since.astimezone(zone):%H:%M} ({self.error})"


#: ``listener(trouble, cleared_at)``: called once when trouble starts (``cleared_at`` None) and
#: once when it ends; it MUST NOT raise or block (start a task for slow work).
HealthListener = Callable[[Trouble, dt.datetime | None], None]


class LedgerHealth:
    """Whether the ledger answers, kept by the ledger's retries and read by status and alerts.

    ``trouble`` is set by the first failure of a retried transaction and cleared by the next
    success; listeners hear of each change once. ``lost`` is set for good when the database
    was deleted or replaced (:mod:`digest_core.delivery.watchdog`): retries then stop.
    With a ``file``, the trouble is also written there (JSON) while it lasts, so that
    ``digest-bot status`` in another process can show it without the ledger.
    """

    def __init__(self, clock: Clock, *, file: Path | None = None) -> None:
        self._clock = clock
        self.file = file
        self.trouble: Trouble | None = None
        self.lost: LedgerLost | None = None
        #: failed attempts since start, by error kind (the exception's class name): metrics
        self.failures: dict[str, int] = {}
        self._listeners: list[HealthListener] = []

    def subscribe(self, listener: HealthListener) -> None:
        self._listeners.append(listener)

    def failed(self, exc: BaseException) -> Trouble:
        """Record a failed attempt; the first of a series starts the trouble."""
        previous = self.trouble
        kind = type(exc).__name__
        self.failures[kind] = self.failures.get(kind, 0) + 1
        self.trouble = Trouble(
            since=previous.since if previous else self._clock.now(),
            error=short_error(exc),
            failures=(previous.failures if previous else 0) + 1,
            reporter=f"{socket.gethostname()}:{os.getpid()}",
        )
        self._publish()
        if previous is None:
            log.error("ledger trouble: %s", self.trouble.error)
            self._tell(self.trouble, None)
        return self.trouble

    def answered(self) -> None:
        """Record a successful transaction: the trouble, if any, is over."""
        trouble, self.trouble = self.trouble, None
        if trouble is None:
            return
        now = self._clock.now()
        log.warning(
            "ledger answers again after %.0f s (%d failed attempts)",
            (now - trouble.since).total_seconds(),
            trouble.failures,
        )
        self._publish()
        self._tell(trouble, now)

    def lose(self, error: LedgerLost) -> None:
        """The database is gone for good (deleted or replaced): every retry stops with ``error``."""
        self.lost = error

    def _tell(self, trouble: Trouble, cleared_at: dt.datetime | None) -> None:
        for listener in self._listeners:
            try:
                listener(trouble, cleared_at)
            except Exception:  # a listener must never break the ledger
                log.exception("ledger health listener failed")

    def _publish(self) -> None:
        if self.file is None:
            return
        try:
            if self.trouble is None:
                self.file.unlink(missing_ok=True)
                return
            t = self.trouble
            data = {
                "since": t.since.isoformat(),
                "error": t.error,
                "failures": t.failures,
                "reporter": t.reporter,
            }
            tmp = self.file.with_name(self.file.name + ".tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            tmp.replace(self.file)
        except OSError as exc:  # a full disk: the in-process status and the alert still work
            log.debug("could not write %s: %s", self.file, exc)


def read_trouble(file: Path) -> Trouble | None:
    """The trouble a running bot published in ``file`` (see :class:`LedgerHealth`), or None if
    there is none, it cannot be read, or its reporter is a process of this host that is gone."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        trouble = Trouble(
            since=dt.datetime.fromisoformat(data["since"]),
            error=str(data["error"]),
            failures=int(data["failures"]),
            reporter=str(data["reporter"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    host, _, pid = trouble.reporter.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                file.unlink()
            return None
        except OSError:
            pass
    return trouble


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    health: LedgerHealth,
    clock: Clock,
    policy: RetryPolicy,
    give_up: Callable[[], bool] = lambda: False,
    wake: asyncio.Event | None = None,
) -> T:
    """Await ``call()`` until it succeeds, retrying transient database errors (see
    :func:`is_transient`) after a capped exponential backoff, and keep ``health``.

    ``call`` MUST be one whole transaction (rolled back when it fails), so running it again
    is safe. ``wake`` set cuts the wait before the next attempt short, so that ``give_up()``
    (made true before setting it) is heard at once, not after the backoff.

    Raises:
        LedgerLost: the database was deleted or replaced (at once, or instead of a retry).
        Exception: an error that is not transient, at once; a transient one once
            ``give_up()`` is true (the ledger is closing, or a shutdown stopped its retries).
    """
    failures = 0
    while True:
        if health.lost is not None:
            raise health.lost
        try:
            result = await call()
        except Exception as exc:
            if health.lost is not None:
                raise health.lost from exc
            if not is_transient(exc) or give_up():
                raise
            failures += 1
            trouble = health.failed(exc)
            delay = policy.delay(failures)
            log.warning("ledger: %s; attempt %d again in %.2f s", trouble.error, failures, delay)
            await _pause(clock, delay, wake)
            if give_up():
                log.warning("ledger: not trying again (%s): the process is stopping", trouble.error)
                raise
            continue
        health.answered()
        return result


async def _pause(clock: Clock, seconds: float, wake: asyncio.Event | None) -> None:
    """``clock.sleep(seconds)``, ended early when ``wake`` is set."""
    if wake is None:
        await clock.sleep(seconds)
        return
    if wake.is_set():
        return
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waker = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        waker.cancel()
