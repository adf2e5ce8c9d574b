"""Adding an issue file to the archive: validated, written atomically, a published day kept."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from digest_core.archive.files import NO_DATE, SUFFIXES, check_name
from digest_core.errors import ConfigError, IssueFormatError, IssuePublished
from digest_core.loading import MAX_ISSUE_BYTES, Hint, load_issue, load_issue_data
from digest_core.models import Issue

log = logging.getLogger(__name__)

#: the largest issue file accepted, from disk or sent to the bot (the loader's cap)
MAX_ADD_BYTES = MAX_ISSUE_BYTES


@dataclass(frozen=True)
class Added:
    """What :func:`add_issue` did: ``issue`` is stored at ``path`` (or already was, when
    ``unchanged``); ``removed`` are the other files of that date it replaced (a ``.txt``
    replaced by a ``.json``); ``hints`` are the warnings about the text."""

    issue: Issue
    path: Path
    unchanged: bool = False
    removed: tuple[Path, ...] = ()
    hints: list[Hint] = field(default_factory=list)
    #: an issue of that date was published already (the file is a correction)
    corrected: bool = False


def add_issue(
    archive_dir: Path,
    data: bytes,
    *,
    name: str,
    date: dt.date | None = None,
    published: Callable[[dt.date], bool],
    correct: bool = False,
    shown: str | None = None,
) -> Added:
    """Validate the issue file ``data`` (named ``name``: its suffix picks the format, a date in
    it the day) and store it in ``archive_dir`` as ``YYYY-MM-DD.<suffix>``.

    The day is ``date``, else the one the name carries (also a loosely written one, such as
    ``2026-12-1.txt``: the stored name is the right one), else, for JSON and YAML, the data's
    ``date``; two of them that disagree are an error. Nothing is written unless the whole file
    is valid. The file is written to a temporary file in the folder and renamed over the
    target, so the archive (and a bot reading it) sees the old file or the new one, never a
    part. Another file of the same day (``.txt`` beside a new ``.json``) is removed after the
    rename, so the new file is the one served. A day whose issue is ``published`` (and which
    has a file) is replaced only with ``correct``. An identical issue (same revision) is left
    as it is (``unchanged``).

    ``shown`` is how errors name the file (default ``name``).

    Raises:
        IssueFormatError: ``shown:line: detail`` for a file that is not a valid issue (too
            large, a wrong type, no date, contradicting dates, a format error).
        IssuePublished: the day is published and ``correct`` was not given.
        ConfigError: ``archive_dir`` is not a folder.
        OSError: the file cannot be written.
    """
    shown = shown or name
    if not archive_dir.is_dir():
        raise ConfigError(f"the archive folder {archive_dir} does not exist", key="archive_dir")
    suffix = os.path.splitext(name)[1].lower()
    if suffix not in SUFFIXES:
        known = ", ".join(SUFFIXES)
        raise IssueFormatError(shown, None, f"not an issue file: its type must be one of {known}")
    if len(data) > MAX_ADD_BYTES:
        raise IssueFormatError(
            shown, None, f"the file is {len(data)} bytes; an issue file is at most 1 MiB"
        )
    name_date, problem = check_name(Path(name))
    if name_date is not None and date is not None and name_date != date:
        raise IssueFormatError(
            shown, None, f"the file name says {name_date} but the date given is {date}"
        )
    date = date or name_date
    if date is None and suffix == ".txt":
        why = "its name carries no date" if problem == NO_DATE else "the date is unknown"
        raise IssueFormatError(
            shown,
            None,
            f"{why}: name the file YYYY-MM-DD.txt (e.g. 2026-12-02.txt) or give the date",
        )
    hints: list[Hint] = []
    issue = load_issue_data(data, path=shown, suffix=suffix, date=date, hints=hints)
    target = archive_dir / f"{issue.date.isoformat()}{suffix}"
    existing = [
        path
        for s in SUFFIXES
        if os.path.lexists(path := archive_dir / f"{issue.date.isoformat()}{s}")
    ]
    is_published = bool(existing) and published(issue.date)
    if is_published and not correct:
        raise IssuePublished(
            f"the issue of {issue.date} is published already ({existing[0]}); to replace "
            "it, add the file as a correction (--correct; an admin's upload with the "
            "caption /correct)",
            date=issue.date,
            path=existing[0],
        )
    if target in existing and _revision(target, issue.date) == issue.revision:
        return Added(issue, target, unchanged=True, hints=hints, corrected=is_published)
    _write_atomically(target, data)
    removed = tuple(p for p in existing if p != target)
    for path in removed:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    log.info(
        "stored the issue of %s (revision %s) as %s%s",
        issue.date,
        issue.revision,
        target,
        "; a correction" if is_published else "",
    )
    return Added(issue, target, removed=removed, hints=hints, corrected=is_published)


def _revision(path: Path, date: dt.date) -> str | None:
    """The revision of the issue stored at ``path``, or None when it does not load."""
    try:
        return load_issue(path, date=date).revision
    except IssueFormatError:
        return None


def _write_atomically(target: Path, data: bytes) -> None:
    """``data`` into ``target`` by way of a hidden temporary file in the same folder (which
    the archive never reads: dotfiles are not issue files), flushed to disk, then renamed."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself made durable, where it can be
        dirfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
