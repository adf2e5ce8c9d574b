"""The ledger's lifecycle: opening (identity, migration, file checks), checkpoints, closing."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import delete, insert, inspect, literal, make_url, select
from sqlalchemy.exc import DBAPIError, IntegrityError

from digest_core.delivery.health import Trouble
from digest_core.delivery.identity import (
    NEW_LEDGER_FLAG,
    check_identity,
    marker_for,
    new_ledger_id,
    read_marker,
    write_marker,
)
from digest_core.delivery.ledger.engine import (
    open_error,
    open_existing_only,
    set_aside_orphans,
    sqlite_file,
    unwritable_reason,
)
from digest_core.delivery.ledger.migrate import (
    UPGRADE_COMMAND,
    lock_for_upgrade,
    read_state,
)
from digest_core.delivery.ledger.migrate import upgrade as upgrade_schema
from digest_core.delivery.ledger.oslocks import AVAILABLE as FLOCK_AVAILABLE
from digest_core.delivery.ledger.oslocks import FileLocks
from digest_core.delivery.ledger.schema import (
    CONFIG_KEY,
    SCHEMA_VERSION,
    leases,
    ledger_identity,
)
from digest_core.delivery.ledger.state import LedgerState
from digest_core.errors import ConfigError, LedgerError

__all__ = ["Lifecycle"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Opening:
    """What opening a ledger knows before it connects."""

    #: the database as messages name it: an SQLite file's path, else the URL (no password)
    shown: str
    #: the SQLite file (None: a database server, or SQLite in memory)
    database: Path | None
    #: the marker beside the file, and the ledger id it holds
    marker: Path | None
    expected: str | None
    #: whether the database exists (a server's always does)
    exists: bool
    #: accept a missing, new or different database (``run --new-ledger``)
    new_ledger: bool

    @classmethod
    def of(cls, url: str, *, new_ledger: bool) -> _Opening:
        parsed = make_url(url)
        shown = parsed.render_as_string(hide_password=True)
        database = sqlite_file(url)
        marker = marker_for(database) if database is not None else None
        expected = read_marker(marker) if marker is not None else None
        exists = database is None or database.exists()
        if database is not None:
            shown = str(database)
        return cls(shown, database, marker, expected, exists, new_ledger)

    def check_identity(self, found: str | None) -> None:
        """Refuse a database that holds ledger id ``found`` (None: none) if the marker
        records another ledger (nothing without a marker)."""
        if self.marker is not None:
            check_identity(
                shown=self.shown,
                marker=self.marker,
                expected=self.expected,
                found=found,
                exists=self.exists,
                new_ledger=self.new_ledger,
            )


class Lifecycle:
    """Open, check, checkpoint and close the database of one :class:`.state.LedgerState`."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state

    async def start(self, url: str, *, new_ledger: bool, upgrade: bool = True) -> None:
        """Check the identity, migrate, check the file: everything opening does first (see
        :meth:`~digest_core.delivery.ledger.Ledger.open`)."""
        opening = _Opening.of(url, new_ledger=new_ledger)
        shown, database, marker = opening.shown, opening.database, opening.marker
        if database is not None:
            self._check_before_connecting(opening, database)
        try:
            if database is not None and FLOCK_AVAILABLE:  # one host: the kernel's leases
                self.state.locks = FileLocks(database)
                self.state.locks.prepare()
            if database is not None and opening.exists and (damage := await self._check_file()):
                raise open_error(None, shown, database, reason=f"damaged: {damage}")
            found, adopted = await self._identify(opening)
            await self._migrate(shown, upgrade=upgrade)
            self.state.ledger_id = found or await self._create_identity(adopted)
        except (LedgerError, ConfigError):
            raise
        except (DBAPIError, OSError) as exc:
            raise open_error(exc, shown, database) from exc
        if marker is not None and opening.expected != self.state.ledger_id:
            if opening.expected is not None:
                log.warning(
                    "%s: accepting ledger %s (%s)", marker, self.state.ledger_id, NEW_LEDGER_FLAG
                )
            write_marker(marker, self.state.ledger_id)
        if database is not None:
            self._watch(database)
            open_existing_only(self.state.engine, database)

    def _check_before_connecting(self, opening: _Opening, database: Path) -> None:
        """What an SQLite file is refused for before a connection (which would create it):
        a missing file the marker says existed, a file that cannot be written; the ``-wal``
        and ``-shm`` a deleted file left are set aside."""
        if not opening.exists:
            opening.check_identity(None)
            set_aside_orphans(database, self.state.clock.now())
        if unwritable := unwritable_reason(database):
            # found now, not as a post that waits for ever for a read-only file to answer
            raise open_error(None, opening.shown, database, reason=unwritable)

    async def _identify(self, opening: _Opening) -> tuple[str | None, str | None]:
        """The ledger id stored in the database (None: none yet), and the id of the marker
        to adopt (a ledger from before ledger ids); refused if not the marker's ledger."""
        found = await self._read_identity()
        adopted = None
        if found is None and opening.expected is not None and await self._has_schema():
            # a ledger from before ledger ids (a backup older than them): a real one
            adopted = opening.expected
        opening.check_identity(found or adopted)
        return found, adopted

    def _watch(self, database: Path) -> None:
        """Keep the opened file's identity (the watchdog compares it) and checkpoint its log
        once trouble clears."""
        st = database.stat()
        self.state.path, self.state.file_id = database, (st.st_dev, st.st_ino)
        self.state.health.file = database.with_name(database.name + ".health")
        self.state.health.subscribe(self._checkpoint_after_trouble)

    async def _check_file(self) -> str | None:
        """SQLite's quick check, so a truncated or damaged file is refused at start rather
        than found broken in the middle of a post; returns what is wrong, or None."""
        async with self.state.tx() as conn:
            found = (await conn.exec_driver_sql("PRAGMA quick_check(1)")).scalar()
        return None if found == "ok" else str(found)

    async def _read_identity(self) -> str | None:
        async with self.state.tx() as conn:
            if not await conn.run_sync(lambda c: inspect(c).has_table(ledger_identity.name)):
                return None
            found = (await conn.execute(select(ledger_identity.c.id))).scalar()
        return None if found is None else str(found)

    async def _has_schema(self) -> bool:
        async with self.state.tx() as conn:
            return not (await conn.run_sync(read_state)).empty

    async def _create_identity(self, ledger_id: str | None = None) -> str:
        try:
            async with self.state.tx() as conn:
                ledger_id = ledger_id or new_ledger_id()
                await conn.execute(
                    insert(ledger_identity).values(
                        key=1, id=ledger_id, created_at=self.state.clock.now()
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

    def _checkpoint_after_trouble(self, trouble: Trouble, cleared_at: dt.datetime | None) -> None:
        """Once an SQLite ledger answers again, give back what its log grew to meanwhile."""
        if cleared_at is None or self.state.closing:
            return
        task = asyncio.get_running_loop().create_task(self.checkpoint(), name="ledger-checkpoint")
        self.state.checkpoints.add(task)
        task.add_done_callback(self.state.checkpoints.discard)

    async def checkpoint(self) -> bool:
        """Copy an SQLite ledger's write-ahead log into the database and truncate it to 0
        bytes (``wal_checkpoint(TRUNCATE)``), between transactions; True if it was done
        completely (False: another connection was reading, or not SQLite). Never raises
        for the database's errors: the next checkpoint does it."""
        if self.state.engine.dialect.name != "sqlite" or self.state.path is None:
            return False
        try:
            async with self.state.lock, self.state.engine.connect() as conn:
                row = (await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")).first()
        except Exception as exc:
            log.warning("could not checkpoint the ledger's log %s-wal: %s", self.state.path, exc)
            return False
        found = tuple(row) if row is not None else (1, -1)
        busy, pages = int(found[0]), int(found[1])
        log.info("checkpointed the ledger's log %s-wal (%d pages)", self.state.path, pages)
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
            async with self.state.tx() as conn:
                await conn.execute(select(literal(1)))

        await self.state.retrying(ping)

    async def close(self) -> None:
        self.state.closing = True
        self.state.kick.set()
        if self.state.writer is not None:
            await self.state.writer
        if self.state.checkpoints:
            await asyncio.gather(*self.state.checkpoints, return_exceptions=True)
        if self.state.locks is not None:  # no rows to delete: the locks go with their files
            self.state.holds.clear()
            self.state.locks.close()
        if self.state.holds and self.state.health.lost is not None:
            self.state.holds.clear()  # the database is not ours any more: touch nothing
        if self.state.holds:
            self.state.holds.clear()
            try:
                async with self.state.tx() as conn:
                    await conn.execute(delete(leases).where(leases.c.owner == self.state.owner))
            except Exception:  # they expire anyway
                log.exception("could not release the leases of %s", self.state.owner)

    async def _migrate(self, shown: str, *, upgrade: bool) -> None:
        """Create the schema of an empty database, or upgrade an older one when ``upgrade``
        (see :mod:`.migrate`); a current one is only read (``digest-bot status`` opens it
        while the bot holds SQLite's write lock)."""
        async with self.state.tx() as conn:
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
        async with self.state.tx() as conn:
            await lock_for_upgrade(conn)
            if await conn.run_sync(upgrade_schema):
                self.state.upgraded_from = state
