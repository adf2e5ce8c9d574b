"""An in-memory inverted index of characters and character pairs, for searching the archive.

Why this and not SQLite FTS5: readers search Chinese, where a word is usually two characters
(``模型``, ``推理``) and there are no spaces. FTS5's ``unicode61`` tokenizer would make a whole
run of Chinese one token; its ``trigram`` tokenizer cannot answer two-character queries from the
index (it falls back to a scan). Character pairs (bigrams) answer every query of two or more
characters and single characters answer one-character queries, with no segmenter and no new
dependency. The index only narrows the search to *candidate* issues (those holding every pair
of the query); the archive then checks the real text of each candidate, so there are no false
positives. Everything is casefolded, as the search is.

Postings are ``array('I')`` of document ids (a few bytes per entry, not a Python set); a
changed issue gets a new id and its old one is simply forgotten (``live``), so an update never
rewrites postings.
"""

from __future__ import annotations

import datetime as dt
import logging
from array import array
from collections import deque
from collections.abc import Iterable
from itertools import repeat

log = logging.getLogger(__name__)

#: joins the pieces of one issue (never inside a piece: pieces are single lines); a pair
#: across two pieces is a harmless extra candidate
_SEPARATOR = "\n"


def grams(text: str) -> set[int]:
    """The characters and the character pairs of ``text`` (casefolded), as integers.

    A character is its code point; a pair is two code points in one 64-bit integer, read
    straight out of the UTF-32 encoding (so the work is done in C: this is much of the time an
    index takes to build).
    """
    out = set(memoryview(text.encode("utf-32-le")).cast("I"))
    out.update(_pairs(text))
    return out


def _pairs(text: str) -> set[int]:
    """The character pairs of ``text`` as :func:`grams` has them."""
    data = text.encode("utf-32-le")
    even = data[: len(data) // 8 * 8]  # pairs starting at characters 0, 2, 4, …
    odd = data[4 : 4 + (len(data) - 4) // 8 * 8]  # and at 1, 3, 5, …
    return {*memoryview(even).cast("Q"), *memoryview(odd).cast("Q")}


class SearchIndex:
    """Issue dates by the characters and character pairs of their (casefolded) text.

    Not thread-safe: the archive calls it under its lock.
    """

    def __init__(self) -> None:
        self._postings: dict[int, array[int]] = {}
        self._live: dict[int, dt.date] = {}
        self._ids: dict[dt.date, int] = {}
        self._next = 0
        self._dead = 0

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, date: object) -> bool:
        return date in self._ids

    def put(self, date: dt.date, pieces: Iterable[str]) -> None:
        """Index the text of the issue of ``date`` (replacing what was indexed for it)."""
        self.remove(date)
        doc = self._next
        self._next += 1
        postings = self._postings
        found = grams(_SEPARATOR.join(p.casefold() for p in pieces))
        new = found.difference(postings)
        found -= new
        # the appends run in C (map over bound methods): this loop is most of the build's time
        deque(map(array.append, map(postings.__getitem__, found), repeat(doc)), maxlen=0)
        postings.update((gram, array("I", (doc,))) for gram in new)
        self._live[doc] = date
        self._ids[date] = doc
        if self._dead > 4 * len(self._ids) + 1000:
            self._compact()

    def remove(self, date: dt.date) -> None:
        """Forget the issue of ``date`` (nothing happens if it was not indexed)."""
        doc = self._ids.pop(date, None)
        if doc is not None:
            del self._live[doc]
            self._dead += 1

    def candidates(self, needle: str) -> set[dt.date]:
        """The dates whose text may contain ``needle`` (casefolded, not blank): every date
        holding all of its character pairs (its character, for one character)."""
        wanted = sorted(
            (self._postings.get(g) for g in (_pairs(needle) if len(needle) > 1 else {ord(needle)})),
            key=lambda p: 0 if p is None else len(p),
        )
        if not wanted or wanted[0] is None:
            return set()
        docs = set(wanted[0])
        for posting in wanted[1:]:
            docs.intersection_update(posting)  # type: ignore[arg-type]
            if not docs:
                return set()
        live = self._live
        return {live[d] for d in docs if d in live}

    def _compact(self) -> None:
        """Drop the ids of replaced issues from every posting (after many updates)."""
        live = self._live
        for gram, posting in list(self._postings.items()):
            kept = array("I", (d for d in posting if d in live))
            if kept:
                self._postings[gram] = kept
            else:
                del self._postings[gram]
        self._dead = 0
        log.debug("search index compacted: %d issues, %d grams", len(live), len(self._postings))
