"""Searching issues without the index: the hits in one issue, and the raw-bytes test that rules
a file out before it is parsed (the archive's scan while its index is being built)."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from digest_core.models import Issue, Section


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


def pieces(issue: Issue) -> list[str]:
    """The searchable text of an issue: the lede and every item's pieces."""
    texts = [issue.lede] if issue.lede is not None else []
    for _, item in issue.items():
        texts.extend(item.text_pieces())
    return texts


def hits_in(issue: Issue, needle: str) -> list[SearchHit]:
    """The items (and the lede) of ``issue`` whose text contains ``needle`` (casefolded)."""
    found: list[SearchHit] = []
    if issue.lede is not None and needle in issue.lede.casefold():
        found.append(SearchHit(issue.date, None, 0, issue.lede, issue.lede))
    counters = dict.fromkeys(Section, 0)
    for section, item in issue.items():
        counters[section] += 1
        piece = next((p for p in item.text_pieces() if needle in p.casefold()), None)
        if piece is not None:
            found.append(SearchHit(issue.date, section, counters[section], item.title, piece))
    return found


#: the ASCII characters that casefolding makes out of some character beyond ASCII (``ß`` →
#: ``ss``, the Kelvin sign → ``k``, ``ﬁ`` → ``fi``, ``İ`` → ``i̇``, …); a test checks this
#: against the running Python's Unicode tables
FOLDED_FROM_BEYOND_ASCII = frozenset("afhijklnstwy")


@dataclass(frozen=True, slots=True)
class RawTest:
    """How a scan rules out a text file on its raw bytes (see ``Archive._may_contain``),
    worked out once per search."""

    needle: str  # casefolded
    #: a line break or an odd space in the needle: every file is checked for real
    for_real: bool
    #: the needle has a space: the file's tabs count as spaces, as the loader reads them
    tabs: bool
    #: a caseless needle (e.g. Chinese) as UTF-8: compared byte for byte, no decoding
    exact: bytes | None
    #: a Latin needle: its bytes, and the runs any casefolding of it must hold
    latin: bytes | None
    runs: tuple[bytes, ...]

    @classmethod
    def of(cls, needle: str) -> RawTest:
        latin = needle.isascii() and not _caseless(needle)
        return cls(
            needle,
            for_real=any(c.isspace() and c != " " for c in needle),
            tabs=" " in needle,
            exact=needle.encode("utf-8") if _caseless(needle) else None,
            latin=needle.encode("ascii") if latin else None,
            runs=tuple(_ascii_only_runs(needle)) if latin else (),
        )

    def may_match(self, raw: bytes) -> bool:
        """False only when a text file of these bytes cannot contain the needle."""
        if self.tabs:
            raw = raw.replace(b"\t", b" ")
        if self.exact is not None:
            return self.exact in raw
        if self.latin is not None:  # rule the file out without decoding it
            lowered = raw.lower()  # ASCII letters only, as casefolding does them
            if self.latin in lowered:
                return True
            if any(run not in lowered for run in self.runs):
                return False
        return self.needle in raw.decode("utf-8", errors="replace").casefold()


def read_head(path: Path, limit: int, *, expect: int) -> bytes:
    """The first ``limit`` bytes of ``path`` (all of it when shorter), in one read when the
    file is still the ``expect`` bytes long it was listed with.

    A read that returns fewer bytes than asked for ends it: a regular file gives less only at
    its end, so a file of ``expect`` bytes costs one ``read`` (not a second one that returns
    nothing). File descriptors, not file objects: a scan of ten years opens 3,650 files.
    """
    chunks: list[bytes] = []
    got, want = 0, min(expect, limit - 1) + 1
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        while got < limit:
            asked = min(want, limit - got)
            chunk = os.read(fd, asked)
            chunks.append(chunk)
            got += len(chunk)
            if len(chunk) < asked:
                break
            want = 1 << 16
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _ascii_only_runs(needle: str) -> list[bytes]:
    """The runs of an ASCII ``needle`` (casefolded) made of characters outside
    :data:`FOLDED_FROM_BEYOND_ASCII`: in a casefolded text, each such character comes from one
    ASCII character, so a text whose casefolding contains ``needle`` holds every run, as it is
    or in upper case, byte for byte in its UTF-8 (a character never folds to nothing)."""
    runs = itertools.groupby(needle, FOLDED_FROM_BEYOND_ASCII.__contains__)
    found = {"".join(run).encode("ascii") for beyond, run in runs if not beyond}
    return sorted(found, key=len, reverse=True)  # the longest rules out the most


def _caseless(needle: str) -> bool:
    """True when casefolding a text can neither make nor break a match of ``needle``: it holds
    no cased letter and no combining mark (what casefolding produces besides cased letters,
    e.g. U+0307 from "İ"), as Chinese, digits and punctuation are."""
    return all(
        c.upper() == c.lower() and not unicodedata.category(c).startswith("M") for c in needle
    )
