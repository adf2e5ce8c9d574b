"""An issue as markdown message texts within a size limit: DingTalk's and WeCom's renderers."""

from __future__ import annotations

from collections.abc import Callable

from digest_core.models import Issue
from digest_core.rendering.plain import (
    Block,
    Entry,
    lede_text,
    number_prefix,
    pack_blocks,
    part_units,
)
from digest_core.rendering.robots.markdown import escape, link
from digest_core.rendering.split import chunk_lines, chunk_text, hard_cut
from digest_core.rendering.types import Part
from digest_core.site.links import WEB_LINK_LABEL

Measure = Callable[[str], int]


def utf8_len(text: str) -> int:
    """The size of ``text`` in UTF-8 bytes: how both markdown robots measure their limits."""
    return len(text.encode())


#: Between blocks: a blank line is a paragraph break in every markdown dialect (a single
#: newline is not a line break in DingTalk's).
PARAGRAPH = "\n\n"
QUESTION_PREFIX = "带着一个问题读："
SOURCE_LABEL = "来源 {n}"
#: introduces a source whose link cannot fit: its address follows as text
LONG_SOURCE_LABEL = "来源 {n}（链接太长，地址如下）："


def render_texts(
    issue: Issue,
    part: Part,
    brief: int | None,
    *,
    limit: int,
    measure: Measure,
    web: str | None = None,
) -> list[str]:
    """``part`` of ``issue`` as markdown texts, each at most ``limit`` by ``measure``.

    Masthead and date in bold, the lede, 【section】 labels in bold, each item's title bold and
    linked to its first source, its paragraphs, the reading question as a quote, further
    sources as 来源 n links. Split between items, then paragraphs, then sentences; nothing is
    lost or repeated. All issue text is escaped (:mod:`digest_core.rendering.robots.markdown`).
    With ``web`` (the page in the web archive) a "全文 / web" link follows the masthead.

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    blocks = _Blocks(limit, measure)
    units = [
        blocks.header(issue, part, web),
        *part_units(issue, part, brief, item=blocks.item, toc=blocks.toc, nothing=blocks.text),
    ]
    texts = pack_blocks(units, limit, measure)
    for n, text in enumerate(texts):
        if measure(text) > limit:  # a renderer bug must fail here, not as the platform's error
            raise AssertionError(f"markdown message {n} is {measure(text)} > {limit}")
    return texts


def notice_texts(text: str, *, limit: int, measure: Measure) -> list[str]:
    """A service text, escaped, split at line ends to fit ``limit``."""
    chunks = chunk_lines(text, max(2, limit // 2), lambda s: measure(escape(s)))
    return [escape(c) for c in chunks]


class _Blocks:
    def __init__(self, limit: int, measure: Measure) -> None:
        self.limit = limit
        self.measure = measure

    def _piece_size(self, text: str) -> int:
        return self.measure(escape(text, line_start=False))

    def text(self, text: str, *, lead: str = "", bold: bool = False) -> list[Block]:
        """``text`` escaped, in blocks within the limit; ``lead`` (markup, e.g. "> ") starts
        each. Bold only when the text fits one block (a bold run cannot span blocks)."""
        wrap = "**" if bold else ""
        # one byte for a line-start escape; bold markers only when bold
        budget = self.limit - self.measure(lead) - 1 - 2 * self.measure(wrap)
        pieces = chunk_text(text, budget, self._piece_size)
        if len(pieces) > 1:
            wrap = ""
        return [(PARAGRAPH, f"{lead}{wrap}{escape(p)}{wrap}") for p in pieces]

    def header(self, issue: Issue, part: Part, web: str | None = None) -> list[Block]:
        blocks = self.text(f"{issue.masthead} · {issue.date.isoformat()}", bold=True)
        if web is not None:
            blocks.append((PARAGRAPH, link(WEB_LINK_LABEL, web)))
        if issue.lede and part in (Part.ALL, Part.TOC):
            blocks += self.text(lede_text(issue.lede))
        return blocks

    def title(self, title: str, url: str | None) -> tuple[list[Block], bool]:
        """The title's blocks, and whether they link to ``url``."""
        if url is not None:
            linked = f"**{link(title, url)}**"
            if self.measure(linked) <= self.limit:
                return [(PARAGRAPH, linked)], True
        return self.text(title, bold=True), False

    def source(self, n: int, url: str) -> list[Block]:
        linked = link(SOURCE_LABEL.format(n=n), url)
        if self.measure(linked) <= self.limit:
            return [(PARAGRAPH, linked)]
        label = self.text(LONG_SOURCE_LABEL.format(n=n))
        budget = self.limit - 1
        lines = hard_cut(url, budget, self._piece_size) if self._piece_size(url) > budget else [url]
        return label + [(PARAGRAPH, escape(line)) for line in lines]

    def label(self, entry: Entry) -> list[Block]:
        return self.text(f"【{entry.section.label}】", bold=True)

    def item(self, entry: Entry, label: bool) -> list[Block]:
        item = entry.item
        blocks = self.label(entry) if label else []
        title, linked = self.title(number_prefix(entry) + item.title, item.url)
        blocks += title
        for paragraph in item.paragraphs:
            blocks += self.text(paragraph)
        if item.question:
            blocks += self.text(QUESTION_PREFIX + item.question, lead="> ")
        for n, url in enumerate(item.links, start=1):
            if n > 1 or not linked:
                blocks += self.source(n, url)
        return blocks

    def toc(self, entry: Entry, label: bool) -> list[Block]:
        unit = self.label(entry) if label else []
        return unit + self.text(number_prefix(entry) + entry.item.title)
