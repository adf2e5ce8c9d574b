"""The ledger's base: its state, opening and closing, migration, transactions and retries."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import os
import secrets
import socket
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from sqlalchemy import (
    delete,
    insert,
    inspect,
    literal,
    make_url,
    select,
)
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from digest_core.clock import Clock, SystemClock
from digest_core.delivery.health import LedgerHealth, RetryPolicy, Trouble, retrying
from digest_core.delivery.identity import (
    NEW_LEDGER_FLAG,
    check_identity,
    marker_for,
    new_ledger_id,
    read_marker,
    write_marker,
)
from digest_core.delivery.ledger.engine import (
    _create_engine,
    _open_error,
    _set_aside_orphans,
    _sqlite_file,
    _unwritable,
)
from digest_core.delivery.ledger.migrate import (
    UPGRADE_COMMAND,
    SchemaState,
    lock_for_upgrade,
    read_state,
)
from digest_core.delivery.ledger.migrate import upgrade as upgrade_schema
from digest_core.delivery.ledger.oslocks import AVAILABLE as FLOCK_AVAILABLE
from digest_core.delivery.ledger.oslocks import FileLocks
from digest_core.delivery.ledger.records import (
    LedgerStats,
)
from digest_core.delivery.ledger.schema import (
    CONFIG_KEY,
    DEFAULT_LEDGER_URL,
    SCHEMA_VERSION,
    leases,
    ledger_identity,
)
from digest_core.errors import ConfigError, LedgerError, LedgerLost

log = logging.getLogger(__name__)

#: the writer's concurrent transactions on a server database (PostgreSQL)
WRITERS = 2


@dataclass(eq=False)
class _Op:
    kind: str
    params: dict[str, Any]
    done: asyncio.Future[bool]


def _new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


_P = ParamSpec("_P")
_R = TypeVar("_R")
_L = TypeVar("_L", bound="LedgerBase")


def _retried(
    method: Callable[Concatenate[_L, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[_L, _P], Coroutine[Any, Any, _R]]:
    """Make a one-transaction method of the delivery path wait out database trouble
    (:meth:`Ledger._retrying`) instead of failing the delivery."""

    @functools.wraps(method)
    async def wrapper(self: _L, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await self._retrying(lambda: method(self, *args, **kwargs))

    return wrapper


class LedgerBase:
    """What every part of :class:`~digest_core.delivery.ledger.Ledger` shares: the engine,
    the clock, the owner id, one transaction at a time (:meth:`_tx`), the writer's queue, the
    rows in flight here, lease holds, health and retries; opening (identity, migration, file
    checks) and closing. See :class:`~digest_core.delivery.ledger.Ledger` for the contracts.
    """

    def __init__(self, engine: AsyncEngine, *, clock: Clock, owner: str | None = None) -> None:
        self._engine = engine
        self._clock = clock
        #: this instance's lease owner id, ``host:pid:token``
        self.owner = owner or _new_owner()
        self._lock = asyncio.Lock()
        #: the writer's transactions that may run at once: one on SQLite (one writer per
        #: file anyway), two on a server database, so one batch is written while the next
        #: one gathers (the engine's CPU and the server's overlap instead of taking turns)
        self._writers = 1 if engine.dialect.name == "sqlite" else WRITERS
        self._queue: list[_Op] = []
        self._kick = asyncio.Event()
        self._closing = False
        #: set by :meth:`stop_retrying` (a shutdown): retries give up, waits are cut short
        self._stop_retrying = asyncio.Event()
        self._active = 0
        self._checkpoints: set[asyncio.Task[bool]] = set()
        self._writer: asyncio.Task[None] | None = None
        #: rows this instance claimed and has not settled: in flight in a live delivery
        self._live: set[int] = set()
        #: lease name -> how many holds this instance has on it (leases are reentrant)
        self._holds: dict[str, int] = {}
        #: an SQLite file's leases: OS locks beside it (None: leases are rows, judged by the
        #: database server's clock)
        self._locks: FileLocks | None = None
        self.stats = LedgerStats()
        #: whether the database answers (kept by the retries of the delivery path)
        self.health = LedgerHealth(clock)
        self.retry_policy = RetryPolicy()
        #: the SQLite file and its (st_dev, st_ino) when opened (the watchdog compares them)
        self.path: Path | None = None
        self.file_id: tuple[int, int] | None = None
        #: the id stored in the database (and in its marker file)
        self.ledger_id: str | None = None
        #: the schema as found when :meth:`open` created or upgraded it (None: it was current)
        self.upgraded_from: SchemaState | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str = DEFAULT_LEDGER_URL,
        *,
        clock: Clock | None = None,
        echo: bool = False,
        owner: str | None = None,
        new_ledger: bool = False,
        upgrade: bool = True,
    ) -> AsyncIterator[Self]:
        """Open (creating or migrating) the ledger at ``url``, any SQLAlchemy async URL.

        SQLite files get WAL, ``synchronous=NORMAL`` (a commit survives a killed process, not a
        power cut) and a busy timeout; their folder is created. ``owner`` names this instance
        in leases (default ``host:pid:token``, which lets a dead holder on this host be
        recognised); leases it still holds are released on close.

        An SQLite file gets a marker beside it (``<file>.marker``) holding the id stored in the
        database; while the marker exists, a missing, new or different database is refused
        unless ``new_ledger`` accepts it (and the marker is rewritten). A database that
        cannot be used is one :class:`LedgerError` line naming the file and the fix.

        An empty database gets the schema; an older one is upgraded (Alembic, see
        :mod:`.migrate`; one process at a time) unless ``upgrade`` is false, when it is
        refused with the command that upgrades it.

        Raises:
            ConfigError: the URL is malformed, names an unknown database, a synchronous or
                missing driver, or the database's schema is newer than this code
                (key ``database_url``; the password is never shown).
            LedgerError: the database is corrupt, truncated, unwritable, locked, cannot be
                reached, is not the one the marker records, or (without ``upgrade``) has
                an older schema.
        """
        engine = _create_engine(url, echo=echo)
        ledger = cls(engine, clock=clock or SystemClock(), owner=owner)
        try:
            await ledger._start(url, new_ledger=new_ledger, upgrade=upgrade)
            ledger._writer = asyncio.create_task(ledger._write_loop(), name="ledger-writer")
            yield ledger
        finally:
            await ledger._close()
            await engine.dispose()
            lost_file = ledger.path if ledger.health.lost is not None else None
            if lost_file is not None and not lost_file.exists():
                # its -wal is ours and dead: left there, it would be replayed into a backup
                # copied to the path
                _set_aside_orphans(lost_file, ledger._clock.now())

    async def _write_loop(self) -> None:
        """The group-commit writer's task, started by :meth:`open` (see :mod:`.writer`)."""
        raise NotImplementedError

    async def _start(self, url: str, *, new_ledger: bool, upgrade: bool = True) -> None:
        """Check the identity, migrate, check the file: everything :meth:`open` does first."""
        parsed = make_url(url)
        shown = parsed.render_as_string(hide_password=True)
        database = _sqlite_file(url)
        marker = marker_for(database) if database is not None else None
        expected = read_marker(marker) if marker is not None else None
        exists = database is None or database.exists()
        if database is not None:
            shown = str(database)
        if marker is not None and not exists:
            # before connecting: a connection would create the missing file
            check_identity(
                shown=shown,
                marker=marker,
                expected=expected,
                found=None,
                exists=False,
                new_ledger=new_ledger,
            )
        if database is not None and not exists:
            _set_aside_orphans(database, self._clock.now())
        if database is not None and (unwritable := _unwritable(database)):
            # found now, not as a post that waits for ever for a read-only file to answer
            raise _open_error(None, shown, database, reason=unwritable)
        try:
            if database is not None and FLOCK_AVAILABLE:  # one host: the kernel's leases
                self._locks = FileLocks(database)
                self._locks.prepare()
            if database is not None and exists and (damage := await self._check_file()):
                raise _open_error(None, shown, database, reason=f"damaged: {damage}")
            found = await self._read_identity()
            adopted = None
            if found is None and expected is not None and await self._has_schema():
                # a ledger from before ledger ids (a backup older than them): a real one
                adopted = expected
            if marker is not None:
                check_identity(
                    shown=shown,
                    marker=marker,
                    expected=expected,
                    found=found or adopted,
                    exists=exists,
                    new_ledger=new_ledger,
                )
            await self._migrate(shown, upgrade=upgrade)
            self.ledger_id = found or await self._create_identity(adopted)
        except (LedgerError, ConfigError):
            raise
        except (DBAPIError, OSError) as exc:
            raise _open_error(exc, shown, database) from exc
        if marker is not None and expected != self.ledger_id:
            if expected is not None:
                log.warning("%s: accepting ledger %s (%s)", marker, self.ledger_id, NEW_LEDGER_FLAG)
            write_marker(marker, self.ledger_id)
        if database is not None:
            st = database.stat()
            self.path, self.file_id = database, (st.st_dev, st.st_ino)
            self.health.file = database.with_name(database.name + ".health")
            self.health.subscribe(self._checkpoint_after_trouble)

    async def _check_file(self) -> str | None:
        """SQLite's quick check, so a truncated or damaged file is refused at start rather
        than found broken in the middle of a post; returns what is wrong, or None."""
        async with self._tx() as conn:
            found = (await conn.exec_driver_sql("PRAGMA quick_check(1)")).scalar()
        return None if found == "ok" else str(found)

    async def _read_identity(self) -> str | None:
        async with self._tx() as conn:
            if not await conn.run_sync(lambda c: inspect(c).has_table(ledger_identity.name)):
                return None
            found = (await conn.execute(select(ledger_identity.c.id))).scalar()
        return None if found is None else str(found)

    async def _has_schema(self) -> bool:
        async with self._tx() as conn:
            return not (await conn.run_sync(read_state)).empty

    async def _create_identity(self, ledger_id: str | None = None) -> str:
        try:
            async with self._tx() as conn:
                ledger_id = ledger_id or new_ledger_id()
                await conn.execute(
                    insert(ledger_identity).values(
                        key=1, id=ledger_id, created_at=self._clock.now()
                    )
                )
                return ledger_id
        except IntegrityError:  # another process created it first
            found = await self._read_identity()
            assert found is not None
            return found

    async def read_identity(self) -> str | None:
        """The ledger id stored in the database now (the watchdog compares it with
        :attr:`ledger_id` where there is no file to watch)."""
        return await self._read_identity()

    def lose(self, error: LedgerLost) -> None:
        """The database was deleted or replaced: fail every waiting and future state change
        and ledger retry with ``error``, so nothing more is sent (a claim comes first)."""
        self.health.lose(error)
        queued, self._queue = self._queue, []
        for op in queued:
            if not op.done.done():
                op.done.set_exception(error)
        self._kick.set()

    async def _retrying(self, call: Callable[[], Awaitable[_R]]) -> _R:
        """Run the one-transaction ``call`` until the database answers (see
        :func:`digest_core.delivery.health.retrying`); give up once closing or stopped."""
        return await retrying(
            call,
            health=self.health,
            clock=self._clock,
            policy=self.retry_policy,
            give_up=lambda: self._closing or self._stop_retrying.is_set(),
            wake=self._stop_retrying,
        )

    def stop_retrying(self) -> None:
        """Stop waiting out database trouble (a shutdown whose grace is over): every retried
        transaction that fails from now on, and every one waiting for its next attempt, raises
        its error at once, so the process can stop while the database does not answer. What
        was not recorded is left as a crash leaves it (rows in flight are sent again on the
        next start). Transactions that succeed are not affected."""
        self._stop_retrying.set()

    @property
    def retries_stopped(self) -> bool:
        """True once :meth:`stop_retrying` was called."""
        return self._stop_retrying.is_set()

    def _checkpoint_after_trouble(self, trouble: Trouble, cleared_at: dt.datetime | None) -> None:
        """Once an SQLite ledger answers again, give back what its log grew to meanwhile."""
        if cleared_at is None or self._closing:
            return
        task = asyncio.get_running_loop().create_task(self.checkpoint(), name="ledger-checkpoint")
        self._checkpoints.add(task)
        task.add_done_callback(self._checkpoints.discard)

    async def checkpoint(self) -> bool:
        """Copy an SQLite ledger's write-ahead log into the database and truncate it to 0
        bytes (``wal_checkpoint(TRUNCATE)``), between transactions; True if it was done
        completely (False: another connection was reading, or not SQLite). Never raises
        for the database's errors: the next checkpoint does it."""
        if self._engine.dialect.name != "sqlite" or self.path is None:
            return False
        try:
            async with self._lock, self._engine.connect() as conn:
                row = (await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")).first()
        except Exception as exc:
            log.warning("could not checkpoint the ledger's log %s-wal: %s", self.path, exc)
            return False
        found = tuple(row) if row is not None else (1, -1)
        busy, pages = int(found[0]), int(found[1])
        log.info("checkpointed the ledger's log %s-wal (%d pages)", self.path, pages)
        return busy == 0

    async def answers(self) -> None:
        """Return once the database answers a query: ledger trouble is waited out (and kept
        in :attr:`health`) like on the delivery path.

        Raises:
            LedgerLost: the database was deleted or replaced.
            Exception: a database error that is not transient, or a transient one once the
                ledger is closing or its retries were stopped (:meth:`stop_retrying`).
        """

        async def ping() -> None:
            async with self._tx() as conn:
                await conn.execute(select(literal(1)))

        await self._retrying(ping)

    async def _close(self) -> None:
        self._closing = True
        self._kick.set()
        if self._writer is not None:
            await self._writer
        if self._checkpoints:
            await asyncio.gather(*self._checkpoints, return_exceptions=True)
        if self._locks is not None:  # no rows to delete: the locks go with their files
            self._holds.clear()
            self._locks.close()
        if self._holds and self.health.lost is not None:
            self._holds.clear()  # the database is not ours any more: touch nothing
        if self._holds:
            self._holds.clear()
            try:
                async with self._tx() as conn:
                    await conn.execute(delete(leases).where(leases.c.owner == self.owner))
            except Exception:  # they expire anyway
                log.exception("could not release the leases of %s", self.owner)

    async def _migrate(self, shown: str, *, upgrade: bool) -> None:
        """Create the schema of an empty database, or upgrade an older one when ``upgrade``
        (see :mod:`.migrate`); a current one is only read (``digest-bot status`` opens it
        while the bot holds SQLite's write lock)."""
        async with self._tx() as conn:
            state = await conn.run_sync(read_state)
        if state.current:
            return
        if state.newer:
            raise ConfigError(
                f"ledger schema {state.describe()} is newer than this code "
                f"({SCHEMA_VERSION}); run the newer release, or restore a backup made "
                "before it upgraded the ledger",
                key=CONFIG_KEY,
            )
        if not state.empty and not upgrade:
            raise LedgerError(
                f"ledger {shown} is at {state.describe()}; this release needs version "
                f"{SCHEMA_VERSION}: back it up and run `{UPGRADE_COMMAND}` (or set "
                "[ledger] auto_upgrade = true)",
                where=shown,
            )
        async with self._tx() as conn:
            await lock_for_upgrade(conn)
            if await conn.run_sync(upgrade_schema):
                self.upgraded_from = state

    @property
    def busy(self) -> bool:
        """True while a transaction runs or state changes wait for one (tests use it to settle)."""
        return self._active > 0 or bool(self._queue)

    @asynccontextmanager
    async def _tx(self, *, exclusive: bool = True) -> AsyncIterator[AsyncConnection]:
        # One transaction at a time per process: SQLite serialises writers anyway, and the lock
        # lets an in-memory database share its single connection. The writer's batches on a
        # server database (``exclusive=False``) run beside it: they change only rows their
        # callers have claimed or are claiming by id, which row locks keep apart.
        self._active += 1
        try:
            if exclusive or self._writers == 1:
                async with self._lock, self._engine.begin() as conn:
                    yield conn
            else:
                async with self._engine.begin() as conn:
                    yield conn
            self.stats.transactions += 1
        finally:
            self._active -= 1

    # -- planning ----------------------------------------------------------------------------
