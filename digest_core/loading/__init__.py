"""Loading issues from files: the published text format, JSON and YAML, with file:line errors."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from pathlib import Path

from digest_core.errors import IssueFormatError
from digest_core.loading.structured import (
    StructuredSuffix,
    decode_utf8,
    dump_json,
    dump_yaml,
    load_structured,
)
from digest_core.loading.text import Hint, dump_text, parse_text, question_marker
from digest_core.models import Issue

log = logging.getLogger(__name__)

#: The file types an issue can be stored in, the published text first.
ISSUE_SUFFIXES: tuple[str, ...] = (".txt", ".json", ".yaml", ".yml")

#: The largest issue file :func:`load_issue` reads; a real issue is a few KiB.
MAX_ISSUE_BYTES = 1024 * 1024

_NAME_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?!\d)")


def date_from_name(path: str | Path) -> dt.date | None:
    """The date a file name starts with (``2026-10-27.txt``, ``2026-10-27-fix.json``), if any.

    Raises:
        IssueFormatError: when the name starts with ``YYYY-MM-DD`` that is not a calendar day.
    """
    m = _NAME_DATE.match(Path(path).name)
    if m is None:
        return None
    try:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError as exc:
        detail = f"the file name's date {m[0]} is not a calendar day: {exc}"
        raise IssueFormatError(path, None, detail) from exc


def load_issue(
    path: Path, *, date: dt.date | None = None, hints: list[Hint] | None = None
) -> Issue:
    """Load the issue stored at ``path``; the suffix picks the format (.txt, .json, .yaml, .yml).

    The issue's date comes from the file name (which SHOULD start with ``YYYY-MM-DD``), from
    ``date``, or, for JSON and YAML only, from the data's own ``date`` field. When two of these
    are present they MUST agree. ``hints`` collects warnings about the text (see
    :func:`parse_text`).

    Raises:
        IssueFormatError: the file cannot be read, is larger than :data:`MAX_ISSUE_BYTES`, is
            not UTF-8 (with the line of the bad byte), has an unknown suffix, has no date or
            contradicting dates, nests too deeply, or breaks the format.
    """
    suffix = path.suffix.lower()
    if suffix not in ISSUE_SUFFIXES:
        known = ", ".join(ISSUE_SUFFIXES)
        raise IssueFormatError(path, None, f"unknown issue file type {suffix!r}; expected {known}")
    name_date = date_from_name(path)
    if name_date is not None and date is not None and name_date != date:
        raise IssueFormatError(
            path, None, f"the file name says {name_date} but the issue was given the date {date}"
        )
    date = date or name_date
    if suffix == ".txt" and date is None:
        raise IssueFormatError(
            path,
            None,
            "the issue's date is unknown: name the file YYYY-MM-DD.txt (e.g. 2026-10-27.txt) "
            "or give the date when importing it",
        )
    data = _read_capped(path)
    log.debug("loading %s (%d bytes)", path, len(data))
    return load_issue_data(data, path=path, suffix=suffix, date=date, hints=hints)


def load_issue_data(
    data: bytes,
    *,
    path: str | Path,
    suffix: str,
    date: dt.date | None,
    hints: list[Hint] | None = None,
) -> Issue:
    """An issue from the bytes of a file (an upload, a file read once): ``suffix`` (lower case,
    one of :data:`ISSUE_SUFFIXES`) picks the format; ``path`` is what errors name. ``date`` is
    required for text; JSON and YAML may carry their own.

    Raises:
        IssueFormatError: as :func:`load_issue` (but nothing is read from disk).
    """
    if len(data) > MAX_ISSUE_BYTES:
        raise IssueFormatError(
            path,
            None,
            f"the file is {len(data)} bytes; an issue file is at most "
            f"{MAX_ISSUE_BYTES // (1024 * 1024)} MiB",
        )
    if suffix == ".txt":
        if date is None:
            raise IssueFormatError(path, None, "the issue's date is unknown: give it")
        issue = parse_text(decode_utf8(data, path=path), path=path, date=date, hints=hints)
        last_line = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    elif suffix not in ISSUE_SUFFIXES:
        known = ", ".join(ISSUE_SUFFIXES)
        raise IssueFormatError(path, None, f"unknown issue file type {suffix!r}; expected {known}")
    else:
        structured: StructuredSuffix = ".json" if suffix == ".json" else ".yaml"
        issue = load_structured(data, path=path, date=date, suffix=structured)
        last_line = 1
    if hints is not None and not issue.briefs:
        # valid, but what a file saved only in part (cut after the headline) looks like
        hints.append(
            Hint(
                str(path),
                last_line,
                "the issue has no briefs (no 简讯 section): is the file complete? A file "
                "cut short after the headline loads as a headline alone",
            )
        )
    return issue


def _read_capped(path: Path) -> bytes:
    """The file's bytes; never reads more than one byte past :data:`MAX_ISSUE_BYTES`."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_ISSUE_BYTES + 1)
            if len(data) > MAX_ISSUE_BYTES:
                size = max(os.fstat(file.fileno()).st_size, len(data))
                raise IssueFormatError(
                    path,
                    None,
                    f"the file is {size} bytes; an issue file is at most "
                    f"{MAX_ISSUE_BYTES // (1024 * 1024)} MiB",
                )
    except OSError as exc:
        raise IssueFormatError(path, None, f"cannot read the file: {exc.strerror or exc}") from exc
    return data


__all__ = [
    "ISSUE_SUFFIXES",
    "MAX_ISSUE_BYTES",
    "Hint",
    "date_from_name",
    "decode_utf8",
    "dump_json",
    "dump_text",
    "dump_yaml",
    "load_issue",
    "load_issue_data",
    "load_structured",
    "parse_text",
    "question_marker",
]
