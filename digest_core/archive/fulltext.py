"""The archive's persistent full-text index: SQLite FTS5 with the ``trigram`` tokenizer.

Readers search Chinese, where words are not separated by spaces: FTS5's ``trigram`` tokenizer
indexes every run of three characters, so any substring of three or more characters is found
through the index without a word segmenter. Shorter queries (``模型``, ``：``, ``x``) are
common in Chinese; trigram cannot look them up directly, so every indexed text ends with two
:data:`SENTINEL` characters (then every character of the text starts a trigram) and a one- or
two-character query becomes an ``OR`` of the index's own terms that start with it, read from
the ``fts5vocab`` table in one range scan. A query that starts very many terms is common, so
the pieces are read newest first until a page of hits is found.

What is indexed is one row per *piece* of an issue (table ``pieces``; the FTS5 table is
contentless, so no text is stored twice) (its lede, each item's title, paragraphs
and reading question), casefolded as the archive's search is (Python's ``str.casefold``, so
``ß`` finds ``ss``); the index only proposes candidates and the archive checks each against
the piece's real text, so there are no false positives. Row ids sort newest issue first and,
within an issue, in reading order (:func:`row_id`): a query reads rows in id order and stops
after a page of hits.

Per issue date the index records the file it was read from, that file's stat key (identity,
mtime, ctime and size) and the issue's revision: the archive compares them with the folder, so
a restart re-reads nothing that did not change, and a changed file costs one parse and one
transaction (a touched file whose revision is unchanged only moves its key).

Why its own file and not the ledger's database: the index is derived data, rebuilt from the
archive folder whenever it is missing, stale or of another version; it is written by worker
threads through the standard library's synchronous ``sqlite3``, while the ledger is written by
the async engine, and SQLite has one writer per database: a rebuild of ten years of issues
would hold up deliveries. Alembic's migrations of the ledger know nothing of FTS5 virtual
tables either, and a ledger backup need not carry a 100 MB index. The file sits beside the
ledger (:func:`index_path_for`); on PostgreSQL, the index lives in the ledger's server instead
(:mod:`digest_core.archive.pgtrgm`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import sqlite3
import tempfile
import threading
import unicodedata
import zlib
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from digest_core.archive.files import StatKey
from digest_core.models import Issue, Section

log = logging.getLogger(__name__)

#: bumped whenever what is stored changes: an index of another version is rebuilt
SCHEMA_VERSION = 3
#: appended to every indexed text: every character of the text then starts a trigram
SENTINEL = "\uffff\uffff"
#: a piece's place within its issue takes the low bits of its row id
PIECE_BITS = 24
_LAST_DAY = dt.date.max.toordinal()
#: a one- or two-character query starting at most this many index terms is looked up as an
#: OR of those terms; more, and the pieces are read newest first
FEW_TERMS = 64
#: rows read from the database at a time while hits are collected
_PAGE = 64


class Piece(NamedTuple):
    """One indexed piece of an issue, as :meth:`FullText.candidates` gives it."""

    date: dt.date
    item: int  # 0 for the lede, then 1, 2, … for the issue's items in publishing order
    section: Section | None  # None for the lede
    number: int  # as SearchHit.index: 0 for the lede, the brief's number, 1 otherwise
    title: str
    text: str  # the piece itself (not casefolded)


@dataclass(frozen=True, slots=True)
class Indexed:
    """What the index holds for one date: the file it was read from and the issue's revision."""

    name: str
    key: StatKey
    revision: str


#: one date's update: its record, and its issue (None: the revision did not change, only the
#: file's key moves)
Update = tuple[dt.date, Indexed, Issue | None]


class FullText(Protocol):
    """A persistent full-text index of an archive's issues (SQLite or PostgreSQL).

    Thread-safe: every method may be called from any worker thread.
    """

    def indexed(self) -> dict[dt.date, Indexed]:
        """Every date the index holds, with what it was read from."""
        ...

    def put(self, updates: Sequence[Update]) -> None:
        """Record ``updates`` in one transaction (replacing what each date had)."""
        ...

    def remove(self, dates: Iterable[dt.date]) -> None:
        """Forget ``dates`` (their file is gone or broken)."""
        ...

    def issue(self, date: dt.date) -> Issue | None:
        """The issue indexed for ``date`` (the last good version of a file broken since)."""
        ...

    def candidates(
        self, needle: str, *, on_or_before: dt.date | None = None, day: dt.date | None = None
    ) -> Generator[Piece, None, None]:
        """Pieces that may contain ``needle`` (casefolded, not blank), newest issue first and
        in reading order within an issue; every piece that contains it is among them. Only
        dates ``on_or_before`` a day, or only ``day``, when given. Consume it in the thread
        that called this."""
        ...

    def close(self) -> None:
        """Release connections (and a private temporary index's file)."""
        ...

    #: opened only to read (another process keeps it): :meth:`put` and :meth:`remove` refuse,
    #: and what the index does not hold as it is on disk is scanned instead
    read_only: bool


def pieces_of(issue: Issue) -> list[tuple[int, Section | None, int, str, str]]:
    """The rows of ``issue`` in reading order: ``(item, section, index, title, piece)``."""
    rows: list[tuple[int, Section | None, int, str, str]] = []
    if issue.lede is not None:
        rows.append((0, None, 0, issue.lede, issue.lede))
    counters = dict.fromkeys(Section, 0)
    for number, (section, item) in enumerate(issue.items(), start=1):
        counters[section] += 1
        rows.extend((number, section, counters[section], item.title, p) for p in item.text_pieces())
    return rows


def pack(issue: Issue) -> bytes:
    """``issue`` as stored (its canonical JSON, compressed): what :func:`unpack` reads back."""
    return zlib.compress(issue.model_dump_json().encode("utf-8"), 6)


def unpack(data: bytes) -> Issue:
    """The issue :func:`pack` stored (the same revision)."""
    return Issue.model_validate_json(zlib.decompress(data))


def row_id(date: dt.date, seq: int = 0) -> int:
    """The id of the ``seq``-th piece of the issue of ``date``: ids grow from the newest issue
    to the oldest, and in reading order within one."""
    return ((_LAST_DAY - date.toordinal()) << PIECE_BITS) | seq


def id_range(on_or_before: dt.date | None, day: dt.date | None) -> tuple[int, int]:
    """The ids of the pieces of ``day``, or of every date ``on_or_before`` (all when None)."""
    if day is not None:
        return row_id(day), row_id(day) + (1 << PIECE_BITS) - 1
    low = 0 if on_or_before is None else row_id(on_or_before)
    return low, (1 << 62)


def date_of(row: int) -> dt.date:
    """The date a row id belongs to."""
    return dt.date.fromordinal(_LAST_DAY - (row >> PIECE_BITS))


def phrase(text: str) -> str:
    """``text`` as one FTS5 string (a phrase of its trigrams)."""
    return '"' + text.replace('"', '""') + '"'


def index_path_for(database_url: str) -> Path | None:
    """Where the archive's index file goes for the ledger at ``database_url``: beside an
    SQLite ledger's file (``digest-bot.db`` → ``digest-bot.search.sqlite``); None for an
    in-memory ledger or one on a server."""
    prefix, sep, rest = database_url.partition(":///")
    if not sep or not prefix.startswith("sqlite"):
        return None
    path = rest.split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file::memory:"):
        return None
    ledger = Path(path)
    return ledger.with_name(ledger.stem + ".search.sqlite")


_SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # what each day's index was read from: a table of its own, a few pages for ten years, so
    # reading it at every start does not page through the issues' blobs (schema 2 kept them
    # here: 27 ms instead of 2 at 3,650 issues)
    "CREATE TABLE files(day INTEGER PRIMARY KEY, name TEXT NOT NULL, dev INTEGER, ino INTEGER,"
    " mtime_ns INTEGER, ctime_ns INTEGER, size INTEGER, revision TEXT NOT NULL)",
    "CREATE TABLE issues(day INTEGER PRIMARY KEY, issue BLOB NOT NULL)",
    # head: the place (within the issue) of the piece that is the item's title
    "CREATE TABLE pieces(id INTEGER PRIMARY KEY, item INTEGER NOT NULL, section TEXT,"
    " idx INTEGER NOT NULL, head INTEGER NOT NULL, piece TEXT NOT NULL)",
    # contentless: the text is the pieces' (casefolded, with SENTINEL), never stored twice
    "CREATE VIRTUAL TABLE grams USING fts5(folded, content='',"
    " tokenize='trigram case_sensitive 1')",
    "CREATE VIRTUAL TABLE grams_terms USING fts5vocab(grams, 'row')",
)
_PIECE_MASK = (1 << PIECE_BITS) - 1
#: a candidate piece with its item's title (the item's head piece)
_CANDIDATE = "SELECT p.id, p.item, p.section, p.idx, t.piece, p.piece FROM "
_TITLE = f" JOIN pieces t ON t.id = (p.id & ~{_PIECE_MASK}) + p.head"
_EVERY = f"pieces p{_TITLE} WHERE p.id BETWEEN ? AND ? ORDER BY p.id"
_MATCHING = (
    f"grams g JOIN pieces p ON p.id = g.rowid{_TITLE}"
    " WHERE grams MATCH ? AND g.rowid BETWEEN ? AND ? ORDER BY g.rowid"
)
_SECTIONS = {s.value: s for s in Section}


class SqliteFullText:
    """:class:`FullText` in an SQLite file (WAL: readers never wait for the writer).

    ``path`` None: a private index in a temporary folder, removed by :meth:`close` (for an
    archive opened without a ledger, e.g. in tests). ``root`` is the archive folder the index
    is of: an index of another folder, of another schema or Unicode version, or one SQLite
    cannot read is thrown away and started afresh.
    """

    read_only = False

    def __init__(self, path: Path | None, *, root: Path) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="digest-index-")
            path = Path(self._tmp.name, "index.sqlite")
        self._prepare(path, root)
        self._writer = self._open_writer()

    def _prepare(self, path: Path, root: Path) -> None:
        """What every index holds before its database is opened."""
        self.path = path
        self._identity = {
            "schema": str(SCHEMA_VERSION),
            "unicode": unicodedata.unidata_version,
            "root": os.path.realpath(root),
        }
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._lock = threading.Lock()  # the writer, and the list of readers

    @classmethod
    def kept(cls, path: Path, *, root: Path) -> SqliteFullText | None:
        """The index another process (the bot) keeps at ``path``, opened only to read, when
        it is an index of this version and of the folder ``root``; None when there is none,
        it is of another version or folder, or it cannot be read. Nothing is made, changed
        or thrown away: a one-shot command (``digest-bot archive search``) reads what the bot
        keeps instead of scanning ten years of files, and never disturbs it."""
        self = cls.__new__(cls)
        self._tmp, self.read_only = None, True
        self._prepare(path, root)
        if not path.is_file():
            return None
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            if self._holds_index(conn):
                self._writer = conn
                return self
        except sqlite3.Error as exc:
            log.info("archive index %s: cannot be read (%s); searches scan", self, exc)
        if conn is not None:
            conn.close()
        return None

    def __repr__(self) -> str:
        return f"SqliteFullText({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=10000")
        if self.read_only:
            conn.execute("PRAGMA query_only=1")
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            existed = self.path.exists()
            conn = self._connect()
            if self._fits(conn):
                return conn
            conn.close()
            if existed:
                log.info("archive index %s: of another version or folder, made afresh", self)
        except sqlite3.DatabaseError as exc:
            log.warning("archive index %s: unreadable (%s), building it afresh", self, exc)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")
        conn = self._connect()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", self._identity.items())
        conn.execute("COMMIT")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _fits(self, conn: sqlite3.Connection) -> bool:
        """The database at our path is an index of this version and folder."""
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return self._holds_index(conn)

    def _holds_index(self, conn: sqlite3.Connection) -> bool:
        """The database behind ``conn`` holds an index of this version and folder (reads only)."""
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
        if "meta" not in tables:
            return False
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        return meta == self._identity and {"files", "issues", "grams", "grams_terms"} <= tables

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only=1")
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        return conn

    def indexed(self) -> dict[dt.date, Indexed]:
        rows = self._reader().execute(
            "SELECT day, name, dev, ino, mtime_ns, ctime_ns, size, revision FROM files"
        )
        return {
            dt.date.fromordinal(day): Indexed(name, (dev, ino, mt, ct, size), revision)
            for day, name, dev, ino, mt, ct, size, revision in rows
        }

    def put(self, updates: Sequence[Update]) -> None:
        if not updates:
            return
        self._writable()
        with self._lock, self._transaction() as conn:
            for date, info, issue in updates:
                if issue is None:
                    conn.execute(
                        "UPDATE files SET name = ?, dev = ?, ino = ?, mtime_ns = ?, ctime_ns = ?,"
                        " size = ? WHERE day = ?",
                        (info.name, *info.key, date.toordinal()),
                    )
                    continue
                _forget(conn, date)
                rows = [(row_id(date, n), *row) for n, row in enumerate(_rows(issue))]
                conn.executemany("INSERT INTO pieces VALUES (?, ?, ?, ?, ?, ?)", rows)
                conn.executemany(
                    "INSERT INTO grams(rowid, folded) VALUES (?, ?)",
                    [(r[0], r[-1].casefold() + SENTINEL) for r in rows],
                )
                day = date.toordinal()
                conn.execute(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (day, info.name, *info.key, info.revision),
                )
                conn.execute("INSERT OR REPLACE INTO issues VALUES (?, ?)", (day, pack(issue)))

    def issue(self, date: dt.date) -> Issue | None:
        row = (
            self._reader()
            .execute("SELECT issue FROM issues WHERE day = ?", (date.toordinal(),))
            .fetchone()
        )
        return None if row is None else unpack(row[0])

    def remove(self, dates: Iterable[dt.date]) -> None:
        days = sorted(set(dates))
        if not days:
            return
        self._writable()
        with self._lock, self._transaction() as conn:
            for date in days:
                _forget(conn, date)
                conn.execute("DELETE FROM files WHERE day = ?", (date.toordinal(),))
                conn.execute("DELETE FROM issues WHERE day = ?", (date.toordinal(),))

    def _writable(self) -> None:
        if self.read_only:
            raise PermissionError(f"{self}: opened only to read (another process keeps it)")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def optimize(self) -> None:
        """Merge the index's segments into one (after a large build: fewer lookups a query)."""
        self._writable()
        with self._lock:
            self._writer.execute("INSERT INTO grams(grams) VALUES ('optimize')")

    def candidates(
        self, needle: str, *, on_or_before: dt.date | None = None, day: dt.date | None = None
    ) -> Generator[Piece, None, None]:
        if "\x00" in needle:  # no piece holds a control character (nor could FTS5 take it)
            return
        low, high = id_range(on_or_before, day)
        conn = self._reader()
        if len(needle) >= 3:
            match: str | None = phrase(needle)
        else:
            terms = conn.execute(
                "SELECT term FROM grams_terms WHERE term >= ? AND term < ? LIMIT ?",
                (needle, needle + "\U0010ffff", FEW_TERMS + 1),
            ).fetchall()
            if not terms:
                return
            # common (many terms): every piece, newest first; a page of hits comes soon
            match = " OR ".join(phrase(t) for (t,) in terms) if len(terms) <= FEW_TERMS else None
        if match is None:
            cursor = conn.execute(_CANDIDATE + _EVERY, (low, high))
        else:  # the index drives, in id order: reading stops with the last page of hits
            cursor = conn.execute(_CANDIDATE + _MATCHING, (match, low, high))
        try:
            while page := cursor.fetchmany(_PAGE):
                for rid, item, section, index, title, piece in page:
                    yield Piece(date_of(rid), item, _SECTIONS.get(section), index, title, piece)
        finally:
            cursor.close()

    def close(self) -> None:
        with self._lock:
            for conn in [self._writer, *self._readers]:
                conn.close()
            self._readers.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _rows(issue: Issue) -> list[tuple[int, str | None, int, int, str]]:
    """The pieces of ``issue`` as stored: ``(item, section, index, head, piece)``."""
    out: list[tuple[int, str | None, int, int, str]] = []
    head, last = 0, -1
    for n, (item, section, index, _title, piece) in enumerate(pieces_of(issue)):
        if item != last:
            head, last = n, item
        out.append((item, None if section is None else section.value, index, head, piece))
    return out


def _forget(conn: sqlite3.Connection, date: dt.date) -> None:
    """Delete the pieces of ``date`` and their index entries (a contentless index is told
    the text each row was indexed with)."""
    low, high = id_range(None, date)
    old = conn.execute("SELECT id, piece FROM pieces WHERE id BETWEEN ? AND ?", (low, high))
    conn.executemany(
        "INSERT INTO grams(grams, rowid, folded) VALUES ('delete', ?, ?)",
        [(rid, piece.casefold() + SENTINEL) for rid, piece in old.fetchall()],
    )
    conn.execute("DELETE FROM pieces WHERE id BETWEEN ? AND ?", (low, high))
