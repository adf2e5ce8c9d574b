"""Confirmed readers' addresses by reader id: the ledger and the logs see only the id.

A reader id is ``r`` + 24 hex digits of an HMAC of the normalised address under the links'
secret key: the same address always has the same id (a second subscription is the same
reader), and the id tells nothing about the address without the key. The book is one SQLite
file (stdlib ``sqlite3``, called from a thread); forgetting a reader deletes its row.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS readers ("
    " id TEXT PRIMARY KEY, address TEXT NOT NULL UNIQUE, confirmed_at TEXT NOT NULL)"
)
_SOFT = "CREATE TABLE IF NOT EXISTS soft_bounces (id TEXT PRIMARY KEY, count INTEGER NOT NULL)"
#: confirmations mailed and not yet pressed, by reader id (no address): the pending count
_PENDING = "CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY, requested_at TEXT NOT NULL)"
#: what the bounce mailbox told, as counts only (hard, soft, complaint, unsubscribe, and
#: deactivated: the readers it ended)
_TALLIES = "CREATE TABLE IF NOT EXISTS tallies (kind TEXT PRIMARY KEY, count INTEGER NOT NULL)"
#: the kinds :meth:`AddressBook.tallies` always reports (0 until counted)
TALLY_KINDS = ("hard", "soft", "complaint", "unsubscribe", "deactivated")


def normalise(address: str) -> str:
    """The form addresses are compared in: the domain lower-cased (the local part is the
    receiving server's, kept as written)."""
    local, _, domain = address.strip().rpartition("@")
    return f"{local}@{domain.lower()}"


def reader_id(address: str, key: str) -> str:
    """The reader's id for ``address`` under the links' secret ``key``."""
    mac = hmac.new(key.encode(), normalise(address).encode(), hashlib.sha256)
    return "r" + mac.hexdigest()[:24]


class AddressBook:
    """``reader id -> address`` for confirmed readers, in an SQLite file."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self._key = key
        self._conn: sqlite3.Connection | None = None
        #: one connection for every worker thread, one statement at a time
        self._lock = threading.Lock()

    def id_of(self, address: str) -> str:
        return reader_id(address, self._key)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """The book's one connection (opened on first use), in a transaction."""
        with self._lock:
            if self._conn is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                for schema in (_SCHEMA, _SOFT, _PENDING, _TALLIES):
                    conn.execute(schema)
                self._conn = conn
            with self._conn:
                yield self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _add(self, address: str, at: dt.datetime) -> str:
        rid = self.id_of(address)
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO readers (id, address, confirmed_at) VALUES (?, ?, ?) "
                "ON CONFLICT(id) DO NOTHING",
                (rid, normalise(address), at.isoformat()),
            )
            conn.execute("DELETE FROM pending WHERE id = ?", (rid,))
        return rid

    async def add(self, address: str, *, at: dt.datetime) -> str:
        """Record ``address`` as confirmed (idempotent); its reader id."""
        return await asyncio.to_thread(self._add, address, at)

    def _get(self, rid: str) -> str | None:
        with self._connect() as conn:
            row = conn.execute("SELECT address FROM readers WHERE id = ?", (rid,)).fetchone()
        return None if row is None else str(row[0])

    async def address(self, rid: str) -> str | None:
        """The address of reader ``rid``; None when it was never confirmed or was forgotten.

        Read on the event loop's thread: one primary-key read of a WAL database, which no
        writer blocks (a hop to a worker thread cost more than the read, 10,000 times a post).
        """
        return self._get(rid)

    def _remove(self, rid: str) -> bool:
        with self._connect() as conn:
            conn.execute("DELETE FROM pending WHERE id = ?", (rid,))
            return conn.execute("DELETE FROM readers WHERE id = ?", (rid,)).rowcount > 0

    async def remove(self, rid: str) -> bool:
        """Forget reader ``rid``'s address (and a confirmation it was mailed); False when
        there was no address."""
        return await asyncio.to_thread(self._remove, rid)

    def _soft_bounce(self, rid: str) -> int:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO soft_bounces (id, count) VALUES (?, 1) "
                "ON CONFLICT(id) DO UPDATE SET count = count + 1",
                (rid,),
            )
            return int(
                conn.execute("SELECT count FROM soft_bounces WHERE id = ?", (rid,)).fetchone()[0]
            )

    async def soft_bounce(self, rid: str) -> int:
        """Count one soft bounce of reader ``rid``; how many it has had."""
        return await asyncio.to_thread(self._soft_bounce, rid)

    def _count(self) -> int:
        with self._connect() as conn:
            return int(conn.execute("SELECT count(*) FROM readers").fetchone()[0])

    async def count(self) -> int:
        return await asyncio.to_thread(self._count)

    def _requested(self, rid: str, at: dt.datetime, expired: dt.datetime) -> None:
        with self._connect() as conn:
            conn.execute(
                "DELETE FROM pending WHERE requested_at < ?",
                (expired.astimezone(dt.UTC).isoformat(),),
            )
            if conn.execute("SELECT 1 FROM readers WHERE id = ?", (rid,)).fetchone() is None:
                conn.execute(
                    "INSERT INTO pending (id, requested_at) VALUES (?, ?) "
                    "ON CONFLICT(id) DO UPDATE SET requested_at = excluded.requested_at",
                    (rid, at.astimezone(dt.UTC).isoformat()),
                )

    async def requested(self, rid: str, *, at: dt.datetime, expired: dt.datetime) -> None:
        """A confirmation was mailed to reader ``rid`` at ``at`` (nothing for a reader who is
        confirmed already: that one is not pending); those mailed before ``expired`` (their
        links no longer work) are dropped."""
        await asyncio.to_thread(self._requested, rid, at, expired)

    def _tally(self, kinds: dict[str, int]) -> None:
        with self._connect() as conn:
            conn.executemany(
                "INSERT INTO tallies (kind, count) VALUES (?, ?) "
                "ON CONFLICT(kind) DO UPDATE SET count = count + excluded.count",
                [(k, n) for k, n in kinds.items() if n],
            )

    async def tally(self, kinds: dict[str, int]) -> None:
        """Add ``kinds`` (kind -> how many) to the counts kept (:data:`TALLY_KINDS`)."""
        await asyncio.to_thread(self._tally, kinds)

    def _tallies(self, pending_since: dt.datetime) -> dict[str, int]:
        with self._connect() as conn:
            counts = {kind: 0 for kind in TALLY_KINDS}
            counts.update((str(k), int(n)) for k, n in conn.execute("SELECT * FROM tallies"))
            counts["confirmed"] = int(conn.execute("SELECT count(*) FROM readers").fetchone()[0])
            counts["pending"] = int(
                conn.execute(
                    "SELECT count(*) FROM pending WHERE requested_at >= ?",
                    (pending_since.astimezone(dt.UTC).isoformat(),),
                ).fetchone()[0]
            )
        return counts

    async def tallies(self, *, pending_since: dt.datetime) -> dict[str, int]:
        """Counts, never addresses: ``confirmed`` readers, ``pending`` confirmations (mailed
        since ``pending_since``: older links have expired), and :data:`TALLY_KINDS`."""
        return await asyncio.to_thread(self._tallies, pending_since)
