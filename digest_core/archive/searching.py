"""The archive's search: its persistent full-text index kept in step with the folder, and the
scan that answers for files the index does not hold yet (or for an archive without an index).

The index (:mod:`digest_core.archive.fulltext`) records, per date, the file and the stat key it
was read from; the keeper compares that with the archive's listing, so what changed while the
bot was down is read again at start and nothing else. A date whose file changed since it was
indexed is *stale*: a search brings up to :data:`INLINE_INDEX` stale dates up to date first
(a new or corrected issue costs one parse and one transaction); with more (a first start, a
restored folder) the index is brought up to date in a background thread, and meanwhile each
search reads the index for the dates it holds and scans the stale ones, merged newest first.

Indexing never keeps the parsed issues: the archive holds in memory only the issues it
served, whatever the size of the archive.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import itertools
import logging
import operator
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from digest_core.archive.files import FileEntry, StatKey
from digest_core.archive.fulltext import (
    FullText,
    Indexed,
    Piece,
    SqliteFullText,
    Update,
    index_path_for,
)
from digest_core.archive.scan import RawTest, SearchHit, hits_in
from digest_core.heap import freeze_start_up
from digest_core.models import Issue

if TYPE_CHECKING:
    from digest_core.archive.folder import Archive

log = logging.getLogger(__name__)

#: a search brings at most this many stale dates up to date itself; with more, the index is
#: brought up to date in the background and the search scans them meanwhile
INLINE_INDEX = 32
#: dates written to the index per transaction while it is brought up to date
BATCH = 64
#: the key a last good version is indexed under (the file now is broken)
NO_KEY: StatKey = (0, 0, 0, 0, 0)
#: after writing this many dates, the index's segments are merged (fewer lookups a query)
OPTIMIZE_AFTER = 256


def index_for(database_url: str, root: Path) -> Path | FullText | bool:
    """The search index of the archive at ``root`` for the ledger at ``database_url`` (what
    :class:`~digest_core.archive.folder.Archive` takes as ``index``): an SQLite file beside an
    SQLite ledger, tables in a PostgreSQL ledger's database (pg_trgm), else (an in-memory
    ledger) a private temporary index. Nothing is opened yet."""
    if database_url.startswith(("postgresql", "postgres")):
        from digest_core.archive.pgtrgm import PgFullText

        return PgFullText(database_url, root=root)
    return index_path_for(database_url) or True


def hits_of(rows: Iterable[Piece], needle: str) -> Iterator[SearchHit]:
    """The hits among candidate ``rows`` (in index order): per item, the first piece that
    really contains ``needle`` (casefolded), as :func:`~digest_core.archive.scan.hits_in`."""
    last: tuple[dt.date, int] | None = None
    for row in rows:
        item = (row.date, row.item)
        if item != last and needle in row.text.casefold():
            last = item
            yield SearchHit(row.date, row.section, row.number, row.title, row.text)


def _batched(items: Iterable[dt.date], size: int) -> Iterator[list[dt.date]]:
    """``items`` in lists of ``size`` (the last may be shorter)."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


#: the start-up's objects were frozen (:func:`_freeze_start_up`), once per process
_start_up_frozen = threading.Event()


def _freeze_start_up() -> None:
    """After the first background build of a process: what is alive then (the modules, the
    listing of the archive, the index's state) lives as long as the process, so it is frozen
    out of the collector's full passes (``gc.freeze``), once. Otherwise each full pass walks
    it all, and one (45-50 ms with ten years of issues) lands on whichever readers' commands
    run then: it was the /search p99 under 200 readers at 3,650 issues. A delivery's end gives
    frozen objects back to the collector (:func:`digest_core.heap.freeze_start_up`)."""
    if not _start_up_frozen.is_set():
        _start_up_frozen.set()
        freeze_start_up()


class Searcher:
    """The search side of one :class:`~digest_core.archive.folder.Archive` (see the module).

    ``index``: True for a private temporary index (an archive opened without a ledger), a path
    for an SQLite index file, a :class:`FullText` to use, or False for none (every search
    scans: a one-shot CLI). Shares the archive's lock; nothing is opened until first needed.
    """

    def __init__(self, archive: Archive, index: bool | Path | FullText) -> None:
        self._archive = archive
        self._lock = archive._lock
        self._wanted = index
        self._store: FullText | None = None
        self._opening = threading.Lock()
        self._indexed: dict[dt.date, Indexed] | None = None  # None: not read from the store yet
        #: dates whose file is not what the index holds (and not known to be broken)
        self._stale: set[dt.date] = set()
        #: dates the index holds but the folder no longer has
        self._gone: set[dt.date] = set()
        #: the keys of broken files already dealt with (their rows dropped, or kept for a last
        #: good version the archive serves), by date
        self._handled: dict[dt.date, StatKey] = {}
        self._builder: threading.Thread | None = None
        self._sync_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._wanted is not False

    # ------------------------------------------------------------ what the index holds

    def _open(self) -> FullText | None:
        """The index, opened (and read) on first use; None without one."""
        if self._indexed is not None or not self.enabled:
            return self._store
        with self._opening:
            if self._indexed is None:
                store = self._make_store()
                if store is None:
                    self._wanted = False
                    return None
                self._archive.priority.step()
                indexed = store.indexed()
                self._archive.priority.step()
                with self._lock:
                    self._store, self._indexed = store, indexed
                    self._restale()
        return self._store

    def _make_store(self) -> FullText | None:
        wanted = self._wanted
        if not isinstance(wanted, bool | Path):
            return wanted
        path = wanted if isinstance(wanted, Path) else None
        try:
            return SqliteFullText(path, root=self._archive.root)
        except Exception:  # no FTS5 in this SQLite, an unwritable folder: search still works
            log.exception("archive %s: cannot open its search index; searches scan", self._archive)
            return None

    def listing_changed(self, *, listed: bool = True) -> None:
        """The archive adopted a new listing (called under its lock); not ``listed``: the
        folder could not be listed (its dates are not gone from the index for that)."""
        if self._indexed is not None:
            self._restale(listed=listed)

    def _restale(self, *, listed: bool = True) -> None:
        assert self._indexed is not None
        used = self._archive._used
        self._stale = {d for d, e in used.items() if not self._fresh(d, e)}
        if listed and self._archive._listed_ns:
            self._gone = {d for d in self._indexed if d not in used}

    def _fresh(self, date: dt.date, entry: FileEntry) -> bool:
        assert self._indexed is not None
        held = self._indexed.get(date)
        if held is not None and held.key == entry.key and held.name == entry.path.name:
            return True
        return entry.key is not None and self._handled.get(date) == entry.key

    def serves(self, entry: FileEntry) -> bool:
        """The index holds ``entry``'s file as it is now: it loaded (no need to parse it to
        know that the archive can serve its date)."""
        indexed = self._indexed
        if indexed is None or entry.date is None:
            return False
        held = indexed.get(entry.date)
        return held is not None and held.key == entry.key and held.name == entry.path.name

    def last_good(self, date: dt.date) -> Issue | None:
        """The issue the index holds for ``date``: the last good version of a file that is
        broken now (None without an index or when it holds none)."""
        store = self._open() if self.enabled else None
        if store is None or self._indexed is None or date not in self._indexed:
            return None
        return store.issue(date)

    # ------------------------------------------------------------ bringing it up to date

    def build(self) -> int:
        """Bring the index up to date with the folder (a no-op without an index); how many
        files were read into it."""
        if not self.enabled:
            return 0
        self._archive.refresh()
        store = self._open()
        if store is None or store.read_only:
            return 0
        with self._lock:
            stale = sorted(self._stale, reverse=True)  # the newest first: what readers ask
        written = self._sync(stale)
        store = self._store
        if written >= OPTIMIZE_AFTER and isinstance(store, SqliteFullText):
            store.optimize()
        return written

    def _prepare(self) -> set[dt.date]:
        """Before a search: bring a few stale dates up to date, or start the background build
        for many; the dates still stale."""
        store = self._open()
        if store is None:
            return set()
        with self._lock:
            stale, gone = sorted(self._stale, reverse=True), bool(self._gone)
        if store.read_only:
            pass  # another process keeps it: what it does not hold as it is now is scanned
        elif len(stale) > INLINE_INDEX:
            self.in_background()
        elif stale or gone:
            self._sync(stale)
        with self._lock:
            return set(self._stale)

    def _sync(self, dates: Iterable[dt.date]) -> int:
        """Read the files of ``dates`` into the index (and forget what is gone); how many
        dates were written."""
        store = self._store
        assert store is not None
        written = 0
        with self._sync_lock:
            with self._lock:
                gone, self._gone = self._gone, set()
            self._drop(store, gone)
            updates: list[Update] = []
            broken: list[tuple[dt.date, StatKey, bool]] = []
            for batch in _batched(dates, BATCH):
                self._archive.priority.step()
                for date in batch:
                    self._read(date, updates, broken)
                store.put(updates)
                self._adopt(updates, broken, store)
                written += len(updates)
                updates, broken = [], []
        return written

    def _read(
        self,
        date: dt.date,
        updates: list[Update],
        broken: list[tuple[dt.date, StatKey, bool]],
    ) -> None:
        """Read the file of ``date`` for the index: an update, or a broken file to deal with."""
        archive = self._archive
        with self._lock:
            entry = archive._used.get(date)
            held = None if self._indexed is None else self._indexed.get(date)
        if entry is None or entry.key is None:
            return
        issue, error = archive._issue(entry, keep=False)
        if issue is None or error is not None:
            # broken: a last good version the archive serves is what is found; otherwise
            # the date's rows go
            broken.append((date, entry.key, issue is not None))
        if issue is None:
            return
        same = held is not None and held.revision == issue.revision
        if error is not None and same:
            return
        # a last good version is held under no file's key: a restart reads the file again
        key = entry.key if error is None else NO_KEY
        info = Indexed(entry.path.name, key, issue.revision)
        updates.append((date, info, None if same else issue))

    def _adopt(
        self, updates: list[Update], broken: list[tuple[dt.date, StatKey, bool]], store: FullText
    ) -> None:
        """Note what was written (and drop the rows of broken files without a good version)."""
        store.remove(d for d, _, keep in broken if not keep)
        with self._lock:
            assert self._indexed is not None
            used = self._archive._used
            for date, info, _ in updates:
                self._indexed[date] = info
                entry = used.get(date)
                if entry is not None and entry.key == info.key:
                    self._stale.discard(date)
            for date, key, keep in broken:
                if not keep:
                    self._indexed.pop(date, None)
                self._handled[date] = key
                entry = used.get(date)
                if entry is not None and entry.key == key:
                    self._stale.discard(date)

    def _drop(self, store: FullText, gone: set[dt.date]) -> None:
        if not gone:
            return
        store.remove(gone)
        with self._lock:
            assert self._indexed is not None
            for date in gone:
                if date not in self._archive._used:
                    self._indexed.pop(date, None)

    def in_background(self) -> bool:
        """Start :meth:`build` in a background thread; False without an index or while one
        runs. Returns at once."""
        if not self.enabled:
            return False
        with self._lock:
            if self._builder is not None and self._builder.is_alive():
                return False
            name = f"archive-index {self._archive.root}"
            self._builder = threading.Thread(target=self._build_quietly, name=name, daemon=True)
            self._builder.start()
            return True

    @property
    def building(self) -> bool:
        with self._lock:
            return self._builder is not None and self._builder.is_alive()

    def _build_quietly(self) -> None:
        started = time.perf_counter()
        try:
            with self._archive.priority.background():
                read = self.build()
        except Exception:  # a background thread has nobody to raise to
            log.exception("archive %s: bringing the search index up to date failed", self._archive)
        else:
            log.info(
                "archive %s: search index built (%d issues, %d files read, %.1f s)",
                self._archive.root,
                len(self._indexed or ()),
                read,
                time.perf_counter() - started,
            )
            _freeze_start_up()

    # ------------------------------------------------------------ searching

    def search(self, needle: str, limit: int, on_or_before: dt.date | None) -> list[SearchHit]:
        """Hits of ``needle`` (casefolded, not blank), newest first, at most ``limit``."""
        stale = self._prepare() if self.enabled else None
        archive = self._archive
        with self._lock:
            dates, used = archive._dates, archive._used
        store = self._store
        if stale is None or store is None:
            return list(itertools.islice(self._scan(needle, reversed(dates), on_or_before), limit))
        rows = store.candidates(needle, on_or_before=on_or_before)
        with contextlib.closing(rows):
            current = (r for r in rows if r.date in used and r.date not in stale)
            behind = [d for d in reversed(dates) if d in stale] if stale else []
            scanned = self._scan(needle, behind, on_or_before)
            merged = heapq.merge(
                hits_of(current, needle), scanned, key=operator.attrgetter("date"), reverse=True
            )
            return list(itertools.islice(merged, limit))

    def hits_on(self, date: dt.date, needle: str) -> list[SearchHit]:
        """The hits of ``needle`` in the issue of ``date`` (the index's rows when it holds the
        date's file as it is, else the parsed issue)."""
        archive = self._archive
        with self._lock:
            entry = archive._used.get(date)
        if entry is None:
            return []
        store = self._open() if self.enabled else None
        if store is not None and self.serves(entry):
            rows = store.candidates(needle, day=date)
            with contextlib.closing(rows):
                return list(hits_of(rows, needle))
        issue = archive._issue(entry)[0]
        return [] if issue is None else hits_in(issue, needle)

    def _scan(
        self, needle: str, dates: Iterable[dt.date], on_or_before: dt.date | None
    ) -> Iterator[SearchHit]:
        """Hits in the files of ``dates`` (newest first), parsed without being kept; a text
        file is ruled out on its raw bytes first."""
        archive = self._archive
        test = RawTest.of(needle)
        with self._lock:
            used = archive._used
        for date in dates:
            entry = used.get(date)
            if entry is None or (on_or_before is not None and date > on_or_before):
                continue
            if not archive._may_contain(entry, test):
                continue
            issue = archive._issue(entry, keep=False)[0]
            if issue is not None:
                yield from hits_in(issue, needle)

    def close(self) -> None:
        """Close the index (the archive can still scan)."""
        with self._opening:
            store, self._store, self._indexed = self._store, None, None
            self._wanted = False
        if store is not None:
            store.close()
