"""Find, list and search the dated issue files of an archive folder."""

from __future__ import annotations

import bisect
import builtins
import datetime as dt
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from digest_core.archive.files import (
    FileEntry,
    StatKey,
    classify,
    groups_around,
    looks_like_issue,
    newest_first,
    of_date,
    pick,
    real_root,
    stat_key,
)
from digest_core.archive.fulltext import FullText
from digest_core.archive.priority import ReaderFirst
from digest_core.archive.scan import RawTest, SearchHit, read_head
from digest_core.archive.searching import Searcher
from digest_core.errors import IssueFormatError, IssueNotFound
from digest_core.loading import MAX_ISSUE_BYTES, load_issue
from digest_core.models import Issue

log = logging.getLogger(__name__)


def _entry_date(entry: FileEntry) -> dt.date:
    assert entry.date is not None  # the dated entries only
    return entry.date


def _served_dates(groups: Iterator[builtins.list[FileEntry]]) -> Iterator[dt.date]:
    """The dates of the entries of ``groups`` that lead to a file, as :meth:`Archive.entries`
    lists them."""
    for group in groups:
        for entry in group:
            if entry.date is not None and entry.key is not None:
                yield entry.date


__all__ = ["Archive", "ArchiveEntry", "SearchHit"]


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """One issue file of the archive and what became of loading it.

    ``issue`` is what the archive serves for ``date`` from this file: the file's own issue, or the
    last good version of that date when the file is broken now (``stale``). ``problem`` says why
    the file did not load, or why it is ignored: ``used_instead`` is then the file that wins.
    """

    date: dt.date
    path: Path
    issue: Issue | None
    problem: IssueFormatError | None
    used_instead: Path | None = None

    @property
    def loaded(self) -> bool:
        """The file itself loaded and is served."""
        return self.issue is not None and self.problem is None

    @property
    def stale(self) -> bool:
        """The file is broken and the last good version of its date is served instead."""
        return self.issue is not None and self.problem is not None

    def describe(self) -> str:
        """One line for listings: date, file name and status (not the problem's detail)."""
        if self.used_instead is not None:
            status = f"ignored, {self.used_instead.name} is used for this date"
        elif self.issue is None:
            status = "broken"
        elif self.problem is None:
            status = f"loaded, revision {self.issue.revision}"
        else:
            status = f"broken, serving the last good version (revision {self.issue.revision})"
        return f"{self.date}  {self.path.name}  {status}"


@dataclass(frozen=True, slots=True)
class _Loaded:
    key: StatKey  # the file's identity and (mtime, ctime, size) when it was read
    issue: Issue | None
    error: IssueFormatError | None


#: a listing taken less than this after the folder last changed is not trusted: a change in the
#: same timestamp tick would not move the folder's mtime (2 s covers FAT and SMB; ext4 is ~4 ms)
_RACY_NS = 2_000_000_000


class Archive:
    """The issues stored as dated files in one folder (not its subfolders).

    Which entries are issue files is :mod:`digest_core.archive.files`' rule, shared with
    ``digest-bot validate``: files named exactly ``YYYY-MM-DD.txt`` (or ``.json``, ``.yaml``,
    ``.yml``) that are regular files inside the folder. When several share a date, the
    ``.txt`` wins over ``.json`` over ``.yaml``: the published text is what editors fix, and the
    others are reported as problems so the duplication gets cleaned up. Misnamed files, links
    out of the folder, FIFOs and folders are problems too, never opened.

    The listing is kept, not rebuilt per call: each call stats the folder (one system call) and
    lists it again only when its mtime moved (a file added, removed or renamed over); every
    ``restat_seconds`` every entry is stat'ed again, which catches files rewritten in place.
    The file an issue is served from is stat'ed on every :meth:`on`/:meth:`latest`, so a
    correction is served at once. A file is parsed again only when it changed. A file that fails
    to load is logged at WARNING once, listed in :attr:`problems` and skipped; if an earlier
    version of it loaded, that last good version is still served.

    Search uses a persistent full-text index (:mod:`digest_core.archive.searching`): ``index``
    is the path of its SQLite file, a :class:`~digest_core.archive.fulltext.FullText` (e.g. on
    the ledger's PostgreSQL server), True (the default) for a private temporary one, or False
    for none (a one-shot CLI: every search scans the raw text and parses only files that may
    match). :meth:`index_in_background` (``digest-bot run`` calls it at start) brings the index
    up to date with the folder, reading only files that changed since it was written.

    Every method does file I/O and may parse: from async code call it in a thread
    (``asyncio.to_thread``). The archive is thread-safe; parsing happens outside its lock, so one
    huge file being parsed never holds up the others.
    """

    def __init__(
        self, root: Path, *, index: bool | Path | FullText = True, restat_seconds: float = 10.0
    ) -> None:
        self.root = root
        self.restat_seconds = restat_seconds
        self._lock = threading.RLock()
        self._refreshing = threading.Lock()
        self._names: dict[str, tuple[int, FileEntry]] = {}  # name -> (inode, verdict)
        self._dated: builtins.list[FileEntry] = []  # dated entries, by date and rank
        self._used: dict[dt.date, FileEntry] = {}
        self._dates: builtins.list[dt.date] = []  # of _used, sorted
        # (_dated, _used and _dates are replaced, never changed in place: a reference taken
        # under the lock stays a consistent snapshot)
        self._unloaded: set[Path] = set()  # used files not loaded at their current key
        self._misnamed: builtins.list[IssueFormatError] = []
        self._folder_problem: IssueFormatError | None = None
        self._dir_key: tuple[int, int, int] | None = None
        self._listed_ns = 0
        self._restat_at = -math.inf
        self._loaded: dict[Path, _Loaded] = {}
        self._loading: dict[Path, threading.Lock] = {}
        self._last_good: dict[dt.date, Issue] = {}
        self._reported: dict[str, str] = {}  # path -> the problem last logged for it
        #: readers first: the index's background work steps aside while one is served
        self.priority = ReaderFirst()
        self._search = Searcher(self, index)

    def __repr__(self) -> str:
        return f"Archive({str(self.root)!r})"

    # ------------------------------------------------------------ listing

    def refresh(self, *, full: bool = False) -> None:
        """Bring the listing up to date with the folder; cheap when nothing changed.

        With ``full`` (or when ``restat_seconds`` have passed), every entry is stat'ed again.
        While another thread refreshes, this returns at once (unless ``full`` or nothing was
        listed yet): the listing in use is then at most one refresh old, and two hundred
        readers at once do not each rescan the folder.
        """
        wait = full or self._dir_key is None
        if not self._refreshing.acquire(blocking=wait):
            return
        try:
            self._refresh(full=full)
        finally:
            self._refreshing.release()

    def _refresh(self, *, full: bool) -> None:
        now = time.monotonic()
        with self._lock:
            full = full or now - self._restat_at >= self.restat_seconds
            dir_key, listed_before, old = self._dir_key, self._listed_ns, self._names
        # the listing and the stat calls run without the lock: a reader of an issue already
        # listed is not held up by a rescan of ten years of files
        try:
            st = os.stat(self.root)
            key = (st.st_dev, st.st_ino, st.st_mtime_ns)
            if not full and key == dir_key and listed_before - st.st_mtime_ns > _RACY_NS:
                return
            listed_ns = time.time_ns()
            names = self._list_names()
        except OSError as exc:
            detail = f"cannot list the archive folder: {exc.strerror or exc}"
            with self._lock:
                self._folder_problem = IssueFormatError(self.root, None, detail)
                self._report(self._folder_problem)
                self._dir_key = None
                self._set({}, listed=False)
            return
        root_real = real_root(self.root)
        fresh: dict[str, tuple[int, FileEntry]] = {}
        for name, inode in self.priority.paced(names.items()):
            known = old.get(name)
            if known is not None and known[0] == inode and not full:
                fresh[name] = known
            else:
                fresh[name] = (inode, classify(root_real, self.root / name))
        with self._lock:
            if self._listed_ns > listed_ns:
                return  # another thread adopted a newer listing meanwhile
            self._folder_problem = None
            current = self._names
            self._dir_key, self._listed_ns = key, listed_ns
            if (
                full
                or fresh.keys() != current.keys()
                or any(fresh[n] is not current[n] for n in fresh)
            ):
                self._set(fresh)
            if full:
                self._restat_at = now

    def _list_names(self) -> dict[str, int]:
        """The issue-like names of the folder, with their inodes (readers first: see
        :mod:`.priority`). Raises OSError when it cannot be listed."""
        names: dict[str, int] = {}
        with os.scandir(self.root) as it:
            for e in self.priority.paced(it):
                if looks_like_issue(e.name):
                    names[e.name] = e.inode()
        return names

    def _set(self, names: dict[str, tuple[int, FileEntry]], *, listed: bool = True) -> None:
        """Adopt a new listing (under the lock): pick each date's file, drop what is gone
        (not ``listed``: the folder could not be listed, so nothing is known to be gone)."""
        self._names = names
        entries = [entry for _, entry in names.values()]
        self._dated = pick(entries)
        self._misnamed = [e.problem for e in entries if e.date is None and e.problem]
        self._used = {e.date: e for e in self._dated if e.ok and e.date is not None}
        self._dates = sorted(self._used)
        for entry in self._dated:
            if entry.problem is not None and entry.used_instead is None:
                self._report(entry.problem)  # links out, FIFOs: once, like broken files
        for problem in self._misnamed:
            self._report(problem)
        paths = {e.path for e in entries}
        for path in [p for p in self._loaded if p not in paths]:
            del self._loaded[path]
        self._unloaded = {e.path for e in self._used.values() if not self._current(e)}
        self._search.listing_changed(listed=listed)

    def entries(self) -> builtins.list[tuple[dt.date, Path]]:
        """Every issue file as (date, path), by date; for one date the file that is used first.

        Nothing is loaded. Misnamed files and entries that are not regular files inside the
        folder are left out and listed in :attr:`problems`.
        """
        self.refresh()
        with self._lock:
            return [(e.date, e.path) for e in self._dated if e.date and e.key is not None]

    def entry_dates_around(self, date: dt.date) -> tuple[Iterator[dt.date], Iterator[dt.date]]:
        """The dates of :meth:`entries` before ``date`` (newest first) and after it (oldest
        first), read lazily from the listing: finding the neighbours of a day costs a lookup,
        not a copy of ten years of entries (what every ``/today`` asked for)."""
        if self._first_listing_under_way():
            try:
                older, newer = groups_around(self.root, date)
            except OSError:
                pass  # the listing reports it
            else:
                return _served_dates(older), _served_dates(newer)
        self.refresh()
        with self._lock:
            dated = self._dated  # replaced, never changed in place: a consistent snapshot
        lo = bisect.bisect_left(dated, date, key=_entry_date)
        hi = bisect.bisect_right(dated, date, key=_entry_date)

        def walk(indexes: range) -> Iterator[dt.date]:
            for i in indexes:
                entry = dated[i]
                if entry.date is not None and entry.key is not None:
                    yield entry.date

        return walk(range(lo - 1, -1, -1)), walk(range(hi, len(dated)))

    def list(self) -> builtins.list[ArchiveEntry]:
        """Every dated entry with its load status, by date; loads (or reuses) each used file."""
        self.refresh()
        with self._lock:
            dated = builtins.list(self._dated)
        out: builtins.list[ArchiveEntry] = []
        for entry in dated:
            assert entry.date is not None
            if entry.ok:
                issue, error = self._issue(entry)
                out.append(ArchiveEntry(entry.date, entry.path, issue, error))
            else:
                out.append(
                    ArchiveEntry(entry.date, entry.path, None, entry.problem, entry.used_instead)
                )
        return out

    @property
    def problems(self) -> builtins.list[IssueFormatError]:
        """What is wrong in the folder now: files that fail to load, are ignored or misnamed."""
        entries = self.list()
        with self._lock:
            scan = [*([self._folder_problem] if self._folder_problem else []), *self._misnamed]
        return [*scan, *(e.problem for e in entries if e.problem is not None)]

    def known_problems(self) -> builtins.list[IssueFormatError]:
        """The problems found so far, without loading any file that was not loaded yet."""
        with self._lock:
            out = [*([self._folder_problem] if self._folder_problem else []), *self._misnamed]
            for entry in self._dated:
                cached = self._loaded.get(entry.path)
                if entry.problem is not None:
                    out.append(entry.problem)
                elif cached is not None and cached.key == entry.key and cached.error is not None:
                    out.append(cached.error)
        return out

    def dates(self) -> builtins.list[dt.date]:
        """The dates the archive can serve an issue for, oldest first (loads what it must)."""
        self.refresh()
        with self._lock:
            unloaded = [e for e in self._used.values() if e.path in self._unloaded]
        for entry in unloaded:
            if not self._search.serves(entry):  # the index knows it loads
                self._issue(entry)
        with self._lock:
            return [d for d in self._dates if self._serves(self._used[d])]

    def issues(self) -> builtins.list[Issue]:
        """Every issue the archive serves, oldest first (loading what it must): what
        :meth:`dates` and :meth:`on` for each give, with the folder looked at once, not per
        date (a site rebuilt just after a new file would otherwise list the folder again for
        each of ten years of dates while the new listing is too recent to trust)."""
        self.refresh()
        with self._lock:
            dates, used = self._dates, self._used
        out: builtins.list[Issue] = []
        for date in dates:
            issue = self._issue(used[date])[0]
            if issue is not None:
                out.append(issue)
        return out

    def file_of(self, date: dt.date) -> tuple[Path, StatKey] | None:
        """The file the issue of ``date`` is read from and its key as stat'ed now (not the
        listing's), or None when there is none; for seeing whether it is still changing."""
        self.refresh()
        with self._lock:
            entry = self._used.get(date)
        if entry is None:
            return None
        key = stat_key(entry.path)
        return None if key is None else (entry.path, key)

    # ------------------------------------------------------------ serving

    def on(self, date: dt.date) -> Issue:
        """The issue of ``date``.

        Raises:
            IssueNotFound: no file for that date, or its file is broken with no earlier good
                version. The message is for readers: bilingual, naming the nearest dates that
                have an issue, and without paths or the editor's detail (that is logged and in
                :attr:`problems`; the broken file's error is the exception's ``__cause__``).
        """
        early = self._on_before_listing(date)
        if early is not None:
            return early
        self.refresh()
        with self._lock:
            entry = self._used.get(date)
        if entry is None:
            raise IssueNotFound(self._missing(date), date=date)
        issue, error = self._issue(entry)
        if issue is not None:
            return issue
        log.info("archive %s: the issue of %s is not available: %s", self.root, date, error)
        before, after = self._nearest(date)
        zh, en = f"{date} 的日报暂时无法提供", f"The issue of {date} is not available right now"
        raise IssueNotFound(nearest_text(zh, en, before, after), date=date) from error

    def latest(self, *, on_or_before: dt.date | None = None) -> Issue:
        """The newest issue, or the newest dated ``on_or_before`` a day; broken files are skipped.

        Raises:
            IssueNotFound: the archive has no loadable issue on or before that day; the message
                is for readers, as :meth:`on`'s is.
        """
        early = self._before_listing(on_or_before)
        if early is not None:
            return early
        self.refresh()
        with self._lock:
            dates, used = self._dates, self._used
        end = len(dates) if on_or_before is None else bisect.bisect_right(dates, on_or_before)
        for i in range(end - 1, -1, -1):
            issue = self._issue(used[dates[i]])[0]
            if issue is not None:
                return issue
        if on_or_before is None:
            raise IssueNotFound(_NO_ISSUE_YET)
        first = self._nearest(on_or_before)[1]
        if first is None:
            raise IssueNotFound(_NO_ISSUE_YET, date=on_or_before)
        raise IssueNotFound(
            f"{on_or_before} 及之前还没有日报；最早的一期是 {first}。\n"
            f"There is no issue on or before {on_or_before}; the earliest is {first}.",
            date=on_or_before,
        )

    def _first_listing_under_way(self) -> bool:
        """The folder is being listed for the first time in another thread (a bot just
        started): what one reader needs is then looked up by name, not waited for."""
        return self._dir_key is None and (self._refreshing.locked() or self.indexing)

    def _on_before_listing(self, date: dt.date) -> Issue | None:
        """The issue of ``date`` while the folder is being listed for the first time (see
        :meth:`_before_listing`): that date's files are looked at alone. None (ask the
        listing) when not at start, or when they hold no good issue."""
        return self._good_before_listing(
            lambda: next((e for e in of_date(self.root, date) if e.ok), None)
        )

    def _before_listing(self, on_or_before: dt.date | None) -> Issue | None:
        """The newest issue (dated ``on_or_before`` a day) while the folder is being listed
        for the first time in another thread (a bot just started): the newest exactly named
        files are looked at alone, so the first reader does not wait for ten years of files to
        be listed. None (ask the listing) when not at start, or when the newest file found is
        not a good issue: every other case is the listing's."""

        def newest() -> FileEntry | None:
            if on_or_before is not None:  # /today: the day's own file, if any, is the newest
                found = next((e for e in of_date(self.root, on_or_before) if e.ok), None)
                if found is not None:
                    return found
            groups = newest_first(self.root, on_or_before)
            return next((e for e in next(groups, []) if e.ok), None)

        return self._good_before_listing(newest)

    def _good_before_listing(self, find: Callable[[], FileEntry | None]) -> Issue | None:
        """The issue of the file ``find`` picks, while the folder is first being listed; None
        when not at start, when nothing was found (or the folder could not be read), or when
        the file holds no good issue."""
        if not self._first_listing_under_way():
            return None
        try:
            entry = find()
        except OSError:
            return None
        if entry is None:
            return None
        issue, error = self._issue(entry)
        return issue if error is None else None

    # ------------------------------------------------------------ search

    def search(
        self, word: str, *, limit: int = 20, on_or_before: dt.date | None = None
    ) -> builtins.list[SearchHit]:
        """Items (and ledes) containing ``word``, ignoring case; newest issue first (only issues
        dated ``on_or_before`` a day, if given).

        Titles, paragraphs, reading questions and ledes are searched; an item is one hit however
        often the word occurs in it. At most ``limit`` hits are returned. The index
        (:mod:`digest_core.archive.searching`) only picks candidates; every hit is checked
        against the issue's text.

        Raises:
            ValueError: ``word`` is blank or ``limit`` is below 1.
        """
        needle = word.replace("\t", " ").strip().casefold()  # as the loader reads a tab
        if not needle:
            raise ValueError("search for a word, not a blank")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.refresh()
        return self._search.search(needle, limit, on_or_before)

    def hits_on(self, date: dt.date, word: str) -> builtins.list[SearchHit]:
        """The items (and lede) of the issue of ``date`` containing ``word``, ignoring case, as
        :meth:`search` finds them (from the index when it holds the day's file as it is);
        empty for a day without a readable issue."""
        needle = word.replace("\t", " ").strip().casefold()
        if not needle:
            return []
        self.refresh()
        return self._search.hits_on(date, needle)

    def index_in_background(self) -> bool:
        """Bring the search index up to date in a background thread (a long-running process
        calls this at start, so the first search finds it ready; after a restart only files
        changed meanwhile are read); True if that was started, False without an index or
        while it runs. Returns at once: it does no file I/O in the caller's thread."""
        return self._search.in_background()

    @property
    def indexing(self) -> bool:
        """The search index is being brought up to date in the background."""
        return self._search.building

    def close(self) -> None:
        """Close the search index (searches scan from then on)."""
        self._search.close()

    def _may_contain(self, entry: FileEntry, test: RawTest) -> bool:
        """Without an index: False only when the file surely does not contain the needle.

        A published text file holds every piece of its issue verbatim, so a raw substring test
        rules it out without parsing; JSON/YAML (escapes) and files served from a last good
        version are always checked for real.
        """
        with self._lock:
            if self._current(entry) or entry.date in self._last_good:
                return True
        if entry.path.suffix != ".txt" or test.for_real:
            return True  # escapes; a line break or an odd space is checked for real
        try:  # the listing's size, not a 1 MiB buffer per file: that was most of a scan
            raw = read_head(
                entry.path, MAX_ISSUE_BYTES + 1, expect=entry.key[4] if entry.key else 0
            )
        except OSError:
            return True  # loading reports it
        return test.may_match(raw)

    # ------------------------------------------------------------ loading

    def _serves(self, entry: FileEntry) -> bool:
        """An issue is served for ``entry``'s date, as far as is known (under the lock)."""
        cached = self._loaded.get(entry.path)
        if cached is not None and cached.issue is not None:
            return True
        return entry.date in self._last_good or self._search.serves(entry)

    def _current(self, entry: FileEntry) -> bool:
        cached = self._loaded.get(entry.path)
        return cached is not None and cached.key == entry.key

    def _issue(
        self, entry: FileEntry, *, keep: bool = True
    ) -> tuple[Issue | None, IssueFormatError | None]:
        """What is served for ``entry``'s date: its issue, or the last good one with the error.

        The file is stat'ed first (so an edit in place is seen at once) and parsed only when
        its key changed since it was last read; parsing holds no archive lock. Without
        ``keep`` (indexing, scanning) a parsed issue is not kept in memory.
        """
        assert entry.date is not None
        date, path = entry.date, entry.path
        if stat_key(path) != entry.key:  # rewritten in place (or gone) since it was listed
            entry = self._reclassify(entry)
            if entry.problem is not None or entry.key is None:
                return self._last_good_of(date), entry.problem
        with self._lock:
            lock = self._loading.setdefault(path, threading.Lock())
        with lock:
            with self._lock:
                cached = self._loaded.get(path)
            if cached is None or cached.key != entry.key:
                assert entry.key is not None
                cached = self._load(date, path, entry.key, keep=keep)
        if cached.issue is not None:
            return cached.issue, None
        return self._last_good_of(date), cached.error

    def _last_good_of(self, date: dt.date) -> Issue | None:
        """The last good version of ``date``'s issue: in memory, or the one the search index
        holds (the file broke while the bot was down, or before it was served)."""
        with self._lock:
            issue = self._last_good.get(date)
        if issue is None:
            issue = self._search.last_good(date)
            if issue is not None:
                with self._lock:
                    issue = self._last_good.setdefault(date, issue)
        return issue

    def _reclassify(self, entry: FileEntry) -> FileEntry:
        with self._lock:
            fresh = classify(real_root(self.root), entry.path)
            if self._dir_key is None:  # not listed yet (serving before the first listing)
                return fresh
            names = dict(self._names)
            inode = fresh.key[1] if fresh.key else -1
            names[entry.path.name] = (inode, fresh)
            self._set(names)
            return next((e for e in self._dated if e.path == entry.path), fresh)

    def _load(self, date: dt.date, path: Path, key: StatKey, *, keep: bool = True) -> _Loaded:
        """Parse ``path`` (no lock held) and record the outcome (a good issue only with
        ``keep``)."""
        try:
            issue = load_issue(path, date=date)
        except IssueFormatError as err:
            loaded = _Loaded(key, None, err)
            self._report(err)
        except Exception as exc:  # a loader bug must not take listing, search or posts down
            why = str(exc) if len(str(exc)) <= 200 else str(exc)[:199] + "…"
            detail = f"could not be loaded (unexpected {type(exc).__name__}: {why})"
            unexpected = IssueFormatError(path, None, detail)
            loaded = _Loaded(key, None, unexpected)
            self._report(unexpected, unexpected=exc)
        else:
            loaded = _Loaded(key, issue, None)
            log.debug("loaded %s (revision %s)", path, issue.revision)
        with self._lock:
            if loaded.issue is not None:
                self._reported.pop(str(path), None)
                if not keep:
                    return loaded
                self._last_good[date] = loaded.issue
            self._loaded[path] = loaded
            used = self._used.get(date)
            if used is not None and used.path == path and used.key == key:
                self._unloaded.discard(path)
        return loaded

    def _report(self, error: IssueFormatError, *, unexpected: Exception | None = None) -> None:
        """Log a problem at WARNING (ERROR with the traceback when ``unexpected``), once until
        it changes or the file loads again."""
        with self._lock:
            if self._reported.get(error.path) == str(error):
                return
            self._reported[error.path] = str(error)
        if unexpected is not None:
            log.error("archive %s: skipping %s", self.root, error, exc_info=unexpected)
        else:
            log.warning("archive %s: skipping %s", self.root, error)

    def _missing(self, date: dt.date) -> str:
        """The reader's message for a date without an issue file."""
        before, after = self._nearest(date)
        if before is None and after is None:
            return _NO_ISSUE_YET
        return nearest_text(f"没有 {date} 的日报", f"No issue for {date}", before, after)

    def _nearest(self, date: dt.date) -> tuple[dt.date | None, dt.date | None]:
        """The closest dates before and after ``date`` that have an issue to serve."""
        with self._lock:
            dates, used = self._dates, self._used
        at = bisect.bisect_left(dates, date)
        earlier = (used[dates[i]] for i in range(at - 1, -1, -1))
        later = (used[d] for d in itertools.islice(dates, at, None) if d != date)
        before = next((e.date for e in earlier if self._issue(e)[0]), None)
        after = next((e.date for e in later if self._issue(e)[0]), None)
        return before, after


_NO_ISSUE_YET = "还没有任何一期日报。\nThere is no issue yet."


def nearest_text(zh: str, en: str, before: dt.date | None, after: dt.date | None) -> str:
    """``zh；最近的是 …。`` and ``en; the nearest …`` on two lines, in the bot's reply style."""
    near = [d.isoformat() for d in (before, after) if d is not None]
    if not near:
        return f"{zh}。\n{en}."
    if len(near) == 1:
        return f"{zh}；最近的是 {near[0]}。\n{en}; the nearest is {near[0]}."
    return (
        f"{zh}；最近的是 {near[0]} 和 {near[1]}。\n{en}; the nearest are {near[0]} and {near[1]}."
    )
