"""The search page's prebuilt index: documents and their character and character-pair postings.

The same idea as :mod:`digest_core.archive_search` (Chinese has no spaces, so no segmenter: a
query's character pairs pick candidates, one character for a one-character query), written as
JSON for the page's script. Every document carries its text, so the script checks each
candidate for the whole query: no false positives. Text is lower-cased with ``str.lower``,
which is what the script's ``toLowerCase`` does; a gram is one or two code points (the script
iterates code points too, so characters beyond the BMP work).

Format (version 1)::

    {"v": 1,
     "docs": [[path, date, where, title, text], ...],   # path relative to the site root
     "grams": {"模型": [0, 4], "模": [0, 4, 7], ...}}    # document numbers, ascending
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from digest_core.models import Issue, Section
from digest_core.site.links import anchor, issue_path

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


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
        out.update(line[i : i + 2] for i in range(len(line) - 1))
    return out


def build_index(issues: Sequence[Issue]) -> dict[str, object]:
    """The index of ``issues`` (already filtered to what may be shown) as a JSON-ready dict."""
    docs = documents(issues)
    postings: dict[str, list[int]] = {}
    for number, doc in enumerate(docs):
        for gram in grams(doc[4]):
            postings.setdefault(gram, []).append(number)
    return {"v": FORMAT_VERSION, "docs": docs, "grams": dict(sorted(postings.items()))}


def index_json(issues: Sequence[Issue]) -> bytes:
    """:func:`build_index` as compact UTF-8 JSON."""
    return json.dumps(build_index(issues), ensure_ascii=False, separators=(",", ":")).encode()
