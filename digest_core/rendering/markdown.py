"""Discord markdown: reversible escaping of issue text, safe link URLs and a reader's view of it."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Discord's parser (simple-markdown) treats a backslash before any ASCII punctuation as an escape,
# so every one of these, prefixed with "\", shows as itself: formatting (* _ ~ ` |), quotes (>),
# masked links ([ ] ( )), autolinks and mentions (< >), and the escape itself.
# https://support.discord.com/hc/en-us/articles/210298617
ESCAPED_ANYWHERE = frozenset("\\*_~`|<>[]()")
# Markers that only mean something at the start of a line: headings "# ", subtext "-# ",
# lists "- " / "* " / "+ "; "1. " (ordered lists) is handled by escaping its dot.
ESCAPED_AT_LINE_START = frozenset("#-+")
# Discord pings on "@everyone" / "@here" and renders "<@id>", "<@&id>", "<#id>" as mentions.
# A zero-width space after every "@" (as discord.utils.escape_mentions does) and the escaped "<"
# make all of them inert, in addition to the payload's allowed_mentions {"parse": []}.
ZWSP = "\u200b"
# Characters percent-encoded in a URL written inside "(<...>)" or "<...>": they could close the
# link or the autolink, or be read as markdown by a lenient client.
URL_UNSAFE = {c: f"%{ord(c):02X}" for c in "()<>[]\\\"`' "}
# "@everyone" / "@here" in a URL would read as a mention (Discord finds them anywhere in the raw
# content). The letter after the "@" is percent-encoded: an unreserved character and its "%XX"
# form are equivalent in every part of a URL (RFC 3986 section 2.3; WHATWG URL decodes it in
# hosts too), whereas "%40" for "@" would break a URL whose "@" ends the userinfo.
URL_MENTIONS = {"@everyone": "@%65veryone", "@here": "@%68ere"}

# A URL in running text, roughly as Discord's autolink rule finds it (no trailing punctuation).
# escape() wraps it in "<...>" so markdown escapes never land inside the link target. The URL
# ends before an "@everyone" / "@here" in it, which is then defused like any other text.
_URL_CHAR = r"(?!@(?:everyone|here))[^\s<>"
_URL_IN_TEXT = re.compile(rf"https?://(?:{_URL_CHAR}])*{_URL_CHAR}.,:;\"')\]]")
# What _escape_plain changes: the characters escaped anywhere and "@"; then, at a line start,
# "1. " (before its dot) and "# ", "- ", "+ " (before the marker). A line-start match ends where
# the backslash goes. The patterns after a line break begin with the literal "\n", which the
# regex engine looks for quickly ("^" in multiline mode is tried at every position).
_ANYWHERE = re.compile("[" + "".join(re.escape(c) for c in sorted(ESCAPED_ANYWHERE)) + "]")
_NEEDS_ESCAPE = re.compile(_ANYWHERE.pattern[:-1] + "@]")
_LINE_MARKER = (
    r"[ \t]*(?:\d+(?=\.[ \t])|(?=["
    + "".join(re.escape(c) for c in sorted(ESCAPED_AT_LINE_START))
    + "]))"
)
_AT_LINE_START = re.compile(_LINE_MARKER)  # used with match(): at the start of the text only
_AFTER_LINE_BREAK = re.compile("\n" + _LINE_MARKER)
_EVERYONE = re.compile(r"@(?:everyone|here)")
_MENTION = re.compile(r"<@[!&]?\d+>|<#\d+>")


def escape(text: str, *, line_start: bool = True) -> str:
    """Escape ``text`` so Discord shows it literally and pings nobody.

    ``read(escape(t), markup=False, links=False) == t`` for every string ``t``. ``line_start``
    says whether ``text`` begins a line (so "# ", "- ", "1. " must be defused); escaping a
    mid-line text as if it began a line is harmless. URLs in the text are wrapped in ``<...>``
    (shown as the bare link).
    """
    out: list[str] = []
    pos = 0
    while m := _URL_IN_TEXT.search(text, pos):
        end = m.end()
        # keep a closing parenthesis that balances one in the URL (Wikipedia-style links)
        while text.startswith(")", end) and text.count("(", m.start(), end) > text.count(
            ")", m.start(), end
        ):
            end += 1
        out.append(_escape_plain(text[pos : m.start()], line_start and pos == 0))
        out.append(f"<{text[m.start() : end]}>")
        pos = end
    out.append(_escape_plain(text[pos:], line_start and pos == 0))
    return "".join(out)


def _escape_plain(text: str, line_start: bool) -> str:
    """``text`` (no URL in it) escaped: every :data:`ESCAPED_ANYWHERE` character gets a
    backslash, every "@" a ZWSP after it, and at each line start (the start of ``text`` only if
    ``line_start``) the dot of "1. " or a marker of :data:`ESCAPED_AT_LINE_START` a backslash.

    A few regular-expression passes in C instead of a loop over the characters: the anywhere
    escapes leave spaces, tabs, digits, dots, line breaks and the line-start markers alone, so
    the line-start passes find on the escaped text exactly the places they would find on ``text``.
    """
    if _NEEDS_ESCAPE.search(text) is not None:
        # a function, not a template: Python 3.11 runs templates with group references in Python
        text = _ANYWHERE.sub(_backslash_before, text)
        if "@" in text:
            text = text.replace("@", "@" + ZWSP)
    if line_start and (m := _AT_LINE_START.match(text)):
        text = f"{text[: m.end()]}\\{text[m.end() :]}"
    if "\n" in text:
        text = _AFTER_LINE_BREAK.sub(_backslash_after, text)
    return text


def _backslash_before(m: re.Match[str]) -> str:
    return "\\" + m.group()


def _backslash_after(m: re.Match[str]) -> str:
    return m.group() + "\\"


def visible(markdown: str, *, links: bool = False) -> str:
    """What a reader sees for the markdown this package writes (escaped text, ``**bold**``,
    ``[text](<url>)``, ``<url>``, ``> `` quotes), as plain text.

    With ``links``, a masked link shows as ``text <url>``; otherwise as its text only.
    """
    return read(markdown, markup=True, links=links)


@dataclass(frozen=True)
class Dialect:
    """How a backslash-escaping markdown writes a masked link's target, and whether ``<...>``
    is an autolink (shown as its content)."""

    link_open: str
    link_close: str
    autolinks: bool


#: ``[text](<url>)`` (Discord's: no preview) and ``<url>`` autolinks: this module's
ANGLE_LINKS = Dialect("(<", ">)", autolinks=True)
#: CommonMark's plain ``[text](url)``, ``<`` always escaped (the work-chat robots')
PLAIN_LINKS = Dialect("(", ")", autolinks=False)


def read(text: str, *, markup: bool, links: bool, dialect: Dialect = ANGLE_LINKS) -> str:
    """What a reader sees for backslash-escaped markdown as written by the renderers (escaped
    text, ``**bold**``, masked links, ``> `` quotes, a ZWSP after every "@"): plain text.

    Without ``markup`` only the escapes and the ZWSPs are undone (an unescape). With
    ``links``, a masked link shows as ``text <url>``; otherwise as its text only.

    Raises:
        ValueError: an autolink or a link target that is not closed.
    """
    out: list[str] = []
    i = 0
    n = len(text)
    at_start = True
    target = "]" + dialect.link_open
    while i < n:
        ch = text[i]
        if markup and at_start and text.startswith("> ", i):
            i += 2
            at_start = False
            continue
        at_start = ch == "\n"
        if ch == "\\" and i + 1 < n:
            out.append(text[i + 1])
            i += 2
        elif ch == "@" and text.startswith(ZWSP, i + 1):
            out.append("@")
            i += 2
        elif ch == "<" and dialect.autolinks:
            end = text.find(">", i)
            if end < 0:
                raise ValueError(f"unbalanced '<' at {i} in {text!r}")
            out.append(text[i + 1 : end])
            i = end + 1
        elif markup and ch in "*[":
            i += 1
        elif markup and text.startswith(target, i):
            end = text.find(dialect.link_close, i)
            if end < 0:
                raise ValueError(f"unclosed link target at {i} in {text!r}")
            if links:
                out.append(f" <{text[i + len(target) : end]}>")
            i = end + len(dialect.link_close)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def safe_url(url: str) -> str:
    """``url`` with the characters that could end ``(<...>)`` or ``<...>`` percent-encoded, and
    the letter after an ``@`` that would read as ``@everyone`` / ``@here`` too (``@%65veryone``,
    ``@%68ere``): the same URL to any browser or server, and no mention in the raw content."""
    encoded = "".join(URL_UNSAFE.get(c, c) for c in url)
    for mention, defused in URL_MENTIONS.items():
        encoded = encoded.replace(mention, defused)
    return encoded


def code_span(text: str) -> str:
    """``text`` as inline code: shown literally, never linked or formatted. ``text`` MUST NOT
    contain a backtick or a line break (a :func:`safe_url` has neither)."""
    if "`" in text or "\n" in text:
        raise ValueError(f"cannot be inline code: {text[:40]!r}")
    return f"`{text}`"


def link(text: str, url: str | None) -> str:
    """A masked link ``[text](<url>)`` (no preview) with ``text`` escaped; just the escaped text
    when there is no URL."""
    esc = escape(text, line_start=False)
    return f"[{esc}](<{safe_url(url)}>)" if url else esc


def defang(text: str) -> str:
    """Plain text for fields Discord shows without markdown (footers): only ``@`` is defused."""
    return text.replace("@", "@" + ZWSP)


def pingable(markdown: str) -> list[str]:
    """Mentions in ``markdown`` that Discord would render (and, if allowed, ping).

    "@everyone" / "@here" count wherever they occur (Discord looks for them in the raw content);
    "<@id>", "<@&id>", "<#id>" count unless their "<" is escaped.
    """
    found = [m.group() for m in _EVERYONE.finditer(markdown)]
    for m in _MENTION.finditer(markdown):
        backslashes = len(markdown[: m.start()]) - len(markdown[: m.start()].rstrip("\\"))
        if backslashes % 2 == 0:
            found.append(m.group())
    return found
