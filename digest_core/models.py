"""The issue model: Issue, Item, Section (pydantic v2, frozen); its JSON schema is the contract."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import urllib.parse
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any

from annotated_types import MaxLen
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# --- caps -----------------------------------------------------------------------------------
# One place for every size limit of an issue, so the loaders, the JSON schema (maxItems,
# maxLength) and the README agree. A real issue is far inside all of them (4-8 briefs of one to
# three short paragraphs); they exist so that a runaway or hostile file is refused at its line
# instead of freezing the bot or producing hundreds of messages.

#: Briefs in one issue.
MAX_BRIEFS = 200
#: Body paragraphs in one item.
MAX_PARAGRAPHS = 200
#: Source links of one item.
MAX_LINKS = 20
#: Characters in a title or the masthead. A real title is under 60; the cap is generous (the
#: renderers already cut what Discord's 256-character embed titles cannot show) and keeps one
#: title well inside one message.
MAX_TITLE_CHARS = 500
#: Characters in one paragraph, the lede or a reading question. A real paragraph is a few
#: hundred; at most two Telegram messages (4096) carry one paragraph this long.
MAX_PARAGRAPH_CHARS = 8000
#: The longest source link accepted, in characters. Real article URLs are far shorter; browsers
#: and chat clients handle up to about this much, and a renderer can always fit a link this
#: long in a Discord message (2000 characters) or embed description (4096) once escaped.
MAX_URL_CHARS = 2000

#: What a link line starts with, in the text format and in the model (lower case, as written).
URL_PREFIXES: tuple[str, ...] = ("http://", "https://")
#: What introduces an item's reading question, in Chinese and English.
QUESTION_MARKERS: tuple[str, ...] = (
    "带着一个问题读：",
    "带着一个问题读:",
    "A question to read with:",
)
#: The marker written when serialising a question back to text.
QUESTION_MARKER = "带着一个问题读："

# --- characters -----------------------------------------------------------------------------

#: Characters no text of an issue may hold: C0 controls but tab (which is read as a space),
#: DEL and the C1 controls (ESC and CSI start terminal escape sequences, NUL truncates strings
#: in C libraries), and the bidi embeddings, overrides and isolates that reorder what a reader
#: or a terminal shows (U+202A-U+202E, U+2066-U+2069); and lone surrogates (U+D800-U+DFFF,
#: which JSON's ``\\ud800`` escapes can produce), which no platform can encode.
_FORBIDDEN = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: Names of the characters people meet most, for messages.
_CHAR_NAMES = {
    "\x00": "NUL",
    "\x1b": "ESC, which starts terminal escape sequences",
    "\x7f": "DEL",
    "\x9b": "CSI, which starts terminal escape sequences",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u202b": "RIGHT-TO-LEFT EMBEDDING",
    "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE",
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE",
    "\u2068": "FIRST STRONG ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
}


def char_problem(value: str) -> str | None:
    """Why ``value`` may not be issue text (a forbidden character, named), or ``None``.

    Tab is allowed here: the model turns it into a space. Line breaks are forbidden (every
    text of an issue is one line).
    """
    m = _FORBIDDEN.search(value)
    if m is None:
        return None
    char = m[0]
    if char in "\n\r":
        return "must be a single line (the text format is one line per paragraph)"
    if "\ud800" <= char <= "\udfff":
        kind = "lone surrogate"
    else:
        kind = "bidi control" if char >= "\u2000" else "control character"
    name = _CHAR_NAMES.get(char)
    named = f"U+{ord(char):04X}" + (f" ({name})" if name else "")
    return f"holds the {kind} {named} at column {m.start() + 1}; remove it"


def escape(text: str) -> str:
    """``text`` with every non-printable character written as a Python escape (``\\x1b``,
    ``\\u202e``, ``\\t``), so quoting file content in a message never reaches a terminal raw."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


def counted(n: int, noun: str) -> str:
    """``1 brief``, ``2 briefs``: ``n`` with ``noun`` (English, plural by ``s``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def shorten(text: str, limit: int = 60) -> str:
    """The first ``limit`` characters of ``text`` (``…`` marks a cut), escaped for messages."""
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


def url_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable source link, or ``None``.

    A link is an absolute ``http://`` or ``https://`` URL (the scheme written in lower case,
    as the text format recognises link lines by it) that :func:`urllib.parse.urlsplit` reads
    with a host and a valid port, has no user info (``https://bank.example@evil.example/``
    shows one host and opens another), and holds no whitespace, quotes (``"``, ``'`` and
    `````: an apostrophe in a path is written ``%27``),
    ``<``, ``>``, backslash or invisible character (controls, bidi and zero-width characters:
    anything :meth:`str.isprintable` refuses). It is at most :data:`MAX_URL_CHARS` long.
    The answer quotes at most 60 characters of the value, escaped.
    """
    if len(value) > MAX_URL_CHARS:
        return (
            f"is {len(value)} characters long; at most {MAX_URL_CHARS} are allowed "
            f"(starts {shorten(value)!r})"
        )
    shown = repr(shorten(value))
    if not value.startswith(URL_PREFIXES):
        return f"is not an http(s) URL (it must start with http:// or https://): {shown}"
    bad = next((c for c in value if not c.isprintable() or c in " \"'`<>\\"), None)
    if bad is not None:
        what = "a space" if bad.isspace() else f"the character {escape(bad)!r}"
        if bad == "'":
            what += " (write an apostrophe as %27)"
        return f"is not an http(s) URL: it holds {what}: {shown}"
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018  # raises ValueError for a bad port
    except ValueError as exc:
        return f"is not an http(s) URL ({exc}): {shown}"
    if "@" in parts.netloc:
        return (
            "is not an http(s) URL: it has user info before an @ in the host part, which "
            f"disguises where the link goes: {shown}"
        )
    host = parts.hostname or ""
    if not re.fullmatch(r"[\w.-]+|[0-9a-f:.]+", host) or host.strip(".") == "":
        return f"is not an http(s) URL: it has no valid host: {shown}"
    return None


def text_problem(value: str, limit: int) -> str | None:
    """Why ``value`` (already stripped) may not be a text of at most ``limit`` characters."""
    if not value:
        return "must not be empty"
    problem = char_problem(value)
    if problem is not None:
        return problem
    if len(value) > limit:
        return (
            f"is {len(value)} characters long; at most {limit} are allowed "
            f"(starts {shorten(value, 40)!r})"
        )
    return None


def _text(limit: int) -> AfterValidator:
    def check(value: str) -> str:
        value = value.replace("\t", " ").strip()
        problem = text_problem(value, limit)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def _url(value: str) -> str:
    value = value.strip()
    problem = url_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# The validator gives the message; MaxLen (never reached) puts the cap in the JSON schema.
#: A one-line text of at most :data:`MAX_TITLE_CHARS` (title, masthead).
Title = Annotated[str, _text(MAX_TITLE_CHARS), MaxLen(MAX_TITLE_CHARS)]
#: A one-line text of at most :data:`MAX_PARAGRAPH_CHARS` (paragraph, lede, question).
Line = Annotated[str, _text(MAX_PARAGRAPH_CHARS), MaxLen(MAX_PARAGRAPH_CHARS)]
#: A source link, as :func:`url_problem` defines it.
Url = Annotated[str, AfterValidator(_url), MaxLen(MAX_URL_CHARS)]


class Section(StrEnum):
    """The three sections of an issue, in publishing order."""

    HEADLINE = "headline"
    BRIEFS = "briefs"
    CLASSIC = "classic"

    @property
    def label(self) -> str:
        """The Chinese section label used in the published text and in posts."""
        return _LABELS[self]


_LABELS = {Section.HEADLINE: "重点", Section.BRIEFS: "简讯", Section.CLASSIC: "经典回顾"}


class Item(BaseModel):
    """One story: a title, one or more paragraphs, source links and an optional reading question.

    Every text is one line without control or bidi characters (a tab becomes a space). Caps:
    a title of at most MAX_TITLE_CHARS characters; 1 to MAX_PARAGRAPHS paragraphs and a
    question of at most MAX_PARAGRAPH_CHARS each; at most MAX_LINKS links, each an http(s)
    URL as url_problem defines it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: Title
    paragraphs: tuple[Line, ...] = Field(min_length=1, max_length=MAX_PARAGRAPHS)
    links: tuple[Url, ...] = Field(default=(), max_length=MAX_LINKS)
    question: Line | None = None

    @property
    def url(self) -> str | None:
        """The first source link, which titles link to."""
        return self.links[0] if self.links else None

    def text_pieces(self) -> list[str]:
        """Every piece of reader-visible text of the item, in order (for search and tests)."""
        pieces = [self.title, *self.paragraphs]
        if self.question:
            pieces.append(self.question)
        return pieces


class Issue(BaseModel):
    """One day's digest.

    At most :data:`MAX_BRIEFS` briefs; the masthead is capped like a title, the lede like a
    paragraph. ``revision`` is a stable hash of the content (date included): a corrected file
    yields a new revision, an unchanged one the same, whatever the file format it came from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    date: dt.date
    masthead: Title = "AI 技术日报"
    lede: Line | None = None
    headline: Item
    briefs: tuple[Item, ...] = Field(default=(), max_length=MAX_BRIEFS)
    classic: Item | None = None

    @cached_property
    def revision(self) -> str:
        """12 hex digits of the SHA-256 of the canonical JSON form."""
        canonical = self.model_dump_json(exclude_none=False).encode("utf-8")
        return hashlib.sha256(canonical).hexdigest()[:12]

    @property
    def ref(self) -> IssueRef:
        return IssueRef(date=self.date, revision=self.revision)

    def items(self) -> list[tuple[Section, Item]]:
        """All items with their section, in publishing order."""
        out: list[tuple[Section, Item]] = [(Section.HEADLINE, self.headline)]
        out.extend((Section.BRIEFS, b) for b in self.briefs)
        if self.classic is not None:
            out.append((Section.CLASSIC, self.classic))
        return out

    def brief(self, n: int) -> Item:
        """Brief number ``n``, counted from 1.

        Raises:
            IndexError: when there is no such brief.
        """
        if not 1 <= n <= len(self.briefs):
            has = counted(len(self.briefs), "brief")
            raise IndexError(f"brief {n} does not exist; this issue has {has}")
        return self.briefs[n - 1]


class IssueRef(BaseModel):
    """Which revision of which day's issue: what the delivery ledger records."""

    model_config = ConfigDict(frozen=True)

    date: dt.date
    revision: str


def issue_json_schema() -> dict[str, Any]:
    """The JSON schema of the structured form: the contract for editorial tools."""
    return Issue.model_json_schema()
