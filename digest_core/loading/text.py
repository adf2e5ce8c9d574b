"""The published text format (.txt) of FORMAT.md: a strict parser and the canonical writer."""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from digest_core.errors import IssueFormatError
from digest_core.loading.structured import Loc, format_loc, validation_problems
from digest_core.models import (
    MAX_BRIEFS,
    MAX_LINKS,
    MAX_PARAGRAPH_CHARS,
    MAX_PARAGRAPHS,
    MAX_TITLE_CHARS,
    QUESTION_MARKER,
    QUESTION_MARKERS,
    URL_PREFIXES,
    Issue,
    Item,
    Section,
    char_problem,
    shorten,
    text_problem,
    url_problem,
)

log = logging.getLogger(__name__)

#: Lines that open a section (compared after stripping surrounding whitespace, case-sensitive).
SECTION_LABELS: dict[str, Section] = {
    "重点": Section.HEADLINE,
    "简讯": Section.BRIEFS,
    "经典回顾": Section.CLASSIC,
    "Headline": Section.HEADLINE,
    "Briefs": Section.BRIEFS,
    "Classic": Section.CLASSIC,
}
#: Characters dropped when a line is compared with the labels for "did you mean": spaces
#: anywhere (ASCII, full-width, no-break) and a trailing colon, ASCII or full-width.
_NEAR_LABEL_SPACE = re.compile(r"[\s\u3000\u00a0]+")
#: What starts the lede line; the first is written.
LEDE_PREFIXES: tuple[str, ...] = ("本期重点：", "本期重点:")
#: The question marker written for an English item (one without any CJK character).
ENGLISH_QUESTION_MARKER = "A question to read with: "

_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_ITEM_NOUN = {
    Section.HEADLINE: "headline",
    Section.BRIEFS: "brief",
    Section.CLASSIC: "classic review",
}
_LABEL_LIST = "重点, 简讯 or 经典回顾"


def parse_text(
    text: str, *, path: str | Path = "<text>", date: dt.date, hints: list[Hint] | None = None
) -> Issue:
    """Parse an issue from the published text format.

    The rules are FORMAT.md's: line 1 is the masthead; before the first section only the lede
    (``本期重点：…``) and blank lines may appear; a section label line opens a section; an item is a
    title line, body lines (one paragraph each) and link lines. A line starting with ``http://``
    or ``https://`` is a link line and MUST be a valid link (see ``models.url_problem``).
    No line may hold a control character (tab excepted: it reads as a space) or a bidi control,
    and the model's caps (briefs, paragraphs and links per item, text lengths) are checked at
    the line that passes them, so a huge file fails fast. A new item starts at the first
    non-link line after links, or after a blank line; a linkless item therefore runs on until a
    blank line or a section label (the parser cannot tell a following title from a paragraph, so
    writers MUST put a blank line after a linkless item). A body line starting with one of
    ``QUESTION_MARKERS`` is the item's reading question and MUST be its last body line; without
    one, a marker inside the last paragraph splits it into paragraph and question.

    A line that is almost a section label (``简讯：``, extra spaces, another case) is an error
    that names the label. With ``hints``, lines that load but are probably a mistake are
    appended to it (:class:`Hint`): a body line that is a bare domain or path
    (``example.org/x``), which is text, not the item's link.

    Time is linear in the size of the text.

    Raises:
        IssueFormatError: ``path:line: detail`` for the first problem found, naming the item and
            what was expected instead; quoted file content is shortened and escaped.
    """
    return _Parser(str(path), date, hints).parse(text)


def dump_text(issue: Issue) -> str:
    """Write ``issue`` in the canonical text format; ``parse_text(dump_text(i)) == i``.

    Canonical means: LF line endings and a final newline, Chinese section labels, the lede as
    ``本期重点：…``, no blank lines except after a linkless item that another item follows, and the
    question as the item's last body line. The question marker is ``带着一个问题读：`` unless the
    item has no CJK character at all (an English item), which gets ``A question to read with: ``.

    Raises:
        IssueFormatError: (with no line) when the issue cannot be written so that it reads back
            the same, e.g. a paragraph that is a section label or a bare URL.
    """
    _check_representable(issue)
    lines = [issue.masthead]
    if issue.lede is not None:
        lines.append(LEDE_PREFIXES[0] + issue.lede)
    sections: list[tuple[Section, tuple[Item, ...]]] = [
        (Section.HEADLINE, (issue.headline,)),
        (Section.BRIEFS, issue.briefs),
        (Section.CLASSIC, (issue.classic,) if issue.classic is not None else ()),
    ]
    for section, items in sections:
        if not items:
            continue
        lines.append(section.label)
        for n, item in enumerate(items):
            if n and not items[n - 1].links:
                lines.append("")
            lines.append(item.title)
            lines.extend(item.paragraphs)
            if item.question is not None:
                lines.append(question_marker(item) + item.question)
            lines.extend(item.links)
    return "\n".join(lines) + "\n"


def question_marker(item: Item) -> str:
    """The marker :func:`dump_text` writes before ``item``'s question."""
    if any(_CJK.search(piece) for piece in item.text_pieces()):
        return QUESTION_MARKER
    return ENGLISH_QUESTION_MARKER


def near_label(line: str) -> str | None:
    """The section label ``line`` (stripped) almost is — ``简讯：``, ``简讯 :``, ``简 讯``,
    ``Briefs:`` — or ``None`` (also for an exact label). Case still counts: ``briefs`` is a
    word, as labels are case-sensitive."""
    if line in SECTION_LABELS or len(line) > 20:
        return None
    key = _NEAR_LABEL_SPACE.sub("", line).rstrip(":：")
    return key if key in SECTION_LABELS else None


@dataclass(frozen=True)
class Hint:
    """A line that loads but is probably not what the editor meant (a warning, not an error):
    ``str(hint)`` is ``path:line: warning: detail``."""

    path: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: warning: {self.detail}"


#: a line that is one bare domain or path: ``example.org/a``, ``www.example.org``,
#: ``htps://example.org`` (with a mistyped scheme, so not a link line)
_BARE_LINK = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*:/*)?(?P<www>www\.)?"
    r"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?P<tld>[a-z]{2,24})(?::[0-9]{1,5})?(?P<path>[/?#]\S*)?",
    re.IGNORECASE,
)
#: top-level domains common enough that a bare ``name.tld`` line is taken for a link
_COMMON_TLDS = frozenset(
    {"com", "org", "net", "io", "ai", "dev", "edu", "gov", "cn", "co", "me", "app", "info"}
    | {"xyz", "uk", "de", "jp", "fr", "hk", "tw", "sg", "in"}
)


def bare_link(line: str) -> bool:
    """True when ``line`` is one token that reads as a link written without ``https://``: a
    host with a path, ``www.``, a mistyped scheme, or a common top-level domain."""
    m = _BARE_LINK.fullmatch(line)
    if m is None:
        return False
    return bool(m["scheme"] or m["www"] or m["path"]) or m["tld"].lower() in _COMMON_TLDS


def _quote(text: str, limit: int = 40) -> str:
    return f'"{shorten(text, limit)}"'


def _marker_at_start(line: str) -> str | None:
    return next((m for m in QUESTION_MARKERS if line.startswith(m)), None)


def _marker_inside(line: str) -> tuple[int, str] | None:
    """The first question marker after the start of ``line``: (position, marker)."""
    found = [(pos, m) for m in QUESTION_MARKERS if (pos := line.find(m, 1)) > 0]
    return min(found) if found else None


@dataclass
class _Draft:
    """An item being read, with the line of each piece for error messages."""

    section: Section
    title: str
    line: int
    paragraphs: list[tuple[str, int]] = field(default_factory=list)
    links: list[tuple[str, int]] = field(default_factory=list)
    question: tuple[str, int] | None = None

    @property
    def name(self) -> str:
        return f"{_ITEM_NOUN[self.section]} {_quote(self.title)}"


class _Parser:
    """One pass over the lines; raises at the first problem."""

    def __init__(self, path: str, date: dt.date, hints: list[Hint] | None = None) -> None:
        self.path = path
        self.date = date
        self.hints = hints
        self.masthead = ""
        self.lede: tuple[str, int] | None = None
        self.section: Section | None = None
        self.section_line: dict[Section, int] = {}
        self.items: dict[Section, list[_Draft]] = {s: [] for s in Section}
        self.draft: _Draft | None = None
        self.last_line = 0

    def fail(self, line: int | None, detail: str) -> IssueFormatError:
        return IssueFormatError(self.path, line, detail)

    def parse(self, text: str) -> Issue:
        text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
        if not text.strip():
            raise self.fail(1, "the file is empty; expected the masthead (e.g. AI 技术日报)")
        lines = text.split("\n")
        self.check_chars(lines[0], 1)
        self.read_masthead(lines[0].strip())
        for number, raw in enumerate(lines[1:], start=2):
            self.check_chars(raw, number)
            self.read_line(raw.strip(), number)
        self.last_line = len(lines) - (lines[-1] == "")
        self.close_section()
        return self.build()

    def check_chars(self, raw: str, number: int) -> None:
        if "\t" in raw:
            raw = raw.replace("\t", " ")
        problem = char_problem(raw)
        if problem is not None:
            raise self.fail(number, f"the line {problem}")

    def check_text(self, what: str, text: str, limit: int, number: int) -> None:
        problem = text_problem(text, limit)
        if problem is not None:
            raise self.fail(number, f"{what} {problem}")

    def read_masthead(self, line: str) -> None:
        if not line:
            found = "a blank line"
        elif line in SECTION_LABELS:
            found = f"the section label {_quote(line)}"
        elif line.startswith(LEDE_PREFIXES):
            found = "the lede"
        else:
            self.check_text("the masthead", line, MAX_TITLE_CHARS, 1)
            self.masthead = line
            return
        raise self.fail(1, f"line 1 must be the masthead (e.g. AI 技术日报) but it is {found}")

    def read_line(self, line: str, number: int) -> None:
        if not line:
            self.close_item()
        elif line in SECTION_LABELS:
            self.open_section(SECTION_LABELS[line], number)
        elif (label := near_label(line)) is not None:
            raise self.fail(
                number,
                f"{_quote(line)} is not a section label: did you mean {label}? (a label "
                "stands alone on its line, without a colon or spaces)",
            )
        elif self.section is None:
            self.read_preamble(line, number)
        elif line.startswith(URL_PREFIXES):
            self.read_link(line, number)
        elif self.draft is None or self.draft.links:
            self.start_item(line, number)
        else:
            self.read_body(self.draft, line, number)

    def read_preamble(self, line: str, number: int) -> None:
        prefix = next((p for p in LEDE_PREFIXES if line.startswith(p)), None)
        if prefix is None:
            or_lede = "" if self.lede else "the lede (本期重点：…) or "
            expected = f"{or_lede}a section label"
            raise self.fail(number, f"expected {expected} ({_LABEL_LIST}) but found {_quote(line)}")
        if self.lede is not None:
            raise self.fail(number, f"a second lede line; the first is on line {self.lede[1]}")
        lede = line[len(prefix) :].strip()
        if not lede:
            raise self.fail(number, f"the lede line has no text after {prefix}")
        self.check_text("the lede", lede, MAX_PARAGRAPH_CHARS, number)
        self.lede = (lede, number)

    def open_section(self, section: Section, number: int) -> None:
        self.close_section()
        if section in self.section_line:
            first = self.section_line[section]
            raise self.fail(
                number, f"a second {section.label} section; it was opened on line {first}"
            )
        self.section = section
        self.section_line[section] = number

    def close_section(self) -> None:
        self.close_item()
        if self.section is not None and not self.items[self.section]:
            label = self.section.label
            raise self.fail(
                self.section_line[self.section],
                f"the {label} section has no item; add one or remove the label",
            )

    def start_item(self, line: str, number: int) -> None:
        assert self.section is not None
        marker = _marker_at_start(line)
        if marker is not None:
            after = f" of {self.draft.name}" if self.draft is not None else ""
            raise self.fail(
                number,
                f"expected the title of a {_ITEM_NOUN[self.section]} but found a reading question"
                f"{after}; the question goes after the body, before the links",
            )
        if self.section is not Section.BRIEFS and self.items[self.section]:
            raise self.fail(
                number,
                f"the {self.section.value} section holds exactly one item, "
                f"found a second: {_quote(line)}",
            )
        items = self.items[self.section]
        if len(items) >= MAX_BRIEFS:  # only the briefs section gets here with items
            raise self.fail(
                number,
                f"too many briefs: an issue holds at most {MAX_BRIEFS}, and this line starts "
                f"brief {len(items) + 1} ({_quote(line)})",
            )
        self.close_item()
        self.draft = _Draft(self.section, line, number)
        self.check_text(f"the title of {self.draft.name}", line, MAX_TITLE_CHARS, number)
        items.append(self.draft)

    def read_link(self, line: str, number: int) -> None:
        draft = self.draft
        if draft is None:
            assert self.section is not None
            raise self.fail(
                number,
                f"expected the title of a {_ITEM_NOUN[self.section]} but found the link "
                f"{_quote(line)}; links go after an item's body",
            )
        if not draft.paragraphs:
            raise self.no_body(draft)
        problem = url_problem(line)
        if problem is not None:
            raise self.fail(number, f"{draft.name}: the link on line {number} {problem}")
        if len(draft.links) >= MAX_LINKS:
            raise self.fail(
                number, f"{draft.name} has more than {MAX_LINKS} links; at most {MAX_LINKS} allowed"
            )
        draft.links.append((line, number))

    def read_body(self, draft: _Draft, line: str, number: int) -> None:
        if draft.question is not None:
            raise self.fail(
                number,
                f"{draft.name}: only links may follow the reading question (line "
                f"{draft.question[1]}), found {_quote(line)}; end the item with a blank line",
            )
        marker = _marker_at_start(line)
        if marker is None:
            if len(draft.paragraphs) >= MAX_PARAGRAPHS:
                raise self.fail(
                    number,
                    f"{draft.name} has more than {MAX_PARAGRAPHS} paragraphs; at most "
                    f"{MAX_PARAGRAPHS} are allowed (one line is one paragraph)",
                )
            self.check_text(f"{draft.name}: the paragraph", line, MAX_PARAGRAPH_CHARS, number)
            draft.paragraphs.append((line, number))
            if self.hints is not None and bare_link(line):
                self.hints.append(
                    Hint(
                        self.path,
                        number,
                        f"{draft.name}: the body line {_quote(line)} looks like a link without "
                        "https://; it is shown as text. To make it the item's link, write it "
                        "in full (https://…) on its own line after the body",
                    )
                )
            return
        question = line[len(marker) :].strip()
        if not question:
            raise self.fail(number, f"{draft.name} has an empty reading question after {marker}")
        what = f"{draft.name}: the reading question"
        self.check_text(what, question, MAX_PARAGRAPH_CHARS, number)
        draft.question = (question, number)

    def close_item(self) -> None:
        draft, self.draft = self.draft, None
        if draft is None:
            return
        if not draft.paragraphs:
            raise self.no_body(draft)
        if draft.question is None:
            last, number = draft.paragraphs[-1]
            inside = _marker_inside(last)
            if inside is not None:
                pos, marker = inside
                question = last[pos + len(marker) :].strip()
                if not question:
                    raise self.fail(
                        number, f"{draft.name} has an empty reading question after {marker}"
                    )
                draft.paragraphs[-1] = (last[:pos].rstrip(), number)
                draft.question = (question, number)
                if not draft.paragraphs[-1][0]:  # a guard: the marker is never at the start
                    raise self.fail(number, f"{draft.name}: the paragraph must not be empty")

    def no_body(self, draft: _Draft) -> IssueFormatError:
        if draft.question is not None:
            return self.fail(draft.line, f"{draft.name} has a reading question but no body")
        return self.fail(draft.line, f"{draft.name} has a title but no body")

    def build(self) -> Issue:
        if not self.items[Section.HEADLINE]:
            raise self.no_headline()
        lines: dict[Loc, int] = {("masthead",): 1}
        fields: dict[str, Any] = {"date": self.date, "masthead": self.masthead}
        if self.lede is not None:
            fields["lede"] = self.lede[0]
            lines[("lede",)] = self.lede[1]
        items = {
            s: [
                self.item_fields(d, lines, n if s is Section.BRIEFS else None)
                for n, d in enumerate(self.items[s])
            ]
            for s in Section
        }
        fields["headline"] = items[Section.HEADLINE][0]
        fields["briefs"] = items[Section.BRIEFS]
        if items[Section.CLASSIC]:
            fields["classic"] = items[Section.CLASSIC][0]
        try:
            return Issue.model_validate(fields)
        except ValidationError as exc:  # the parser checks the model's rules, so this is a guard
            loc, msg, at = validation_problems(exc)[0]
            line = next((lines[at[:n]] for n in range(len(at), 0, -1) if at[:n] in lines), None)
            raise self.fail(line, f"{format_loc(loc)}: {msg}") from exc

    def no_headline(self) -> IssueFormatError:
        """No 重点 section: name the line where it was expected, before the first section there
        is, or after the last line when the file has none."""
        label = Section.HEADLINE.label
        if self.section_line:
            section, line = min(self.section_line.items(), key=lambda kv: kv[1])
            where = f"expected it before the {section.label} section, which opens here"
        else:
            line = self.last_line + 1
            where = "expected it after the masthead and lede, but the file ends here"
        return self.fail(line, f"no headline: the issue needs a {label} section; {where}")

    def item_fields(
        self, draft: _Draft, lines: dict[Loc, int], index: int | None
    ) -> dict[str, Any]:
        base: Loc = (draft.section.value,)
        if index is not None:
            base += (index,)
        lines[base] = lines[(*base, "title")] = draft.line
        for n, (_, line) in enumerate(draft.paragraphs):
            lines[(*base, "paragraphs", n)] = line
        for n, (_, line) in enumerate(draft.links):
            lines[(*base, "links", n)] = line
        out: dict[str, Any] = {
            "title": draft.title,
            "paragraphs": [p for p, _ in draft.paragraphs],
            "links": [u for u, _ in draft.links],
        }
        if draft.question is not None:
            out["question"] = draft.question[0]
            lines[(*base, "question")] = draft.question[1]
        return out


def _check_representable(issue: Issue) -> None:
    """Raise when some text of ``issue`` would read back as something else."""

    def fail(where: str, detail: str) -> IssueFormatError:
        return IssueFormatError(
            f"<issue {issue.date}>", None, f"{where}: {detail}; the text format cannot hold it"
        )

    masthead = issue.masthead
    if masthead in SECTION_LABELS or masthead.startswith((*LEDE_PREFIXES, "\ufeff")):
        raise fail("masthead", f"{_quote(masthead)} would not read back as the masthead")
    named = [(f"headline {_quote(issue.headline.title)}", issue.headline)]
    named += [(f"brief {n} {_quote(b.title)}", b) for n, b in enumerate(issue.briefs, start=1)]
    if issue.classic is not None:
        named.append((f"classic review {_quote(issue.classic.title)}", issue.classic))
    for name, item in named:
        for n, line in enumerate((item.title, *item.paragraphs)):
            what = f"paragraph {n}" if n else "the title"
            if line in SECTION_LABELS:
                raise fail(name, f"{what} is the section label {_quote(line)}")
            if near_label(line) is not None:
                raise fail(name, f"{what} is almost the section label {_quote(line)}")
            if line.startswith(URL_PREFIXES):
                raise fail(name, f"{what} starts with a link, so it would read back as a link line")
            if _marker_at_start(line):
                raise fail(name, f"{what} starts with a question marker")
        if item.question is None and _marker_inside(item.paragraphs[-1]):
            raise fail(name, "its last paragraph holds a question marker but it has no question")
