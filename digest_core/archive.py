"""Find, list and search the dated issue files of an archive folder."""

from __future__ import annotations

import builtins
import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path

from digest_core.errors import IssueFormatError, IssueNotFound
from digest_core.loading import ISSUE_SUFFIXES, date_from_name, load_issue
from digest_core.models import Issue, Section

log = logging.getLogger(__name__)

#: Which file wins when several are dated the same day: the published text, then JSON, then YAML.
_RANK = {".txt": 0, ".json": 1, ".yaml": 2, ".yml": 2}


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
class SearchHit:
    """An item (or a lede) that contains the searched word.

    ``section`` is ``None`` and ``index`` is 0 when the lede matched; otherwise ``index`` counts
    from 1 within the section (always 1 for the headline and the classic review), as
    :meth:`Issue.brief` does. ``text`` is the piece that matched (title, paragraph, question).
    """

    date: dt.date
    section: Section | None
    index: int
    title: str
    text: str

    @property
    def where(self) -> str:
        """Where in the issue: ``重点``, ``简讯 3``, ``经典回顾`` or ``本期重点`` (the lede)."""
        if self.section is None:
            return "本期重点"
        if self.section is Section.BRIEFS:
            return f"{self.section.label} {self.index}"
        return self.section.label

    def describe(self) -> str:
        """One line for listings: ``2026-10-27 · 简讯 3 · title``."""
        return f"{self.date} · {self.where} · {self.title}"


@dataclass(frozen=True, slots=True)
class _Loaded:
    key: tuple[int, int]  # (st_mtime_ns, st_size) of the file when it was read
    issue: Issue | None
    error: IssueFormatError | None


class Archive:
    """The issues stored as dated files in one folder (not its subfolders).

    Files are named ``YYYY-MM-DD<anything>.txt`` (or ``.json``, ``.yaml``, ``.yml``); dotfiles and
    other suffixes are ignored. When several files share a date, the ``.txt`` wins over ``.json``
    over ``.yaml`` (then the shortest name, then alphabetical): the published text is what
    editors fix, and the others are reported as problems so the duplication gets cleaned up.

    Every call looks at the folder again; a file is parsed again only when its (mtime, size)
    changed. A file that fails to load is logged at WARNING once, listed in :attr:`problems` and
    skipped; if an earlier version of it loaded, that last good version is still served.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._loaded: dict[Path, _Loaded] = {}
        self._last_good: dict[dt.date, Issue] = {}
        self._reported: dict[str, str] = {}  # path -> the problem last logged for it
        self._scan_problems: builtins.list[IssueFormatError] = []

    def __repr__(self) -> str:
        return f"Archive({str(self.root)!r})"

    def entries(self) -> builtins.list[tuple[dt.date, Path]]:
        """Every issue file as (date, path), by date; for one date the file that is used first.

        Nothing is loaded. Files whose name is not dated are left out and listed in
        :attr:`problems`.
        """
        found: builtins.list[tuple[dt.date, Path]] = []
        problems: builtins.list[IssueFormatError] = []
        try:
            paths = sorted(self.root.iterdir())
        except OSError as exc:
            detail = f"cannot list the archive folder: {exc.strerror or exc}"
            paths, problems = [], [IssueFormatError(self.root, None, detail)]
        for path in paths:
            if path.name.startswith(".") or path.suffix.lower() not in ISSUE_SUFFIXES:
                continue
            try:
                date = date_from_name(path)
            except IssueFormatError as err:
                problems.append(err)
                continue
            if date is None:
                problems.append(
                    IssueFormatError(
                        path, None, "not named after its date: name issue files YYYY-MM-DD.txt"
                    )
                )
                continue
            try:
                is_file = path.is_file()
            except OSError as exc:
                detail = f"cannot read the file: {exc.strerror or exc}"
                problems.append(IssueFormatError(path, None, detail))
                continue
            if is_file:
                found.append((date, path))
        found.sort(key=lambda e: (e[0], _RANK[e[1].suffix.lower()], len(e[1].name), e[1].name))
        for problem in problems:
            self._report(problem)
        self._scan_problems = problems
        return found

    def list(self) -> builtins.list[ArchiveEntry]:
        """Every issue file with its load status, by date; loads (or reuses) each used file."""
        out: builtins.list[ArchiveEntry] = []
        used: dict[dt.date, Path] = {}
        for date, path in self.entries():
            if date in used:
                winner = used[date]
                out.append(ArchiveEntry(date, path, None, self._duplicate(path, winner), winner))
                continue
            used[date] = path
            issue, error = self._load(date, path)
            out.append(ArchiveEntry(date, path, issue, error))
        return out

    @property
    def problems(self) -> builtins.list[IssueFormatError]:
        """What is wrong in the folder now: files that fail to load, are ignored or misnamed."""
        entries = self.list()
        return [*self._scan_problems, *(e.problem for e in entries if e.problem is not None)]

    def dates(self) -> builtins.list[dt.date]:
        """The dates the archive can serve an issue for, oldest first (loads what it must)."""
        return [date for date, path in self._used().items() if self._load(date, path)[0]]

    def on(self, date: dt.date) -> Issue:
        """The issue of ``date``.

        Raises:
            IssueNotFound: no file for that date, or its file is broken with no earlier good
                version. The message is for readers: bilingual, naming the nearest dates that
                have an issue, and without paths or the editor's detail (that is logged and in
                :attr:`problems`; the broken file's error is the exception's ``__cause__``).
        """
        used = self._used()
        path = used.get(date)
        if path is None:
            raise IssueNotFound(self._missing(used, date), date=date)
        issue, error = self._load(date, path)
        if issue is not None:
            return issue
        log.info("archive %s: the issue of %s is not available: %s", self.root, date, error)
        before, after = self._nearest(used, date)
        zh, en = f"{date} 的日报暂时无法提供", f"The issue of {date} is not available right now"
        raise IssueNotFound(_bilingual(zh, en, before, after), date=date) from error

    def latest(self, *, on_or_before: dt.date | None = None) -> Issue:
        """The newest issue, or the newest dated ``on_or_before`` a day; broken files are skipped.

        Raises:
            IssueNotFound: the archive has no loadable issue on or before that day; the message
                is for readers, as :meth:`on`'s is.
        """
        used = self._used()
        for date, path in sorted(used.items(), reverse=True):
            if on_or_before is not None and date > on_or_before:
                continue
            issue = self._load(date, path)[0]
            if issue is not None:
                return issue
        if on_or_before is None:
            raise IssueNotFound(_NO_ISSUE_YET)
        first = self._nearest(used, on_or_before)[1]
        if first is None:
            raise IssueNotFound(_NO_ISSUE_YET, date=on_or_before)
        raise IssueNotFound(
            f"{on_or_before} 及之前还没有日报；最早的一期是 {first}。\n"
            f"There is no issue on or before {on_or_before}; the earliest is {first}.",
            date=on_or_before,
        )

    def search(self, word: str, *, limit: int = 20) -> builtins.list[SearchHit]:
        """Items (and ledes) containing ``word``, ignoring case; newest issue first.

        Titles, paragraphs, reading questions and ledes are searched; an item is one hit however
        often the word occurs in it. At most ``limit`` hits are returned.

        Raises:
            ValueError: ``word`` is blank or ``limit`` is below 1.
        """
        needle = word.strip().casefold()
        if not needle:
            raise ValueError("search for a word, not a blank")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        hits: builtins.list[SearchHit] = []
        for date, path in sorted(self._used().items(), reverse=True):
            issue = self._load(date, path)[0]
            if issue is None:
                continue
            if issue.lede is not None and needle in issue.lede.casefold():
                hits.append(SearchHit(date, None, 0, issue.lede, issue.lede))
            counters = dict.fromkeys(Section, 0)
            for section, item in issue.items():
                counters[section] += 1
                piece = next((p for p in item.text_pieces() if needle in p.casefold()), None)
                if piece is not None:
                    hits.append(SearchHit(date, section, counters[section], item.title, piece))
            if len(hits) >= limit:
                break
        return hits[:limit]

    def _used(self) -> dict[dt.date, Path]:
        """The file used for each date."""
        used: dict[dt.date, Path] = {}
        for date, path in self.entries():
            used.setdefault(date, path)
        return used

    def _load(self, date: dt.date, path: Path) -> tuple[Issue | None, IssueFormatError | None]:
        """Load ``path`` unless its (mtime, size) is unchanged; fall back to the last good issue."""
        try:
            stat = path.stat()
        except OSError as exc:
            error = IssueFormatError(path, None, f"cannot read the file: {exc.strerror or exc}")
            self._report(error)
            return self._last_good.get(date), error
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._loaded.get(path)
        if cached is None or cached.key != key:
            try:
                issue = load_issue(path, date=date)
            except IssueFormatError as err:
                cached = _Loaded(key, None, err)
                self._report(err)
            except Exception as exc:  # a loader bug must not take listing, search or posts down
                why = str(exc) if len(str(exc)) <= 200 else str(exc)[:199] + "…"
                detail = f"could not be loaded (unexpected {type(exc).__name__}: {why})"
                unexpected = IssueFormatError(path, None, detail)
                cached = _Loaded(key, None, unexpected)
                self._report(unexpected, unexpected=exc)
            else:
                cached = _Loaded(key, issue, None)
                self._last_good[date] = issue
                self._reported.pop(str(path), None)
                log.debug("loaded %s (revision %s)", path, issue.revision)
            self._loaded[path] = cached
        if cached.issue is not None:
            return cached.issue, None
        return self._last_good.get(date), cached.error

    def _duplicate(self, path: Path, winner: Path) -> IssueFormatError:
        error = IssueFormatError(
            path, None, f"ignored: {winner.name} has the same date and is used instead"
        )
        self._report(error)
        return error

    def _report(self, error: IssueFormatError, *, unexpected: Exception | None = None) -> None:
        """Log a problem at WARNING (ERROR with the traceback when ``unexpected``), once until
        it changes or the file loads again."""
        if self._reported.get(error.path) != str(error):
            self._reported[error.path] = str(error)
            if unexpected is not None:
                log.error("archive %s: skipping %s", self.root, error, exc_info=unexpected)
            else:
                log.warning("archive %s: skipping %s", self.root, error)

    def _missing(self, used: dict[dt.date, Path], date: dt.date) -> str:
        """The reader's message for a date without an issue file."""
        before, after = self._nearest(used, date)
        if before is None and after is None:
            return _NO_ISSUE_YET
        return _bilingual(f"没有 {date} 的日报", f"No issue for {date}", before, after)

    def _nearest(
        self, used: dict[dt.date, Path], date: dt.date
    ) -> tuple[dt.date | None, dt.date | None]:
        """The closest dates before and after ``date`` that have an issue to serve."""
        ordered = sorted(used.items())
        before = next((d for d, p in reversed(ordered) if d < date and self._load(d, p)[0]), None)
        after = next((d for d, p in ordered if d > date and self._load(d, p)[0]), None)
        return before, after


_NO_ISSUE_YET = "还没有任何一期日报。\nThere is no issue yet."


def _bilingual(zh: str, en: str, before: dt.date | None, after: dt.date | None) -> str:
    """``zh；最近的是 …。`` and ``en; the nearest …`` on two lines, in the bot's reply style."""
    near = [d.isoformat() for d in (before, after) if d is not None]
    if not near:
        return f"{zh}。\n{en}."
    if len(near) == 1:
        return f"{zh}；最近的是 {near[0]}。\n{en}; the nearest is {near[0]}."
    return (
        f"{zh}；最近的是 {near[0]} 和 {near[1]}。\n{en}; the nearest are {near[0]} and {near[1]}."
    )
