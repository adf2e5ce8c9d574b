"""Telegram's HTML subset: escaping, a strict validator and the visible text after parsing."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Tags Telegram's HTML parse mode accepts, with the attributes each may carry (attribute name ->
#: allowed value pattern). https://core.telegram.org/bots/api#html-style
#: (``telegram.constants.ParseMode.HTML``). ``a`` MUST carry ``href``; ``span`` MUST carry
#: ``class="tg-spoiler"``.
ALLOWED_TAGS: dict[str, dict[str, re.Pattern[str]]] = {
    "b": {},
    "strong": {},
    "i": {},
    "em": {},
    "u": {},
    "ins": {},
    "s": {},
    "strike": {},
    "del": {},
    "a": {"href": re.compile(r".+", re.S)},
    "code": {"class": re.compile(r"language-[\w+#-]+")},
    "pre": {},
    "blockquote": {"expandable": re.compile(r"")},
    "span": {"class": re.compile(r"tg-spoiler")},
    "tg-spoiler": {},
}
_REQUIRED_ATTRS = {"a": "href", "span": "class"}
#: Tags that must not contain themselves (Telegram rejects nested links and quotes).
_NO_SELF_NESTING = frozenset({"a", "blockquote", "pre", "code"})

#: The only named entities Telegram decodes; numeric ones are all accepted.
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}

_TAG_RE = re.compile(
    r"<(?P<close>/)?(?P<name>[a-zA-Z][a-zA-Z0-9-]*)"
    r"(?P<attrs>(?:\s+[a-zA-Z-]+(?:\s*=\s*\"[^\"<>]*\")?)*)\s*>"
)
_ATTR_RE = re.compile(r"\s+(?P<name>[a-zA-Z-]+)(?:\s*=\s*\"(?P<value>[^\"<>]*)\")?")
_ENTITY_RE = re.compile(
    r"&(?:#(?P<dec>[0-9]{1,7})|#[xX](?P<hex>[0-9a-fA-F]{1,6})|(?P<name>[a-z]+));"
    r"|(?P<bad>[&<>])"
)
_BAD_RE = re.compile(r"[<>]|&(?!(?:lt|gt|amp|quot);)")


class HtmlError(ValueError):
    """The string is not HTML that Telegram's parser would accept as we intend it."""


@dataclass(frozen=True)
class Text:
    """A run of text, entities already decoded."""

    text: str


@dataclass(frozen=True)
class Open:
    """An opening tag with its decoded attributes."""

    name: str
    attrs: tuple[tuple[str, str], ...] = ()

    def attr(self, key: str) -> str | None:
        return next((v for k, v in self.attrs if k == key), None)


@dataclass(frozen=True)
class Close:
    """A closing tag."""

    name: str


Event = Text | Open | Close


def escape_text(text: str) -> str:
    """Escape ``text`` for use between tags: ``&``, ``<`` and ``>``."""
    if "&" not in text and "<" not in text and ">" not in text:
        return text
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(value: str) -> str:
    """Escape ``value`` for a double-quoted attribute: ``&``, ``<``, ``>`` and ``"``."""
    return escape_text(value).replace('"', "&quot;")


def _unescape(raw: str, where: int) -> str:
    """Decode entities in ``raw``; a bare ``&``, ``<`` or ``>`` is an error."""

    def decode(m: re.Match[str]) -> str:
        offset = where + m.start()
        if m["bad"] is not None:
            raise HtmlError(f"unescaped {m['bad']!r} at offset {offset}")
        if m["name"] is not None:
            if m["name"] not in _NAMED_ENTITIES:
                raise HtmlError(f"unsupported entity &{m['name']}; at offset {offset}")
            return _NAMED_ENTITIES[m["name"]]
        code = int(m["dec"]) if m["dec"] is not None else int(m["hex"], 16)
        if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise HtmlError(f"invalid character reference at offset {offset}")
        return chr(code)

    if "&" not in raw and "<" not in raw and ">" not in raw:
        return raw  # most text runs: nothing to decode or to complain about
    if "&#" in raw or _BAD_RE.search(raw):
        return _ENTITY_RE.sub(decode, raw)  # slow path, also finds what is wrong
    # only &lt; &gt; &quot; &amp; (entities never overlap; &amp; last so its "&" stays literal)
    out = raw.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    return out.replace("&amp;", "&")


def parse(html: str) -> list[Event]:
    """Tokenize ``html`` into text runs and tags, decoding entities.

    Checks the lexical syntax only (every ``<`` starts a tag, every ``&`` an entity); see
    :func:`checked_visible_text` for tag names, attributes and nesting.

    Raises:
        HtmlError: a stray ``<``, ``>`` or ``&``, or a malformed tag or entity.
    """
    return [
        Text(value) if kind == _TEXT else Open(value, attrs) if kind == _OPEN else Close(value)
        for kind, value, attrs in _lex(html)
    ]


# What _lex makes of a text run, an opening tag and a closing tag: (kind, text or tag name,
# attributes) tuples, which cost far less to make than Event objects.
_TEXT, _OPEN, _CLOSE = "text", "open", "close"
_Lexeme = tuple[str, str, tuple[tuple[str, str], ...]]


def _lex(html: str) -> list[_Lexeme]:
    """:func:`parse` as :data:`_Lexeme` tuples (same checks, same errors)."""
    lexemes: list[_Lexeme] = []
    append = lexemes.append
    pos = 0
    n = len(html)
    while pos < n:
        lt = html.find("<", pos)
        end = n if lt < 0 else lt
        if end > pos:
            append((_TEXT, _unescape(html[pos:end], pos), ()))
        if lt < 0:
            break
        m = _TAG_RE.match(html, lt)
        if m is None:
            raise HtmlError(f"malformed tag at offset {lt}: {html[lt : lt + 30]!r}")
        close, name, raw_attrs = m.group("close", "name", "attrs")
        name = name.lower()
        if close:
            if raw_attrs.strip():
                raise HtmlError(f"closing tag </{name}> with attributes at offset {lt}")
            append((_CLOSE, name, ()))
        elif not raw_attrs:
            append((_OPEN, name, ()))
        else:
            attrs = tuple(
                (a["name"].lower(), _unescape(a["value"] or "", lt))
                for a in _ATTR_RE.finditer(raw_attrs)
            )
            append((_OPEN, name, attrs))
        pos = m.end()
    return lexemes


def checked_visible_text(html: str) -> str:
    """The text a reader sees of ``html`` (tags stripped, entities decoded: what Telegram
    measures), ``html`` checked strictly against Telegram's HTML subset in the same parse.

    Every tag MUST be one of :data:`ALLOWED_TAGS` with only its allowed attributes (``a`` needs a
    non-empty ``href``), tags MUST be properly nested and closed, links and quotes MUST NOT nest,
    and every ``<``, ``>``, ``&`` outside a tag MUST be escaped.

    Raises:
        HtmlError: what is wrong and where.
    """
    lexemes = _lex(html)
    _check(lexemes)
    return "".join([value for kind, value, _ in lexemes if kind == _TEXT])


def _check(lexemes: list[_Lexeme]) -> None:
    """The tag-level checks of :func:`checked_visible_text` on a lexically valid document."""
    stack: list[str] = []
    for kind, name, attrs in lexemes:
        if kind == _TEXT:
            continue
        if name not in ALLOWED_TAGS:
            raise HtmlError(f"tag <{name}> is not supported by Telegram")
        if kind == _CLOSE:
            if not stack or stack[-1] != name:
                open_tag = stack[-1] if stack else None
                raise HtmlError(f"</{name}> does not close the open tag {open_tag!r}")
            stack.pop()
            continue
        allowed = ALLOWED_TAGS[name]
        seen: set[str] = set()
        for key, value in attrs:
            if key not in allowed:
                raise HtmlError(f"attribute {key!r} is not allowed on <{name}>")
            if key in seen:
                raise HtmlError(f"attribute {key!r} repeated on <{name}>")
            seen.add(key)
            if not allowed[key].fullmatch(value):
                raise HtmlError(f"bad value {value!r} for {key!r} on <{name}>")
        required = _REQUIRED_ATTRS.get(name)
        if required is not None and required not in seen:
            raise HtmlError(f"<{name}> needs a {required!r} attribute")
        if name in _NO_SELF_NESTING and name in stack:
            raise HtmlError(f"<{name}> must not be nested in another <{name}>")
        stack.append(name)
    if stack:
        raise HtmlError(f"unclosed tags at end: {stack}")


def text_with_links(html: str) -> str:
    """The text a reader sees (tags stripped, entities decoded), each link reading
    ``title <url>`` (for previews).

    Raises:
        HtmlError: ``html`` is lexically malformed (see :func:`parse`).
    """
    out: list[str] = []
    hrefs: list[str | None] = []
    for ev in parse(html):
        if isinstance(ev, Text):
            out.append(ev.text)
        elif ev.name == "a":
            if isinstance(ev, Open):
                hrefs.append(ev.attr("href"))
            elif hrefs:
                href = hrefs.pop()
                if href:
                    out.append(f" <{href}>")
    return "".join(out)
