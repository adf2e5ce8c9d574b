"""The archive's full-text index on the ledger's PostgreSQL server: ``pg_trgm``.

The same rows as the SQLite index (:mod:`digest_core.archive.fulltext`), in tables of their
own schema (``digest_search``, so the ledger's migrations never see them), with a GIN trigram
index on the casefolded text: ``folded LIKE '%word%'`` is looked up through it for a word of
three characters or more (pg_trgm takes a word's characters from the database's ``LC_CTYPE``:
a database created with ``--locale=C`` gets no trigrams from Chinese and scans instead, still
right). A shorter word reads the rows newest first until a page of hits, as on SQLite.

The archive is synchronous (worker threads) and the ledger's driver, asyncpg, is not: the index
runs its own event loop in a daemon thread, with a small pool of its own, and each call waits
for its coroutine there. Rows are read a page at a time (by id), so a search that stops after a
page of hits reads no more.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import threading
import unicodedata
from collections.abc import Coroutine, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from digest_core.archive.fulltext import (
    SCHEMA_VERSION,
    Indexed,
    Piece,
    Update,
    date_of,
    id_range,
    pack,
    pieces_of,
    row_id,
    unpack,
)
from digest_core.models import Issue, Section

log = logging.getLogger(__name__)

T = TypeVar("T")
_PAGE = 200
_SECTIONS = {s.value: s for s in Section}
_S = "digest_search"
_TABLES = (
    f"CREATE TABLE IF NOT EXISTS {_S}.meta (key text PRIMARY KEY, value text NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_S}.files (day integer PRIMARY KEY, name text NOT NULL,"
    " dev bigint, ino bigint, mtime_ns bigint, ctime_ns bigint, size bigint,"
    " revision text NOT NULL, issue bytea NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {_S}.pieces (id bigint PRIMARY KEY, item integer NOT NULL,"
    " section text, idx integer NOT NULL, title text NOT NULL, piece text, folded text NOT NULL)",
)
_TRGM = (
    f"CREATE INDEX IF NOT EXISTS pieces_folded_trgm ON {_S}.pieces USING gin (folded gin_trgm_ops)"
)


def _dsn(database_url: str) -> str:
    """asyncpg's DSN for a SQLAlchemy URL (``postgresql+asyncpg://…`` → ``postgresql://…``)."""
    _, sep, rest = database_url.partition("://")
    return f"postgresql{sep}{rest}" if sep else database_url


def _like(needle: str) -> str:
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class PgFullText:
    """:class:`~digest_core.archive.fulltext.FullText` in PostgreSQL (see the module).

    Nothing is opened until the first call. An index of another folder, schema or Unicode
    version is emptied and filled afresh.
    """

    read_only = False

    def __init__(self, database_url: str, *, root: Path) -> None:
        self._dsn = _dsn(database_url)
        self._identity = {
            "schema": str(SCHEMA_VERSION),
            "unicode": unicodedata.unidata_version,
            "root": os.path.realpath(root),
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: Any = None
        self._start = threading.Lock()

    def __repr__(self) -> str:
        return "PgFullText(…)"  # the DSN may carry a password

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._start:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="archive-index-pg", daemon=True
                ).start()
                try:
                    asyncio.run_coroutine_threadsafe(self._connect(), loop).result()
                except BaseException:
                    loop.call_soon_threadsafe(loop.stop)
                    coro.close()
                    raise
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _connect(self) -> None:
        import asyncpg  # type: ignore[import-untyped]

        self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=4)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('digest_search'))")
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_S}")
            for statement in _TABLES:
                await conn.execute(statement)
            meta = dict(await conn.fetch(f"SELECT key, value FROM {_S}.meta"))
            if meta != self._identity:
                if meta:
                    log.info(
                        "archive index in PostgreSQL: of another version or folder, made afresh"
                    )
                await conn.execute(f"TRUNCATE {_S}.meta, {_S}.files, {_S}.pieces")
                await conn.executemany(
                    f"INSERT INTO {_S}.meta VALUES ($1, $2)", list(self._identity.items())
                )
        async with self._pool.acquire() as conn:
            try:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                await conn.execute(_TRGM)
            except Exception as exc:  # not allowed to: LIKE still works, by scanning
                log.warning("archive index in PostgreSQL: no pg_trgm (%s); searches scan", exc)

    def indexed(self) -> dict[dt.date, Indexed]:
        async def go() -> dict[dt.date, Indexed]:
            rows = await self._pool.fetch(
                f"SELECT day, name, dev, ino, mtime_ns, ctime_ns, size, revision FROM {_S}.files"
            )
            return {
                dt.date.fromordinal(r[0]): Indexed(r[1], (r[2], r[3], r[4], r[5], r[6]), r[7])
                for r in rows
            }

        return self._run(go())

    def put(self, updates: Sequence[Update]) -> None:
        if updates:
            self._run(self._put(updates))

    async def _put(self, updates: Sequence[Update]) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            for date, info, issue in updates:
                day = date.toordinal()
                if issue is None:
                    await conn.execute(
                        f"UPDATE {_S}.files SET name = $1, dev = $2, ino = $3, mtime_ns = $4,"
                        " ctime_ns = $5, size = $6 WHERE day = $7",
                        info.name, *info.key, day,
                    )  # fmt: skip
                    continue
                await conn.execute(
                    f"DELETE FROM {_S}.pieces WHERE id BETWEEN $1 AND $2", *id_range(None, date)
                )
                rows = []
                for n, (item, section, index, title, piece) in enumerate(pieces_of(issue)):
                    folded = piece.casefold()
                    kept = None if folded == piece else piece
                    name = None if section is None else section.value
                    rows.append((row_id(date, n), item, name, index, title, kept, folded))
                await conn.executemany(
                    f"INSERT INTO {_S}.pieces VALUES ($1, $2, $3, $4, $5, $6, $7)", rows
                )
                await conn.execute(
                    f"INSERT INTO {_S}.files VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                    " ON CONFLICT (day) DO UPDATE SET name = excluded.name, dev = excluded.dev,"
                    " ino = excluded.ino, mtime_ns = excluded.mtime_ns,"
                    " ctime_ns = excluded.ctime_ns, size = excluded.size,"
                    " revision = excluded.revision, issue = excluded.issue",
                    day, info.name, *info.key, info.revision, pack(issue),
                )  # fmt: skip

    def remove(self, dates: Iterable[dt.date]) -> None:
        days = sorted(set(dates))
        if days:
            self._run(self._remove(days))

    async def _remove(self, days: list[dt.date]) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            for date in days:
                await conn.execute(
                    f"DELETE FROM {_S}.pieces WHERE id BETWEEN $1 AND $2", *id_range(None, date)
                )
                await conn.execute(f"DELETE FROM {_S}.files WHERE day = $1", date.toordinal())

    def issue(self, date: dt.date) -> Issue | None:
        async def go() -> bytes | None:
            value: bytes | None = await self._pool.fetchval(
                f"SELECT issue FROM {_S}.files WHERE day = $1", date.toordinal()
            )
            return value

        data = self._run(go())
        return None if data is None else unpack(data)

    def candidates(
        self, needle: str, *, on_or_before: dt.date | None = None, day: dt.date | None = None
    ) -> Generator[Piece, None, None]:
        if "\x00" in needle:  # no piece holds a control character (nor can PostgreSQL text)
            return
        low, high = id_range(on_or_before, day)
        pattern = _like(needle)
        while True:
            page = self._run(self._page(pattern, low, high))
            for rid, item, section, index, title, piece, folded in page:
                text = folded if piece is None else piece
                yield Piece(date_of(rid), item, _SECTIONS.get(section), index, title, text)
            if len(page) < _PAGE:
                return
            low = page[-1][0] + 1

    async def _page(self, pattern: str, low: int, high: int) -> list[Any]:
        rows: list[Any] = await self._pool.fetch(
            f"SELECT id, item, section, idx, title, piece, folded FROM {_S}.pieces"
            " WHERE folded LIKE $1 AND id BETWEEN $2 AND $3 ORDER BY id LIMIT $4",
            pattern, low, high, _PAGE,
        )  # fmt: skip
        return rows

    def close(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if self._pool is not None:
            asyncio.run_coroutine_threadsafe(self._pool.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        self._loop = None
