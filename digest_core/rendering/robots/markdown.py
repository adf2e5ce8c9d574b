"""The markdown of DingTalk and WeCom robots: escaping issue text, safe link targets, and a
reader's view of what we write.

Both render a CommonMark-like subset (headings, bold, links, quotes, lists; WeCom adds
``<font>`` and ``<@userid>`` mentions, DingTalk ``<font>``). Issue text is escaped with a
backslash before every character that could start markup — CommonMark shows ``\\X`` as ``X``
for any ASCII punctuation X (https://spec.commonmark.org/0.31.2/#backslash-escapes) — and a
zero-width space after every "@", so no text can become a link, a tag or a mention
(WeCom's ``<@userid>``: https://developer.work.weixin.qq.com/document/path/91770).

Escaping is per character except at a line start, so ``escape(a + b)`` is at most one byte
longer than ``escape(a) + escape(b)``: splitting can measure pieces and add them up.
"""

from __future__ import annotations

import re

from digest_core.rendering.markdown import PLAIN_LINKS, read
from digest_core.rendering.markdown import ZWSP as ZWSP  # the one zero-width space, re-exported

#: escaped wherever they occur: the escape itself, code, emphasis, links and images,
#: HTML/autolinks/mentions, strikethrough, tables, entities
ESCAPED_ANYWHERE = frozenset("\\`*_[]<>~|&")
#: markers that only mean something at a line start: headings, quotes, lists, setext rules
ESCAPED_AT_LINE_START = frozenset("#>-+=")
#: characters percent-encoded in a link target written as ``(url)``
URL_UNSAFE = {c: f"%{ord(c):02X}" for c in "()<>[]\\\"'` *_~|@"}

_ORDERED = re.compile(r"\d+(?=[.)])")


def escape(text: str, *, line_start: bool = True) -> str:
    """``text`` shown literally: no markup, links, tags or mentions (``visible(..., markup=False)``
    gives ``text`` back)."""
    out: list[str] = []
    at_start = line_start
    i = 0
    while i < len(text):
        ch = text[i]
        if at_start:
            at_start = False
            m = _ORDERED.match(text, i)
            if m:
                out.append(m.group() + "\\" + text[m.end()])
                i = m.end() + 1
                continue
            if ch in ESCAPED_AT_LINE_START:
                out.append("\\" + ch)
                i += 1
                continue
        if ch in ESCAPED_ANYWHERE:
            out.append("\\" + ch)
        elif ch == "@":
            out.append("@" + ZWSP)
        else:
            out.append(ch)
            at_start = ch == "\n"
        i += 1
    return "".join(out)


def safe_url(url: str) -> str:
    """``url`` with what could end ``(url)``, start markup or a mention percent-encoded:
    the same address to a browser."""
    return "".join(URL_UNSAFE.get(c, c) for c in url)


def link(text: str, url: str) -> str:
    """``[text](url)`` with ``text`` escaped and ``url`` made safe."""
    return f"[{escape(text, line_start=False)}]({safe_url(url)})"


def visible(markdown: str, *, markup: bool = True, links: bool = False) -> str:
    """What a reader sees for markdown this package writes (escaped text, ``**bold**``,
    ``[text](url)``, ``> `` quotes): plain text. With ``links`` a link shows as
    ``text <url>``. The core's reader of backslash-escaped markdown, in CommonMark's link
    dialect."""
    return read(markdown, markup=markup, links=links, dialect=PLAIN_LINKS)


def live_markup(markdown: str) -> list[str]:
    """Unescaped characters in ``markdown`` other than our own markup, and "@" not followed
    by a zero-width space: what a test expects to be empty for escaped text."""
    found: list[str] = []
    i = 0
    while i < len(markdown):
        ch = markdown[i]
        if ch == "\\":
            i += 2
            continue
        if ch in ESCAPED_ANYWHERE:
            found.append(ch)
        if ch == "@" and not markdown.startswith(ZWSP, i + 1):
            found.append("@")
        i += 1
    return found


_OUR_LINK = re.compile(r"\[(?P<text>.*)\]\((?P<url>[^()\s<>\[\]]*)\)", re.S)


def stray_markup(markdown: str, *, separator: str = "\n\n") -> list[str]:
    """:func:`live_markup` of every block of a rendered message once the renderer's own
    constructs are taken off: a leading ``> ``, a ``**…**`` wrapper, one ``[text](url)``."""
    found: list[str] = []
    for block in markdown.split(separator):
        block = block.removeprefix("> ")
        if len(block) >= 4 and block.startswith("**") and block.endswith("**"):
            block = block[2:-2]
        m = _OUR_LINK.fullmatch(block)
        if m:
            block = m.group("text")
        found += live_markup(block)
    return found
