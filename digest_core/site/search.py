"""The search page's prebuilt index, cut so that one search downloads only what it needs (tens
of kB at ten years of issues) and a new day rewrites only its own year's part.

Chinese has no spaces, so there is no segmenter: a query's character pairs (its character, for
one character) pick candidate *days*, whose documents the page's script then checks for the
whole query: no false positives. Text is lower-cased with ``str.lower``, which is what the
script's ``toLowerCase`` does; a gram is one or two code points (the script iterates code
points too, so characters beyond the BMP work).

Files (format version 3), under ``search/``:

- ``meta.json``: ``{"v": 3, "shards": S, "years": [[2026, S26], [2025, S25], …]}``, newest
  year first, each with the number of its posting shards;
- ``grams/N.json`` (N below S): ``{gram: [year - 2000, …]}``, the years whose issues hold the
  gram, for the grams with :func:`shard` N: a word no year has in full costs one small file
  per gram;
- ``grams/YEAR/N.json`` (N below that year's count): ``{gram: days}``, the days of the year
  (0 for 1 January) holding the gram: a list of gaps (``[3, 1, 40]`` is days 3, 4 and 44) for
  a rare gram, else a string, the base64 of a bitmap of 366 bits (bit ``d`` of byte ``d >> 3``,
  lowest bit first);
- ``days/YYYY-MM-DD.json``: that day's documents, ``{"m": masthead, "d": [[anchor, where,
  text], …]}``, one per lede and item in reading order; ``text`` is every searchable piece, one
  per line (the first line is the item's title; the lede's title is the masthead).

A site built for files (opened from disk, where a page may not ``fetch``) has each of these as
a script instead, ``search/…/NAME.js`` holding ``digestSearch.add("…/NAME.json", DATA);``
(:func:`as_scripts`), which the page loads with script elements.

The script loads ``meta.json``, the year lists of (at most three of) the query's grams, then
year by year, newest first, those grams' day postings and the candidate days' files, until it
has a page of hits. :class:`SearchIndex` keeps what it built, so a rebuild redoes only the
years and days that changed.
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import json
import logging
import operator
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from digest_core.models import Issue, Section
from digest_core.site.links import anchor

log = logging.getLogger(__name__)

FORMAT_VERSION = 3
#: the years of the year lists count from this one
EPOCH_YEAR = 2000
#: postings are cut into about this many bytes per shard (the shard counts are powers of 2)
SHARD_BYTES = 8 * 1024
MAX_SHARDS = 4096
#: a gram in more days of a year than this has a bitmap instead of a list of gaps
LIST_DAYS = 24


def _documents(issue: Issue) -> list[tuple[str, str, str, str]]:
    """``(anchor, where, title, text)`` of each document of ``issue``, in reading order."""
    docs: list[tuple[str, str, str, str]] = []
    if issue.lede is not None:
        docs.append(("lede", "本期重点", issue.masthead, issue.lede))
    number = 0
    for section, item in issue.items():
        n: int | None = None
        where = section.label
        if section is Section.BRIEFS:
            number += 1
            n = number
            where = f"{section.label} {n}"
        docs.append((anchor(section, n), where, item.title, "\n".join(item.text_pieces())))
    return docs


def grams(text: str) -> set[str]:
    """The characters and character pairs of ``text`` (lower-cased), line breaks excluded."""
    out: set[str] = set()
    for line in text.lower().split("\n"):
        out.update(line)
        out.update(map(operator.add, line, line[1:]))  # the pairs, made in C
    return out


def shard(gram: str, shards: int) -> int:
    """The shard of ``gram``: ``(31 * first + second) mod shards`` over code points (the
    script computes the same)."""
    value = 0
    for char in gram:
        value = value * 31 + ord(char)
    return value % shards


def _dump(value: object, sort: bool = False) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort).encode()


def as_scripts(files: dict[str, bytes]) -> dict[str, bytes]:
    """The index ``files`` as scripts for a site opened from disk: ``search/X.json`` becomes
    ``search/X.js``, calling ``digestSearch.add("X.json", DATA)`` (JSON is a JavaScript
    expression)."""
    out: dict[str, bytes] = {}
    for path, data in files.items():
        name = path.removeprefix("search/")
        call = b"digestSearch.add(" + _dump(name) + b"," + data + b");\n"
        out["search/" + name.removesuffix(".json") + ".js"] = call
    return out


def day_file(issue: Issue) -> tuple[str, bytes]:
    """The path and content of the documents file of ``issue``'s day."""
    docs = [[mark, where, text] for mark, where, _, text in _documents(issue)]
    return f"search/days/{issue.date.isoformat()}.json", _dump({"m": issue.masthead, "d": docs})


def _days(issues: Iterable[Issue]) -> dict[str, list[int]]:
    """Each gram of ``issues`` (all of one year) with the days of the year holding it."""
    out: dict[str, list[int]] = defaultdict(list)
    for issue in sorted(issues, key=lambda i: i.date):
        day = issue.date.timetuple().tm_yday - 1
        found: set[str] = set()
        for _, _, _, text in _documents(issue):
            found |= grams(text)
        for gram in found:
            out[gram].append(day)
    return out


def encode_days(days: Sequence[int]) -> list[int] | str:
    """Days of a year (ascending) as a shard stores them: gaps, or a base64 bitmap."""
    if len(days) <= LIST_DAYS:
        return [d - (days[i - 1] if i else 0) for i, d in enumerate(days)]
    bits = bytearray(46)  # 366 bits
    for d in days:
        bits[d >> 3] |= 1 << (d & 7)
    return base64.b64encode(bytes(bits)).decode("ascii")


def _year_shards(year: int, encoded: dict[str, list[int] | str]) -> dict[str, bytes]:
    """The shard files of ``year``'s encoded postings."""
    size = sum(len(g.encode()) + 6 + (3 * len(v) if isinstance(v, list) else 64)
               for g, v in encoded.items())  # fmt: skip
    shards = 1
    while shards < MAX_SHARDS and size / shards > SHARD_BYTES:
        shards *= 2
    parts: list[dict[str, list[int] | str]] = [{} for _ in range(shards)]
    for gram, posting in encoded.items():
        parts[shard(gram, shards)][gram] = posting
    return {f"search/grams/{year}/{n}.json": _dump(part, True) for n, part in enumerate(parts)}


@dataclass
class _Warm:
    """The postings of the year changed last, kept so that a new day of it is added to them
    instead of reading the whole year again."""

    year: int
    revisions: dict[dt.date, str]
    days: dict[str, list[int]]
    encoded: dict[str, list[int] | str]

    def add(self, issues: Sequence[Issue]) -> set[str]:
        """Add the days of ``issues`` (not held yet); the grams whose postings changed."""
        touched: set[str] = set()
        for issue in issues:
            day = issue.date.timetuple().tm_yday - 1
            found: set[str] = set()
            for _, _, _, text in _documents(issue):
                found |= grams(text)
            for gram in found:
                bisect.insort(self.days.setdefault(gram, []), day)
            touched |= found
            self.revisions[issue.date] = issue.revision
        for gram in touched:
            self.encoded[gram] = encode_days(self.days[gram])
        return touched


class SearchIndex:
    """The index files of a site, rebuilt by parts: a day's file when its issue changed, a
    year's postings when one of its issues changed, and the year lists of the grams whose
    years changed. :meth:`files` for the issues shown now returns every index file (the same
    bytes as a build from nothing would make). Not thread-safe: the site's builder calls it
    under its lock."""

    def __init__(self) -> None:
        self._days: dict[dt.date, tuple[str, str, bytes]] = {}  # date -> (revision, path, data)
        self._years: dict[int, tuple[tuple[tuple[dt.date, str], ...], dict[str, bytes]]] = {}
        self._year_grams: dict[int, set[str]] = {}
        self._lists: dict[str, list[int]] = {}  # gram -> its years (since EPOCH_YEAR)
        self._list_files: dict[str, bytes] = {}
        self._warm: _Warm | None = None
        self._parts: list[dict[str, list[int]]] = []
        self._shards = 0
        self._size = 0  # about the bytes of every year list

    def files(self, issues: Sequence[Issue]) -> dict[str, bytes]:
        """Every index file for ``issues`` (already filtered to what may be shown)."""
        by_year: dict[int, list[Issue]] = defaultdict(list)
        for issue in issues:
            by_year[issue.date.year].append(issue)
        self._update_days(issues)
        changed = self._update_years(by_year)
        self._update_lists(changed)
        out: dict[str, bytes] = {path: data for _, path, data in self._days.values()}
        years = sorted(self._years, reverse=True)
        for year in years:
            out.update(self._years[year][1])
        out.update(self._list_files)
        meta = {
            "v": FORMAT_VERSION,
            "shards": self._shards,
            "years": [[y, len(self._years[y][1])] for y in years],
        }
        out["search/meta.json"] = _dump(meta)
        return out

    def _update_days(self, issues: Sequence[Issue]) -> None:
        kept: dict[dt.date, tuple[str, str, bytes]] = {}
        for issue in issues:
            old = self._days.get(issue.date)
            if old is not None and old[0] == issue.revision:
                kept[issue.date] = old
            else:
                kept[issue.date] = (issue.revision, *day_file(issue))
        self._days = kept

    def _update_years(self, by_year: dict[int, list[Issue]]) -> dict[int, set[str]]:
        """Rebuild the years whose issues changed; their grams before, by year."""
        changed: dict[int, set[str]] = {}
        for year in [y for y in self._years if y not in by_year]:
            changed[year] = self._year_grams.pop(year)
            del self._years[year]
        for year, issues in by_year.items():
            key = tuple(sorted((i.date, i.revision) for i in issues))
            if year in self._years and self._years[year][0] == key:
                continue
            changed[year] = self._year_grams.get(year, set())
            warm = self._warm
            held = {} if warm is None or warm.year != year else warm.revisions
            if warm is not None and held and all(dict(key).get(d) == r for d, r in held.items()):
                found = changed[year] | warm.add([i for i in issues if i.date not in held])
            else:  # another year, or a day changed or gone: read the year again
                days = _days(issues)
                encoded = {g: encode_days(d) for g, d in days.items()}
                warm = self._warm = _Warm(year, dict(key), days, encoded)
                found = set(days)
            self._years[year] = (key, _year_shards(year, warm.encoded))
            self._year_grams[year] = found
        return changed

    def _update_lists(self, changed: dict[int, set[str]]) -> None:
        """Bring the grams' year lists (and the shards holding them) up to date."""
        touched: set[str] = set()
        lists = self._lists
        for year, before in changed.items():
            now = self._year_grams.get(year, set())
            offset = year - EPOCH_YEAR
            # the bytes of the lists, about: a gram, its quotes, colon and brackets, then
            # three for each year (the same sum however the lists came to be)
            for gram in before - now:
                lists[gram].remove(offset)
                self._size -= 3
                if not lists[gram]:
                    del lists[gram]
                    self._size -= len(gram.encode()) + 6
            for gram in now - before:
                if gram not in lists:
                    lists[gram] = []
                    self._size += len(gram.encode()) + 6
                lists[gram].append(offset)
                lists[gram].sort(reverse=True)
                self._size += 3
            touched |= before ^ now
        if not touched and self._list_files:
            return
        shards = 1
        while shards < MAX_SHARDS and self._size / shards > SHARD_BYTES:
            shards *= 2
        if shards != self._shards:  # cut anew (rare: the index doubled)
            self._shards = shards
            self._parts = [{} for _ in range(shards)]
            for gram, years in lists.items():
                self._parts[shard(gram, shards)][gram] = years
            dirty = set(range(shards))
        else:
            dirty = set()
            for gram in touched:
                n = shard(gram, shards)
                dirty.add(n)
                if gram in lists:
                    self._parts[n][gram] = lists[gram]
                else:
                    self._parts[n].pop(gram, None)
        files = {p: d for p, d in self._list_files.items() if _shard_of(p) < shards}
        files.update({f"search/grams/{n}.json": _dump(self._parts[n], True) for n in dirty})
        self._list_files = files


def _shard_of(path: str) -> int:
    return int(path.rsplit("/", 1)[1].removesuffix(".json"))
