"""Which entries of a folder are issue files: the one rule the archive and `validate` share.

An issue file is named exactly ``YYYY-MM-DD.txt`` (or ``.json``, ``.yaml``, ``.yml``) with
ASCII digits and a lowercase suffix, and is a regular file once links are resolved, inside the
folder. Dotfiles and names with other suffixes are not looked at (never opened). Everything else
that looks like an issue file is a problem: a name the archive would misread (``.TXT``,
``٢٠٢٦-١٢-٠٢.txt``, ``2026-02-30.txt``, ``2026-10-27-fix.txt``), a link leading out of the
folder (never followed: its content is never read, so never quoted), a FIFO, a directory or a
device (never opened: a FIFO would block), and every file but one of a date that has several.
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import logging
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from digest_core.errors import IssueFormatError

log = logging.getLogger(__name__)

#: The issue file suffixes, in the order a date's file is chosen: the published text first.
SUFFIXES: tuple[str, ...] = (".txt", ".json", ".yaml", ".yml")
_RANK = {s: n for n, s in enumerate(SUFFIXES)}

_EXACT = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\.(txt|json|yaml|yml)")
#: a date at the start of a name in any script's digits (\d is Unicode-aware)
_ANY_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
#: a date written some other way: an unpadded month or day (``2026-12-1``), another
#: separator (``2026_12_01``, ``2026.12.01``) or none (``20261201``)
_LOOSE_DATE = re.compile(r"([0-9]{4})(?:([-_./])([0-9]{1,2})\2([0-9]{1,2})|([0-9]{2})([0-9]{2}))")
#: what :func:`check_name` says of a name that carries no date (an undated draft)
NO_DATE = "not named after its date: name issue files YYYY-MM-DD.txt"

#: (st_dev, st_ino, st_mtime_ns, st_ctime_ns, st_size) of the file a name leads to
StatKey = tuple[int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One issue-like entry of a folder and the verdict of the rule on it.

    ``date`` is set when the name is a valid issue name (even if the entry has another
    problem); ``key`` identifies the content it leads to (``None`` when it is not served);
    ``used_instead`` names the file that wins when several are dated the same day.
    """

    path: Path
    date: dt.date | None
    problem: IssueFormatError | None
    key: StatKey | None = None
    used_instead: Path | None = None

    @property
    def ok(self) -> bool:
        """The entry is an issue file the archive serves."""
        return self.problem is None

    @property
    def rank(self) -> tuple[dt.date, int]:
        assert self.date is not None
        return self.date, _RANK.get(self.path.suffix, len(_RANK))


def looks_like_issue(name: str) -> bool:
    """True for names the rule looks at: not a dotfile, an issue suffix in any case."""
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in _RANK


def check_name(path: Path) -> tuple[dt.date | None, str | None]:
    """``(date, None)`` for a valid issue name, else ``(date or None, what is wrong)``.

    The date is returned with a problem when the name is dated but otherwise wrong, and is
    ``None`` with :data:`NO_DATE`'s message when the name carries no date at all.
    """
    name = path.name
    m = _EXACT.fullmatch(name)
    if m is not None:
        try:
            return dt.date(int(m[1]), int(m[2]), int(m[3])), None
        except ValueError as exc:
            day = f"{m[1]}-{m[2]}-{m[3]}"
            return None, f"the file name's date {day} is not a calendar day: {exc}"
    stem, suffix = os.path.splitext(name)
    any_date = _ANY_DATE.match(stem)
    if any_date is None:
        return _loose_date(stem, suffix)
    ascii_date = "".join(_ascii_digit(c) for c in any_date[0])
    try:
        date: dt.date | None = dt.date.fromisoformat(ascii_date)
    except ValueError:
        date = None
    fixed = f"{ascii_date}{suffix.lower()}"
    if ascii_date != any_date[0]:
        detail = f"the date in the name must be written with the digits 0-9: rename it {fixed}"
    elif stem != any_date[0]:
        detail = f"only a date may precede the suffix: rename it {fixed} to publish it"
    else:
        detail = f"the suffix must be lowercase: rename it {fixed}"
    return date, f"{detail} (the archive does not serve it as it is named)"


def _loose_date(stem: str, suffix: str) -> tuple[dt.date | None, str]:
    """A name whose date is written another way than ``YYYY-MM-DD`` is an error that names the
    form (a draft would otherwise pass as undated, and the archive would skip it); a name
    without anything like a date is :data:`NO_DATE`."""
    m = _LOOSE_DATE.match(stem)
    if m is None:
        return None, NO_DATE
    month, day = (m[3], m[4]) if m[2] else (m[5], m[6])
    try:
        date = dt.date(int(m[1]), int(month), int(day))
    except ValueError:
        return None, NO_DATE
    rest = stem[m.end() :]
    fixed = f"{date.isoformat()}{suffix.lower()}"
    detail = (
        f"the date in the name must be written YYYY-MM-DD (four-digit year, two-digit month "
        f"and day, joined by '-'): rename it {fixed}"
    )
    if rest:
        detail += f" (and drop {rest!r}: only the date may precede the suffix)"
    return date, f"{detail} (the archive does not serve it as it is named)"


def _ascii_digit(c: str) -> str:
    return str(unicodedata.digit(c)) if c.isdigit() else c


def check_file(root_real: str, path: Path) -> tuple[StatKey | None, str | None]:
    """``(key, None)`` when ``path`` is a regular file inside ``root_real`` (links resolved),
    else ``(None, what is wrong)``. Nothing is opened; a link is resolved, never read through."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(path)
            if os.path.commonpath([root_real, real]) != root_real:
                return None, "a link that leads out of the folder: not followed"
            try:
                st = os.stat(real)
            except FileNotFoundError:
                return None, "a link to nothing"
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return None, f"not a regular file ({_kind(st.st_mode)}): skipped, never opened"
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size), None


def stat_key(path: Path) -> StatKey | None:
    """The key of the file ``path`` leads to now, or ``None`` if it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a file"


def real_root(root: Path) -> str:
    """The folder with every link resolved: what entries must stay inside."""
    return os.path.realpath(root)


def classify(root_real: str, path: Path) -> FileEntry:
    """The rule applied to one issue-like entry (see :func:`looks_like_issue`)."""
    date, name_problem = check_name(path)
    if name_problem is not None:
        return FileEntry(path, None, IssueFormatError(path, None, name_problem))
    key, file_problem = check_file(root_real, path)
    if file_problem is not None:
        return FileEntry(path, date, IssueFormatError(path, None, file_problem))
    return FileEntry(path, date, None, key)


def pick(entries: Iterable[FileEntry]) -> list[FileEntry]:
    """Every entry, by date and rank, with all but the first good file of a date marked as
    problems (``used_instead``); entries without a valid date come last, by name."""
    dated = sorted((e for e in entries if e.date is not None), key=lambda e: e.rank)
    out: list[FileEntry] = []
    winner: FileEntry | None = None
    for entry in dated:
        if winner is not None and winner.date != entry.date:
            winner = None
        if entry.ok and winner is None:
            winner = entry
        elif entry.ok and winner is not None:
            detail = f"ignored: {winner.path.name} has the same date and is used instead"
            entry = replace(
                entry, problem=IssueFormatError(entry.path, None, detail), used_instead=winner.path
            )
        out.append(entry)
    return out


def newest_first(folder: Path, on_or_before: dt.date | None = None) -> Iterator[list[FileEntry]]:
    """The issue files of ``folder`` that the rule may serve, grouped by date, newest date
    first (each group by rank, as :func:`pick` has it), without looking at any other entry:
    what serving the newest issue needs before the folder is listed in full.

    Only exactly named files can be served, so only they are classified (one ``lstat`` each);
    names are listed and filtered in C. Raises OSError when the folder cannot be listed.
    """
    names = sorted(filter(_EXACT.fullmatch, os.listdir(folder)), reverse=True)
    root, bound = real_root(folder), None if on_or_before is None else on_or_before.isoformat()
    for day, same in itertools.groupby(names, key=lambda n: n[:10]):
        if bound is None or day <= bound:
            yield pick(classify(root, folder / name) for name in same)


def groups_around(
    folder: Path, date: dt.date
) -> tuple[Iterator[list[FileEntry]], Iterator[list[FileEntry]]]:
    """As :func:`newest_first`, the groups of the dates before ``date`` (newest first) and
    those after it (oldest first), each classified only when it is reached: the neighbours of
    a day before the folder is listed in full. Raises OSError when the folder cannot be
    listed."""
    names = sorted(filter(_EXACT.fullmatch, os.listdir(folder)))
    day = date.isoformat()
    # a name of ``day`` is ``day`` + "." + suffix, and "." sorts just before "/"
    lo, hi = bisect.bisect_left(names, day), bisect.bisect_left(names, day + "/")
    root = real_root(folder)

    def groups(chosen: Iterable[str]) -> Iterator[list[FileEntry]]:
        for _, same in itertools.groupby(chosen, key=lambda n: n[:10]):
            yield pick(classify(root, folder / name) for name in same)

    return groups(reversed(names[:lo])), groups(names[hi:])


def of_date(folder: Path, date: dt.date) -> list[FileEntry]:
    """The files of ``folder`` the rule may serve for ``date``, as :func:`pick` has them,
    looked up by name (one ``lstat`` per suffix) without listing the folder."""
    root, day = real_root(folder), date.isoformat()
    paths = [folder / f"{day}{suffix}" for suffix in SUFFIXES]
    return pick(classify(root, path) for path in paths if os.path.lexists(path))


def scan(folder: Path) -> tuple[list[FileEntry], list[FileEntry]]:
    """``(dated, undated)`` entries of ``folder`` under the rule (see :func:`pick`).

    Raises:
        OSError: the folder cannot be listed.
    """
    root = real_root(folder)
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it if looks_like_issue(e.name))
    entries = [classify(root, folder / name) for name in names]
    return pick(entries), [e for e in entries if e.date is None]
