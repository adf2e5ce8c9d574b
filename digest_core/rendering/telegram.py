"""Telegram renderer: an Issue (or a part of it) as ``sendMessage`` payloads in HTML parse mode."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from digest_core.models import QUESTION_MARKER, Issue, Item, Section
from digest_core.rendering.html import (
    checked_visible_text,
    escape_attr,
    escape_text,
    text_with_links,
)
from digest_core.rendering.split import chunk_lines, split_sentences, utf16_len
from digest_core.rendering.types import (
    BUTTON_SECTIONS,
    Message,
    Part,
    RenderOptions,
    TextLimits,
    button_data,
    web_url,
)
from digest_core.site.links import WEB_LINK_LABEL

log = logging.getLogger(__name__)


class Limits(TextLimits):
    """The Bot API's limits of what this module renders."""

    #: Maximum message text, counted in UTF-16 code units of the *visible* text after entity
    #: parsing (``telegram.constants.MessageLimit.MAX_TEXT_LENGTH``; Telegram counts after
    #: parsing, so tags and ``&amp;`` escapes do not count, but every character of text, newline
    #: and label does).
    body_maxlen = 4096
    unit = "utf-16"
    #: Maximum callback data of an inline button, in bytes
    #: (``telegram.constants.InlineKeyboardButtonLimit.MAX_CALLBACK_DATA``).
    callback_data_maxlen = 64
    #: a service text is split at this much visible text (UTF-16 units), below body_maxlen
    notice_maxlen = 4000
    #: The text of an ``answerCallbackQuery`` (the toast or alert a button press answers with),
    #: in characters (``telegram.constants.CallbackQueryLimit.ANSWER_CALLBACK_QUERY_TEXT_LENGTH``)
    answer_text_maxlen = 200
    #: Results one inline answer carries: ours, below Telegram's 50
    #: (``telegram.constants.InlineQueryLimit.RESULTS``)
    inline_results = 20


#: ``telegram.constants.ParseMode.HTML``
PARSE_MODE = "HTML"

# Labels the renderer adds around issue text (tests strip exactly these to find the issue text).
#: Starts a message that continues an item cut at a paragraph or sentence.
CONTINUED = "（续）"
#: Introduces the lede.
LEDE_LABEL = "本期重点："
#: Between the masthead and the date in the first line.
MASTHEAD_SEP = " · "
#: Between extra source links.
SOURCE_SEP = " · "
#: What a message says when the asked-for section is empty in this issue.
NO_BRIEFS = "本期没有简讯。"
NO_CLASSIC = "本期没有经典回顾。"
#: Put after an "@" in issue text so Telegram does not read "@name" as a mention: Telegram finds
#: mentions in the text of every message, whatever the parse mode, and a mention of a member
#: notifies them. Usernames are ASCII letters, digits and underscores. An "@" that a ZWSP already
#: follows gets one more, so removing one after each "@" gives back the text exactly. (A URL in
#: running text is therefore auto-linked by Telegram only up to such an "@".)
MENTION_BREAK = "\u200b"
_MENTION_START = re.compile(r"@(?=[A-Za-z0-9_\u200b])")


def mute_mentions(text: str) -> str:
    """``text`` with :data:`MENTION_BREAK` after every "@" that a username character (or a
    ZWSP) follows: removing one after each "@" gives ``text`` back."""
    return _MENTION_START.sub("@" + MENTION_BREAK, text)


def source_label(n: int) -> str:
    """The text of the ``n``-th source link (from 2: the first one is the title's link)."""
    return f"来源 {n}"


def section_header(section: Section) -> str:
    """A section's header line, e.g. ``【简讯】``."""
    return f"【{section.label}】"


def format_date(issue: Issue) -> str:
    """The issue date as readers see it: ``2026年10月27日``."""
    d = issue.date
    return f"{d.year}年{d.month}月{d.day}日"


# --- the token stream -------------------------------------------------------------------------


class _Cut(IntEnum):
    """Where a message may end, in order of preference."""

    HARD = 0  # anywhere inside text, between code points (last resort)
    CLAUSE = 1  # after a comma, semicolon, colon or space inside a sentence that is too long
    SENTENCE = 2  # after 。！？!? (see split.split_sentences) inside a paragraph
    PARA = 3  # between paragraphs of one item
    ITEM = 4  # between items (or sections)


_Tag = tuple[str, str]  # (name, rendered attributes), e.g. ("a", ' href="https://…"')
_B: _Tag = ("b", "")
_BQ: _Tag = ("blockquote", "")


def _link(url: str) -> _Tag:
    return ("a", f' href="{escape_attr(url)}"')


@dataclass(frozen=True)
class _Text:
    """A run of text with the tags around it; ``atomic`` runs (labels) are never cut."""

    text: str
    tags: tuple[_Tag, ...] = ()
    atomic: bool = False
    #: marks the headline's title, so the message carrying it gets the link preview
    key: str = ""


@dataclass(frozen=True)
class _Break:
    """A place to end a message; shown as ``sep`` when no message ends there."""

    level: _Cut
    sep: str


_Token = _Text | _Break


def _glue(text: str) -> _Text:
    return _Text(text, (), atomic=True)


# --- layout -----------------------------------------------------------------------------------


def _masthead(issue: Issue) -> list[_Token]:
    return [
        _Text(issue.masthead, (_B,)),
        _Text(MASTHEAD_SEP + format_date(issue), (_B,), atomic=True),
    ]


def _lede(issue: Issue) -> list[_Token]:
    if issue.lede is None:
        return []
    return [_glue("\n" + LEDE_LABEL), _Text(issue.lede)]


def _title(item: Item, number: int | None, *, key: str = "") -> list[_Token]:
    tags: tuple[_Tag, ...] = (_B, _link(item.url)) if item.url else (_B,)
    out: list[_Token] = []
    if number is not None:
        out.append(_Text(f"{number}. ", (_B,), atomic=True))
    out.append(_Text(item.title, tags, key=key))
    return out


def _extra_sources(item: Item) -> list[_Token]:
    out: list[_Token] = []
    for n, url in enumerate(item.links[1:], start=2):
        out.append(_glue("\n" if n == 2 else SOURCE_SEP))
        out.append(_Text(source_label(n), (_link(url),), atomic=True))
    return out


def _item(item: Item, *, number: int | None = None, compact: bool, key: str = "") -> list[_Token]:
    """Title, paragraphs, extra sources and the reading question of one item."""
    out = _title(item, number, key=key)
    out.append(_glue("\n"))
    for i, para in enumerate(item.paragraphs):
        if i:
            out.append(_Break(_Cut.PARA, "\n" if compact else "\n\n"))
        out.append(_Text(para))
    out.extend(_extra_sources(item))
    if item.question is not None:
        out.append(_Break(_Cut.PARA, "\n"))
        out.append(_Text(QUESTION_MARKER, (_BQ,), atomic=True))
        out.append(_Text(item.question, (_BQ,)))
    return out


def _section(section: Section, items: Sequence[tuple[int | None, Item]]) -> list[_Token]:
    """A section header glued to its first item; items separated by item breaks."""
    out: list[_Token] = [_Text(section_header(section), (_B,), atomic=True), _glue("\n")]
    for i, (number, item) in enumerate(items):
        if i:
            out.append(_Break(_Cut.ITEM, "\n\n"))
        key = "headline" if section is Section.HEADLINE else ""
        out.extend(_item(item, number=number, compact=section is Section.BRIEFS, key=key))
    return out


def _numbered_briefs(issue: Issue) -> list[tuple[int | None, Item]]:
    return [(n, b) for n, b in enumerate(issue.briefs, start=1)]


def _layout_all(issue: Issue) -> list[_Token]:
    # a lede too long to share a message with the headline ends the message before it, so the
    # headline (and its link preview) never starts as a cut-off fragment
    lede_end = _Break(_Cut.PARA, "\n\n") if issue.lede else _glue("\n\n")
    out = [*_masthead(issue), *_lede(issue), lede_end]
    out.extend(_section(Section.HEADLINE, [(None, issue.headline)]))
    if issue.briefs:
        out.append(_Break(_Cut.ITEM, "\n\n"))
        out.extend(_section(Section.BRIEFS, _numbered_briefs(issue)))
    if issue.classic is not None:
        out.append(_Break(_Cut.ITEM, "\n\n"))
        out.extend(_section(Section.CLASSIC, [(None, issue.classic)]))
    return out


def _layout_part(
    issue: Issue, section: Section, items: Sequence[tuple[int | None, Item]]
) -> list[_Token]:
    out = [*_masthead(issue), _glue("\n\n")]
    if not items:
        empty = NO_BRIEFS if section is Section.BRIEFS else NO_CLASSIC
        return [*out, _glue(empty)]
    return [*out, *_section(section, items)]


def _toc_entry(number: int | None, item: Item) -> list[_Token]:
    out: list[_Token] = []
    if number is not None:
        out.append(_glue(f"{number}. "))
    out.append(_Text(item.title, (_link(item.url),) if item.url else ()))
    return out


def _layout_toc(issue: Issue) -> list[_Token]:
    out = [*_masthead(issue), *_lede(issue)]
    for section, entries in (
        (Section.HEADLINE, [(None, issue.headline)]),
        (Section.BRIEFS, _numbered_briefs(issue)),
        (Section.CLASSIC, [(None, issue.classic)] if issue.classic else []),
    ):
        if not entries:
            continue
        out.append(_Break(_Cut.ITEM, "\n\n"))
        out.append(_Text(section_header(section), (_B,), atomic=True))
        for i, (number, item) in enumerate(entries):
            out.append(_glue("\n") if i == 0 else _Break(_Cut.ITEM, "\n"))
            out.extend(_toc_entry(number, item))
    return out


# --- splitting --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pos:
    """A cut position: before token ``index``, or inside _Text ``index`` at ``offset``."""

    index: int
    offset: int = 0


def _sentence_offsets(text: str) -> list[int]:
    """Interior offsets of ``text`` where a sentence ends."""
    offsets: list[int] = []
    total = 0
    for sentence in split_sentences(text)[:-1]:
        total += len(sentence)
        offsets.append(total)
    return offsets


_CLAUSE_ENDS = "，、；：,;: \t\u3000"


def _last_clause_end(text: str, k: int) -> int:
    """The largest interior offset ``<= k`` just after a clause end, or 0."""
    stop = min(k, len(text) - 1)
    return max(text.rfind(c, 0, stop) for c in _CLAUSE_ENDS) + 1


def _inner_cuts(text: str, k: int) -> dict[_Cut, int]:
    """The last offset ``<= k`` inside ``text`` of each kind of inner cut."""
    found: dict[_Cut, int] = {}
    hard = min(k, len(text) - 1)
    if hard >= 1:
        found[_Cut.HARD] = hard
    clause = _last_clause_end(text, k)
    if clause:
        found[_Cut.CLAUSE] = clause
    sentences = [o for o in _sentence_offsets(text) if o <= k]
    if sentences:
        found[_Cut.SENTENCE] = sentences[-1]
    return found


def _fit(text: str, room: int) -> int:
    """The largest ``k`` with ``utf16_len(text[:k]) <= room``."""
    if utf16_len(text) <= room:
        return len(text)
    lo, hi = 0, min(len(text), max(room, 0))  # text[:lo] fits; the answer is at most room chars
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if utf16_len(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _size(token: _Token) -> int:
    return utf16_len(token.text if isinstance(token, _Text) else token.sep)


def _split(tokens: Sequence[_Token], limit: int) -> list[tuple[bool, list[_Token]]]:
    """Cut ``tokens`` into messages of at most ``limit`` visible UTF-16 units each.

    Each message ends at the best cut that fits: between items, else between paragraphs (the
    latest such break wins); else inside the last text run that can be cut, at its last sentence
    end, else after its last clause, else as late as fits (atomic labels are never cut).
    Returns ``(continued, tokens)`` per message; ``continued`` means it resumes a cut item and
    has room reserved for the :data:`CONTINUED` marker.
    """
    messages: list[tuple[bool, list[_Token]]] = []
    toks = list(tokens)
    continued = False
    while toks:
        room = limit - (utf16_len(CONTINUED + "\n") if continued else 0)
        # the latest break of each level up to (and including) the token that does not fit
        best: dict[_Cut, _Pos] = {}
        starts: list[int] = []  # the room used before each of those tokens
        used = 0
        fits_all = True
        for i, tok in enumerate(toks):
            if isinstance(tok, _Break) and i:
                best[tok.level] = _Pos(i)
            starts.append(used)
            n = _size(tok)
            if used + n > room:
                fits_all = False
                break
            used += n
        if fits_all:
            messages.append((continued, _strip_breaks(toks)))
            break
        best = best or _latest_inner_cuts(toks, starts, room)
        if not best:
            raise ValueError("cannot split: a label or separator run is longer than a message")
        level = max(best)
        pos = best[level]
        if isinstance(toks[pos.index], _Break):
            head, toks = toks[: pos.index], toks[pos.index + 1 :]
        else:
            cut = toks[pos.index]
            assert isinstance(cut, _Text)
            left = replace(cut, text=cut.text[: pos.offset])
            right = replace(cut, text=cut.text[pos.offset :])
            head = [*toks[: pos.index], left]
            toks = [right, *toks[pos.index + 1 :]]
        messages.append((continued, _strip_breaks(head)))
        continued = level is not _Cut.ITEM
    return messages


def _latest_inner_cuts(
    toks: Sequence[_Token], starts: Sequence[int], room: int
) -> dict[_Cut, _Pos]:
    """The cuts (:func:`_inner_cuts`) inside the latest text run among the first
    ``len(starts)`` tokens that has any, where ``starts[i]`` of ``room`` is used before token
    ``i``; empty when none has. Looked for only when no break can end the message, from the
    end backwards, so most texts are never searched for sentence ends."""
    for i in range(len(starts) - 1, -1, -1):
        tok = toks[i]
        if isinstance(tok, _Text) and not tok.atomic:
            found = _inner_cuts(tok.text, _fit(tok.text, room - starts[i]))
            if found:
                return {level: _Pos(i, offset) for level, offset in found.items()}
    return {}


def _strip_breaks(tokens: Iterable[_Token]) -> list[_Token]:
    """Breaks that did not end a message become their separators."""
    return [_glue(t.sep) if isinstance(t, _Break) else t for t in tokens]


def _to_html(tokens: Iterable[_Text]) -> str:
    """Render text runs, opening and closing only the tags that change between runs."""
    out: list[str] = []
    stack: tuple[_Tag, ...] = ()
    for tok in tokens:
        if not tok.text:
            continue
        if tok.tags != stack:  # most runs have the tags of the run before them
            common = 0
            while common < min(len(stack), len(tok.tags)) and stack[common] == tok.tags[common]:
                common += 1
            for name, _ in reversed(stack[common:]):
                out.append(f"</{name}>")
            for name, attrs in tok.tags[common:]:
                out.append(f"<{name}{attrs}>")
            stack = tok.tags
        out.append(escape_text(tok.text))
    out.extend(f"</{name}>" for name, _ in reversed(stack))
    return "".join(out)


# --- public API -------------------------------------------------------------------------------


def _layout(issue: Issue, part: Part, brief: int | None, web: str | None) -> list[_Token]:
    """The tokens of ``part``, with mentions in issue text (never in links) muted, and the
    web link (when ``web``) after the masthead and date."""
    tokens = [
        replace(t, text=mute_mentions(t.text))
        if isinstance(t, _Text) and not t.atomic and "@" in t.text
        else t
        for t in _layout_tokens(issue, part, brief)
    ]
    if web is not None:  # every layout starts with the two masthead tokens
        tokens[2:2] = [_glue(MASTHEAD_SEP), _Text(WEB_LINK_LABEL, (_link(web),), atomic=True)]
    return tokens


def _layout_tokens(issue: Issue, part: Part, brief: int | None) -> list[_Token]:
    if part is Part.ALL:
        return _layout_all(issue)
    if part is Part.TOC:
        return _layout_toc(issue)
    if part is Part.HEADLINE:
        return _layout_part(issue, Section.HEADLINE, [(None, issue.headline)])
    if part is Part.BRIEFS:
        return _layout_part(issue, Section.BRIEFS, _numbered_briefs(issue))
    if part is Part.BRIEF:
        if brief is None:
            raise ValueError("part BRIEF needs brief=N (counted from 1)")
        return _layout_part(issue, Section.BRIEFS, [(brief, issue.brief(brief))])
    if part is Part.CLASSIC:
        items = [(None, issue.classic)] if issue.classic is not None else []
        return _layout_part(issue, Section.CLASSIC, items)
    raise ValueError(f"unknown part {part!r}")


def _keyboard(issue: Issue) -> dict[str, Any]:
    present = {
        Section.HEADLINE: True,
        Section.BRIEFS: bool(issue.briefs),
        Section.CLASSIC: issue.classic is not None,
    }
    row = []
    for section in BUTTON_SECTIONS:
        if not present[section]:
            continue
        data = button_data(issue.date, section)
        if len(data.encode("utf-8")) > Limits.callback_data_maxlen:
            raise ValueError(f"callback data {data!r} exceeds {Limits.callback_data_maxlen} bytes")
        row.append({"text": section.label, "callback_data": data})
    return {"inline_keyboard": [row]}


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` as ``sendMessage`` payloads (without ``chat_id``), in order.

    Each payload is ``{"text", "parse_mode": "HTML", "link_preview_options"}`` plus, with
    ``options.buttons``, a ``reply_markup`` inline keyboard on the last message. Every text MUST
    be well-formed Telegram HTML on its own (see
    :func:`~digest_core.rendering.html.checked_visible_text`), with at most
    :attr:`Limits.body_maxlen` visible UTF-16 units; all issue text is escaped, so none of it
    can form a tag. Messages end between items if possible, else between paragraphs, else
    at a sentence end, else after a comma or space, else between any two code points of issue
    text (never inside a label, tag or entity); an item's title is never repeated, and a message
    that continues a cut item starts with :data:`CONTINUED`. An "@" in issue text is followed by
    :data:`MENTION_BREAK` where Telegram would otherwise read a mention (:func:`mute_mentions`);
    link targets are left as they are. With ``options.link_preview`` the
    message carrying the headline's title previews the headline's first source; every other
    message has previews disabled. With ``options.site_url`` the first line ends with a
    "全文 / web" link to the part's place in the web archive.

    Raises:
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
        ValueError: ``part`` is BRIEF and ``brief`` is None, or ``part`` is unknown.
    """
    options = options or RenderOptions()
    part = Part(part)
    web = web_url(options, issue, part, brief)
    chunks = _split(_layout(issue, part, brief, web), Limits.body_maxlen)
    previewed = False
    messages: list[Message] = []
    for continued, tokens in chunks:
        texts = [t for t in tokens if isinstance(t, _Text)]
        if continued:
            texts.insert(0, _glue(CONTINUED + "\n"))
        html = _to_html(texts)
        # a renderer bug must never reach the API as a 400
        if utf16_len(checked_visible_text(html)) > Limits.body_maxlen:
            raise AssertionError(f"rendered message exceeds {Limits.body_maxlen} UTF-16 units")
        preview: dict[str, Any] = {"is_disabled": True}
        url = issue.headline.url
        carries_headline = any(t.key == "headline" for t in texts)
        if options.link_preview and url and carries_headline and not previewed:
            preview = {"is_disabled": False, "url": url}
            previewed = True
        payload: dict[str, Any] = {
            "text": html,
            "parse_mode": PARSE_MODE,
            "link_preview_options": preview,
        }
        messages.append(Message(payload=payload))
    if options.buttons:
        messages[-1].payload["reply_markup"] = _keyboard(issue)
    log.debug("rendered %s of %s as %d message(s)", part.value, issue.date, len(messages))
    return messages


def preview(message: Message) -> str:
    """The message as a reader sees it: visible text, links as ``title <url>``, and the inline
    keyboard (if any) as a last line ``[重点] [简讯] [经典回顾]``."""
    payload = message.payload
    out = text_with_links(str(payload["text"]))
    markup = payload.get("reply_markup")
    if markup:
        rows = markup.get("inline_keyboard", [])
        out += "\n" + "\n".join(" ".join(f"[{b['text']}]" for b in row) for row in rows)
    return out


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as HTML messages without link previews; ``@username`` mentions are muted
    as in posts (notices quote issue text, e.g. search hits) unless ``mentions``."""
    return [
        Message(
            {
                "text": escape_text(chunk if mentions else mute_mentions(chunk)),
                "parse_mode": "HTML",
                "link_preview_options": {"is_disabled": True},
            }
        )
        for chunk in chunk_lines(text, Limits.notice_maxlen, utf16_len)
    ]


def corrected(message: Message, note: str) -> Message:
    """``message`` with ``note`` (a correction mark) as an italic last line; the message as
    it is when the note would push it past :attr:`Limits.body_maxlen`."""
    html = f"{message.payload['text']}\n\n<i>{escape_text(note)}</i>"
    if utf16_len(checked_visible_text(html)) > Limits.body_maxlen:
        log.info("no room for the correction mark in a message; edited without it")
        return message
    return Message({**message.payload, "text": html})
