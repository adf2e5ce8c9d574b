"""Server-side parser of Telegram's HTML parse mode, after tdlib's parse_html rules."""

from __future__ import annotations

import logging
import string
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# Tags Telegram accepts (https://core.telegram.org/bots/api#html-style); tdlib lowercases names.
ALLOWED_TAGS: frozenset[str] = frozenset(
    {
        "a", "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span",
        "tg-spoiler", "tg-emoji", "code", "pre", "blockquote",
    }
)  # fmt: skip
# Only these named entities are decoded; any other "&name;" stays literal text, as in tdlib.
NAMED_ENTITIES: dict[str, str] = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SIMPLE_TYPES: dict[str, str] = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline",
    "ins": "underline", "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
    "tg-spoiler": "spoiler", "span": "spoiler", "code": "code",
}  # fmt: skip
_UNQUOTED_VALUE_CHARS = frozenset(string.ascii_letters + string.digits + ".-")


class HtmlParseError(ValueError):
    """Invalid Telegram HTML; str() is Telegram's wording after "can't parse entities: "."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's offsets and limits."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class _Open:
    tag: str
    argument: str | None
    utf16_offset: int
    byte_offset: int
    text_start: int  # index in the source just after the start tag (for <a> without href)


@dataclass
class _Parser:
    source: str
    out: list[str] = field(default_factory=list)
    utf16: int = 0
    entities: list[dict[str, Any]] = field(default_factory=list)
    stack: list[_Open] = field(default_factory=list)

    def byte_at(self, index: int) -> int:
        return len(self.source[:index].encode("utf-8"))

    def emit(self, chunk: str) -> None:
        self.out.append(chunk)
        self.utf16 += utf16_len(chunk)

    def fail(self, message: str) -> HtmlParseError:
        return HtmlParseError(message)


def _decode_entity(text: str, pos: int) -> tuple[str, int] | None:
    """Decode the entity starting at text[pos] == "&"; None when tdlib would keep "&" literal."""
    end = pos + 1
    code: int | None = None
    if end < len(text) and text[end] == "#":
        end += 1
        digits = string.digits
        base = 10
        if end < len(text) and text[end] in "xX":
            end += 1
            digits = string.hexdigits
            base = 16
        start = end
        while end < len(text) and text[end] in digits and end - start < 8:
            end += 1
        if end == start:
            return None
        code = int(text[start:end], base)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        decoded = chr(code)
    else:
        start = end
        while end < len(text) and text[end] in string.ascii_letters:
            end += 1
        name = text[start:end]
        if name not in NAMED_ENTITIES:
            return None
        decoded = NAMED_ENTITIES[name]
    if end >= len(text) or text[end] != ";":
        return None
    return decoded, end + 1


def _read_start_tag(p: _Parser, pos: int) -> int:
    """Parse a start tag whose "<" is at pos; push it and return the index after ">"."""
    text = p.source
    size = len(text)
    lt_byte = p.byte_at(pos)
    i = pos + 1
    while i < size and not text[i].isspace() and text[i] != ">":
        i += 1
    if i >= size:
        raise p.fail(f"Unclosed start tag at byte offset {lt_byte}")
    tag = text[pos + 1 : i].lower()
    if tag not in ALLOWED_TAGS:
        raise p.fail(f'Unsupported start tag "{tag}" at byte offset {lt_byte}')
    argument: str | None = None
    while i < size and text[i] != ">":
        while i < size and text[i].isspace():
            i += 1
        if i < size and text[i] == ">":
            break
        name_start = i
        while i < size and not text[i].isspace() and text[i] not in "=>/\"'":
            i += 1
        attr = text[name_start:i].lower()
        if not attr:
            raise p.fail(f'Empty attribute name in the tag "{tag}" at byte offset {lt_byte}')
        while i < size and text[i].isspace():
            i += 1
        if i >= size:
            raise p.fail(f'Unclosed start tag "{tag}" at byte offset {lt_byte}')
        if text[i] != "=":
            if tag == "blockquote" and attr == "expandable":
                argument = "expandable"
            continue
        i += 1
        while i < size and text[i].isspace():
            i += 1
        if i >= size:
            raise p.fail(f'Unclosed start tag "{tag}" at byte offset {lt_byte}')
        if text[i] not in "\"'":
            value_start = i
            while i < size and text[i] in _UNQUOTED_VALUE_CHARS:
                i += 1
            if i >= size:
                raise p.fail(f'Unclosed start tag "{tag}" at byte offset {lt_byte}')
            if not text[i].isspace() and text[i] != ">":
                raise p.fail(f"Unexpected end of name token at byte offset {p.byte_at(i)}")
            value = text[value_start:i].lower()
        else:
            quote = text[i]
            i += 1
            chunks: list[str] = []
            while i < size and text[i] != quote:
                if text[i] == "&" and (decoded := _decode_entity(text, i)) is not None:
                    chunks.append(decoded[0])
                    i = decoded[1]
                    continue
                chunks.append(text[i])
                i += 1
            if i >= size:
                raise p.fail(f'Unclosed start tag "{tag}" at byte offset {lt_byte}')
            i += 1
            value = "".join(chunks)
        if tag == "a" and attr == "href":
            argument = value
        elif tag == "code" and attr == "class" and value.startswith("language-"):
            argument = value.removeprefix("language-")
        elif (tag, attr) in (("span", "class"), ("tg-emoji", "emoji-id")):
            argument = value
        elif tag == "blockquote" and attr == "expandable":
            argument = "expandable"
    if i >= size:
        raise p.fail(f'Unclosed start tag "{tag}" at byte offset {lt_byte}')
    if tag == "span" and argument != "tg-spoiler":
        raise p.fail(f'Tag "span" must have class "tg-spoiler" at byte offset {lt_byte}')
    p.stack.append(_Open(tag, argument, p.utf16, lt_byte, i + 1))
    return i + 1


def _read_end_tag(p: _Parser, pos: int) -> int:
    """Parse an end tag whose "<" is at pos; record the entity and return the index after ">"."""
    text = p.source
    size = len(text)
    lt_byte = p.byte_at(pos)
    if not p.stack:
        raise p.fail(f"Unexpected end tag at byte offset {lt_byte}")
    i = pos + 2
    while i < size and not text[i].isspace() and text[i] != ">":
        i += 1
    name = text[pos + 2 : i].lower()
    while i < size and text[i].isspace():
        i += 1
    if i >= size or text[i] != ">":
        raise p.fail(f"Unclosed end tag at byte offset {lt_byte}")
    top = p.stack.pop()
    if name and name != top.tag:
        raise p.fail(
            f'Unmatched end tag at byte offset {lt_byte}, expected "</{top.tag}>", '
            f'found "</{name}>"'
        )
    length = p.utf16 - top.utf16_offset
    if length > 0:
        entity = _make_entity(p, top, length, text[top.text_start : pos])
        if entity is not None:
            p.entities.append(entity)
    return i + 1


def _make_entity(p: _Parser, top: _Open, length: int, inner: str) -> dict[str, Any] | None:
    base: dict[str, Any] = {"offset": top.utf16_offset, "length": length}
    if top.tag in _SIMPLE_TYPES:
        entity = {"type": _SIMPLE_TYPES[top.tag], **base}
        if top.tag == "code" and top.argument:
            entity["language"] = top.argument
        return entity
    if top.tag == "a":
        url = top.argument if top.argument else inner
        if not url or any(ch.isspace() for ch in url.strip()):
            return None  # tdlib silently drops links with an invalid URL
        return {"type": "text_link", **base, "url": url.strip()}
    if top.tag == "tg-emoji":
        if not (top.argument or "").isdigit():
            raise p.fail("Invalid custom emoji identifier specified")
        return {"type": "custom_emoji", **base, "custom_emoji_id": top.argument}
    if top.tag == "pre":
        entity = {"type": "pre", **base}
        # <pre><code class="language-x">…</code></pre> becomes one pre entity with a language.
        for inner_entity in reversed(p.entities):
            if (
                inner_entity["type"] == "code"
                and inner_entity["offset"] == base["offset"]
                and inner_entity["length"] == length
            ):
                p.entities.remove(inner_entity)
                if "language" in inner_entity:
                    entity["language"] = inner_entity["language"]
                break
        return entity
    if top.tag == "blockquote":
        kind = "expandable_blockquote" if top.argument == "expandable" else "blockquote"
        return {"type": kind, **base}
    raise AssertionError(f"unhandled tag {top.tag}")  # pragma: no cover


def _trim(text: str, entities: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Strip surrounding whitespace as Telegram does and clip the entities to what is left."""
    stripped = text.strip()
    if not stripped:
        return "", []
    shift = utf16_len(text[: len(text) - len(text.lstrip())])
    end = utf16_len(stripped)
    kept: list[dict[str, Any]] = []
    for entity in entities:
        start = max(entity["offset"] - shift, 0)
        stop = min(entity["offset"] + entity["length"] - shift, end)
        if stop > start:
            kept.append({**entity, "offset": start, "length": stop - start})
    return stripped, kept


def _drop_nested_in_code(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Telegram drops formatting inside code and pre entities."""
    blocks = [e for e in entities if e["type"] in ("code", "pre")]

    def inside_block(entity: dict[str, Any]) -> bool:
        return any(
            block is not entity
            and block["offset"] <= entity["offset"]
            and entity["offset"] + entity["length"] <= block["offset"] + block["length"]
            for block in blocks
        )

    return [e for e in entities if not inside_block(e)]


def parse_html(source: str) -> tuple[str, list[dict[str, Any]]]:
    """Return Telegram's visible text and entity dicts for an HTML-mode message.

    The text is stripped of surrounding whitespace and may be empty; callers decide which
    "empty" error applies.

    Raises:
        HtmlParseError: with Telegram's message, e.g. 'Unsupported start tag "br" at byte offset 3'.
    """
    p = _Parser(source)
    i = 0
    size = len(source)
    while i < size:
        ch = source[i]
        if ch == "&" and (decoded := _decode_entity(source, i)) is not None:
            p.emit(decoded[0])
            i = decoded[1]
            continue
        if ch != "<":
            run_end = i + 1
            while run_end < size and source[run_end] not in "<&":
                run_end += 1
            p.emit(source[i:run_end])
            i = run_end
            continue
        closing = i + 1 < size and source[i + 1] == "/"
        i = _read_end_tag(p, i) if closing else _read_start_tag(p, i)
    if p.stack:
        raise p.fail(f'Can\'t find end tag corresponding to start tag "{p.stack[-1].tag}"')
    text, entities = _trim("".join(p.out), _drop_nested_in_code(p.entities))
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return text, entities
