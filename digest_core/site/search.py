"""The search page's prebuilt index: documents and their character and character-pair postings,
in shards, so a reader downloads only what a query needs.

The same idea as :mod:`digest_core.archive.index` (Chinese has no spaces, so no segmenter: a
query's character pairs pick candidates, one character for a one-character query), written as
JSON for the page's script. Every document carries its text, so the script checks each
candidate for the whole query: no false positives. Text is lower-cased with ``str.lower``,
which is what the script's ``toLowerCase`` does; a gram is one or two code points (the script
iterates code points too, so characters beyond the BMP work).

Files (format version 2), under ``search/``:

- ``meta.json``: ``{"v": 2, "shards": S, "months": [["2026-11", 0], ["2026-10", 57], …]}``;
  documents are numbered newest first, and each month lists its first document's number;
- ``grams/N.json`` (N from 0 to S-1): ``{gram: [document numbers, ascending]}`` for the grams
  with :func:`shard` N;
- ``docs/YYYY-MM.json``: that month's documents, ``[path, date, where, title, text]`` each,
  ``path`` relative to the site root.

A site built for files (opened from disk, where a page may not ``fetch``) has each of these
as a script instead, ``search/…/NAME.js`` holding ``digestSearch.add("…/NAME.json", DATA);``
(:func:`as_scripts`), which the page loads with script elements.

The script loads ``meta.json``, the shards of the query's grams, and then month files newest
first only until it has a page of hits; a year of issues is about 9 MB of index, of which a
two-character query reads a few hundred kB.
"""

from __future__ import annotations

import json
import logging
import operator
from collections import deque
from collections.abc import Sequence
from itertools import repeat

from digest_core.models import Issue, Section
from digest_core.site.links import anchor, issue_path

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
#: Postings are cut into about this many bytes per shard (the shard count is a power of 2).
SHARD_BYTES = 128 * 1024
MAX_SHARDS = 4096


def documents(issues: Sequence[Issue]) -> list[list[str]]:
    """One document per lede and per item, newest issue first: ``[path, date, where, title,
    text]`` where ``text`` is every searchable piece, one per line."""
    docs: list[list[str]] = []
    for issue in sorted(issues, key=lambda i: i.date, reverse=True):
        page, date = issue_path(issue.date), issue.date.isoformat()
        if issue.lede is not None:
            docs.append([f"{page}#lede", date, "本期重点", issue.masthead, issue.lede])
        number = 0
        for section, item in issue.items():
            n: int | None = None
            where = section.label
            if section is Section.BRIEFS:
                number += 1
                n = number
                where = f"{section.label} {n}"
            text = "\n".join(item.text_pieces())
            docs.append([f"{page}#{anchor(section, n)}", date, where, item.title, text])
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


def postings(docs: Sequence[Sequence[str]]) -> dict[str, list[int]]:
    """Each gram of the documents' texts with the numbers of the documents holding it."""
    out: dict[str, list[int]] = {}
    for number, doc in enumerate(docs):
        found = grams(doc[4])
        out.update((gram, []) for gram in found.difference(out))
        # the appends run in C (map over bound methods): most of an index's build time
        deque(map(list.append, map(out.__getitem__, found), repeat(number)), maxlen=0)
    return out


def _dump(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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


def search_files(issues: Sequence[Issue]) -> dict[str, bytes]:
    """The index of ``issues`` (already filtered to what may be shown): every file above, by
    path relative to the site root."""
    docs = documents(issues)
    found = postings(docs)
    size = sum(len(g.encode()) + 6 + 6 * len(p) for g, p in found.items())
    shards = 1
    while shards < MAX_SHARDS and size / shards > SHARD_BYTES:
        shards *= 2
    split: list[dict[str, list[int]]] = [{} for _ in range(shards)]
    for gram in sorted(found):
        split[shard(gram, shards)][gram] = found[gram]
    files = {f"search/grams/{n}.json": _dump(part) for n, part in enumerate(split)}
    months: list[list[object]] = []
    by_month: dict[str, list[list[str]]] = {}
    for number, doc in enumerate(docs):
        month = doc[1][:7]
        if month not in by_month:
            by_month[month] = []
            months.append([month, number])
        by_month[month].append(doc)
    for month, month_docs in by_month.items():
        files[f"search/docs/{month}.json"] = _dump(month_docs)
    files["search/meta.json"] = _dump({"v": FORMAT_VERSION, "shards": shards, "months": months})
    return files
