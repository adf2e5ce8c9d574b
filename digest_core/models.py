"""The issue model: Issue, Item, Section (pydantic v2, frozen); its JSON schema is the contract."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

URL_RE = re.compile(r"^https?://\S+$")
#: The longest source link accepted, in characters. Real article URLs are far shorter; browsers
#: and chat clients handle up to about this much, and a renderer can always fit a link this
#: long in a Discord message (2000 characters) or embed description (4096) once escaped.
MAX_URL_CHARS = 2000
#: What introduces an item's reading question, in Chinese and English.
QUESTION_MARKERS: tuple[str, ...] = (
    "带着一个问题读：",
    "带着一个问题读:",
    "A question to read with:",
)
#: The marker written when serialising a question back to text.
QUESTION_MARKER = "带着一个问题读："


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


def _one_line(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("must not be empty")
    if "\n" in value or "\r" in value:
        raise ValueError("must be a single line (the text format is one line per paragraph)")
    return value


def _url(value: str) -> str:
    value = value.strip()
    if not URL_RE.match(value):
        raise ValueError(f"not an http(s) URL: {value!r}")
    if len(value) > MAX_URL_CHARS:
        raise ValueError(
            f"URL is {len(value)} characters long; at most {MAX_URL_CHARS} are allowed "
            f"(starts {value[:60]!r})"
        )
    return value


Line = Annotated[str, AfterValidator(_one_line)]
Url = Annotated[str, AfterValidator(_url)]


class Item(BaseModel):
    """One story: a title, one or more paragraphs, source links and an optional reading question."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: Line
    paragraphs: tuple[Line, ...] = Field(min_length=1)
    links: tuple[Url, ...] = ()
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

    ``revision`` is a stable hash of the content (date included): a corrected file yields a new
    revision, an unchanged one the same, whatever the file format it came from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    date: dt.date
    masthead: Line = "AI 技术日报"
    lede: Line | None = None
    headline: Item
    briefs: tuple[Item, ...] = ()
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
            raise IndexError(f"brief {n} does not exist; this issue has {len(self.briefs)} briefs")
        return self.briefs[n - 1]


class IssueRef(BaseModel):
    """Which revision of which day's issue: what the delivery ledger records."""

    model_config = ConfigDict(frozen=True)

    date: dt.date
    revision: str


def issue_json_schema() -> dict[str, Any]:
    """The JSON schema of the structured form: the contract for editorial tools."""
    return Issue.model_json_schema()
