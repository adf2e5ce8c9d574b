"""Plain-text renderer for the console and logs: no markup, a readable layout, split at 4000."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from digest_core.models import Issue, Item, Section
from digest_core.rendering.split import chunk_lines, chunk_text, flow
from digest_core.rendering.types import Message, Part, RenderOptions, TextLimits, web_url
from digest_core.site.links import WEB_LINK_LABEL

log = logging.getLogger(__name__)


class Limits(TextLimits):
    """Not a platform's limits: the console has none; ours, for a terminal."""

    #: long enough for a whole headline, short enough that a log line or a terminal page stays
    #: readable
    body_maxlen = 4000
    #: the longest request the console confirms (UTF-8 bytes of its ``cf:`` data: a line
    #: typed, the console's button data)
    button_data_maxlen = 4096


#: Shown before the lede unless the lede already starts with it.
LEDE_PREFIX = "本期重点："
#: Sets the reading question apart from the item's paragraphs.
QUESTION_PREFIX = "» 带着一个问题读："
#: What a part renders to when the issue has nothing for it.
NOTHING = {Section.BRIEFS: "本期没有简讯。", Section.CLASSIC: "本期没有经典回顾。"}

#: A piece of a message: (separator written before it unless it starts a message, text).
Block = tuple[str, str]
#: What a renderer makes of an item: the blocks, lines or elements kept together if they fit.
Unit = TypeVar("Unit")


class Entry(NamedTuple):
    """One item to render: its section, its number among the briefs (else None), the item."""

    section: Section
    number: int | None
    item: Item


def select(issue: Issue, part: Part, brief: int | None = None) -> list[Entry]:
    """The items that ``part`` shows, in publishing order (empty for TOC and for a missing part).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    numbered = [Entry(Section.BRIEFS, n, b) for n, b in enumerate(issue.briefs, start=1)]
    if part is Part.ALL:
        out = [Entry(Section.HEADLINE, None, issue.headline), *numbered]
        if issue.classic is not None:
            out.append(Entry(Section.CLASSIC, None, issue.classic))
        return out
    if part is Part.HEADLINE:
        return [Entry(Section.HEADLINE, None, issue.headline)]
    if part is Part.BRIEFS:
        return numbered
    if part is Part.BRIEF:
        if brief is None:
            raise ValueError("part BRIEF needs brief=N (counted from 1)")
        return [Entry(Section.BRIEFS, brief, issue.brief(brief))]
    if part is Part.CLASSIC:
        return [] if issue.classic is None else [Entry(Section.CLASSIC, None, issue.classic)]
    return []


def part_units(
    issue: Issue,
    part: Part,
    brief: int | None,
    *,
    item: Callable[[Entry, bool], Unit],
    toc: Callable[[Entry, bool], Unit],
    nothing: Callable[[str], Unit],
) -> list[Unit]:
    """What follows the header of ``part`` of ``issue``, as a renderer makes it: for TOC a
    ``toc(entry, label)`` per item of the issue, else an ``item(entry, label)`` per item the
    part selects, or ``nothing(notice)`` for a part that has none (:func:`nothing_notice`).
    ``label`` says the item opens its section, so its 【section】 label goes before it.

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    if part is Part.TOC:
        return [toc(entry, entry.number in (None, 1)) for entry in select(issue, Part.ALL)]
    entries = select(issue, part, brief)
    notice = nothing_notice(part)
    if not entries and notice:
        return [nothing(notice)]
    units: list[Unit] = []
    previous: Section | None = None
    for entry in entries:
        units.append(item(entry, entry.section is not previous))
        previous = entry.section
    return units


def number_prefix(entry: Entry) -> str:
    """What goes before an item's title: ``"2. "`` for the second brief, else nothing."""
    return f"{entry.number}. " if entry.number is not None else ""


def nothing_notice(part: Part) -> str | None:
    """The notice for a part that selected no items (BRIEFS, CLASSIC), else None."""
    if part is Part.BRIEFS:
        return NOTHING[Section.BRIEFS]
    if part is Part.CLASSIC:
        return NOTHING[Section.CLASSIC]
    return None


def lede_text(lede: str) -> str:
    """The lede as shown: prefixed with 本期重点： unless it already says so."""
    return lede if lede.startswith("本期重点") else LEDE_PREFIX + lede


def join_blocks(blocks: Sequence[Block]) -> str:
    """The text of one message: the blocks with their separators, the first one's dropped."""
    return "".join(text if i == 0 else sep + text for i, (sep, text) in enumerate(blocks))


def pack_blocks(
    units: Sequence[Sequence[Block]], limit: int, measure: Callable[[str], int] = len
) -> list[str]:
    """Flow ``units`` of blocks (each within ``limit``) into message texts within ``limit``."""
    groups = flow(units, lambda group: measure(join_blocks(group)) <= limit)
    return [join_blocks(group) for group in groups]


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` as ``{"text": ...}`` messages of at most
    :attr:`Limits.body_maxlen` characters.

    The text has no markup: masthead · date, the lede, 【section】 labels, numbered briefs, each
    link on its own line and the reading question set apart after "» ". Messages split between
    items, then paragraphs, then sentences; nothing is lost or repeated. Of ``options`` only
    ``site_url`` counts (a "全文 / web：URL" line after the first); there are no buttons or
    embeds on a console.

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    web = web_url(options or RenderOptions(), issue, part, brief)
    units = [
        _header(issue, part, web),
        *part_units(issue, part, brief, item=_item, toc=_toc_entry, nothing=_notice_unit),
    ]
    texts = pack_blocks(units, Limits.body_maxlen)
    log.debug("plain: %s of %s in %d message(s)", part, issue.date, len(texts))
    return [Message({"text": text}) for text in texts]


def preview(message: Message) -> str:
    """The message's text: plain text is its own preview."""
    return str(message.payload["text"])


def _chunks(sep: str, text: str, *, prefix: str = "") -> list[Block]:
    """``prefix + text`` as blocks within :attr:`Limits.body_maxlen`, split at sentences; later
    ones unprefixed."""
    pieces = chunk_text(text, Limits.body_maxlen - len(prefix))
    return [(sep if i == 0 else "\n", (prefix if i == 0 else "") + p) for i, p in enumerate(pieces)]


def _header(issue: Issue, part: Part, web: str | None) -> list[Block]:
    blocks = _chunks("", f"{issue.masthead} · {issue.date.isoformat()}")
    if web is not None:
        blocks += _chunks("\n", f"{WEB_LINK_LABEL}：{web}")
    if issue.lede and part in (Part.ALL, Part.TOC):
        blocks += _chunks("\n", lede_text(issue.lede))
    return blocks


def _notice_unit(text: str) -> list[Block]:
    return [("\n\n", text)]


def _label(entry: Entry) -> list[Block]:
    return [("\n\n", f"【{entry.section.label}】")]


def _item(entry: Entry, label: bool) -> list[Block]:
    item = entry.item
    blocks = _label(entry) if label else []
    blocks += _chunks("\n" if label else "\n\n", item.title, prefix=number_prefix(entry))
    for paragraph in item.paragraphs:
        blocks += _chunks("\n", paragraph)
    if item.question:
        blocks += _chunks("\n\n", item.question, prefix=QUESTION_PREFIX)
    for url in item.links:
        blocks += _chunks("\n", url)
    return blocks


def _toc_entry(entry: Entry, label: bool) -> list[Block]:
    unit = _label(entry) if label else []
    return unit + _chunks("\n", entry.item.title, prefix=number_prefix(entry))


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as plain messages of at most :attr:`Limits.body_maxlen` characters, split at
    line ends (``mentions`` has no effect: plain text pings no one)."""
    return [Message({"text": chunk}) for chunk in chunk_lines(text, Limits.body_maxlen, len)]
