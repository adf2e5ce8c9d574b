"""Length measures and loss-free splitting of text at sentence boundaries, shared by renderers."""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
Measure = Callable[[str], int]
_utf16_le = codecs.utf_16_le_encode

# A sentence ends after 。！？!? (with any closing quotes/brackets),
# or after . ; followed by a space.
_SENTENCE_END = re.compile(r"(?<=[。！？!?])[”’」』）)\"']*|(?<=[.;])[”’\"')]*(?=\s)")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: how Telegram counts message length.

    Raises:
        UnicodeEncodeError: ``text`` has a lone surrogate.
    """
    # the codec function itself: str.encode("utf-16-le") looks the codec up by name every call,
    # which costs more than encoding a short text (renderers measure hundreds per issue)
    return len(_utf16_le(text)[0]) // 2


def split_sentences(text: str) -> list[str]:
    """Split ``text`` after each sentence end; ``"".join(result) == text``."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        end = m.end()
        # keep the whitespace that follows an English sentence with the sentence
        while end < len(text) and text[end] in " \t":
            end += 1
        if end > start:
            out.append(text[start:end])
            start = end
    if start < len(text):
        out.append(text[start:])
    return out


def hard_cut(text: str, limit: int, measure: Measure = len) -> list[str]:
    """Cut ``text`` into chunks of at most ``limit`` by ``measure``, never inside a surrogate pair.

    Last resort for a single sentence longer than a message; ``"".join(result) == text``.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2")
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for ch in text:
        n = measure(ch)
        if cur and size + n > limit:
            out.append("".join(cur))
            cur, size = [], 0
        cur.append(ch)
        size += n
    if cur:
        out.append("".join(cur))
    return out


def chunk_text(text: str, limit: int, measure: Measure = len) -> list[str]:
    """Split ``text`` into chunks of at most ``limit``, preferring sentence boundaries.

    ``"".join(result) == text``: nothing is lost or repeated.
    """
    if measure(text) <= limit:
        return [text]
    pieces: list[str] = []
    for sentence in split_sentences(text):
        if measure(sentence) <= limit:
            pieces.append(sentence)
        else:
            pieces.extend(hard_cut(sentence, limit, measure))
    chunks: list[str] = []
    cur = ""
    for piece in pieces:
        if cur and measure(cur) + measure(piece) > limit:
            chunks.append(cur)
            cur = ""
        cur += piece
    if cur:
        chunks.append(cur)
    return chunks


def pack(
    pieces: Sequence[T], limit: int, size: Callable[[T], int], *, sep: int = 0
) -> list[list[T]]:
    """Greedily group ``pieces`` in order so each group's total size (plus ``sep`` between
    pieces) is at most ``limit``. A piece larger than ``limit`` gets a group of its own; callers
    MUST split such pieces first if the limit is hard.
    """
    groups: list[list[T]] = []
    cur: list[T] = []
    total = 0
    for piece in pieces:
        n = size(piece)
        if cur and total + sep + n > limit:
            groups.append(cur)
            cur, total = [], 0
        total += n + (sep if cur else 0)
        cur.append(piece)
    if cur:
        groups.append(cur)
    return groups


def flow(units: Sequence[Sequence[T]], fits: Callable[[list[T]], bool]) -> list[list[T]]:
    """Group the blocks of ``units`` (e.g. items made of paragraphs) in order into messages.

    A unit goes whole into the current group when it fits, else whole into a new group when it
    fits there, else block by block. ``fits`` MUST accept any single block on its own (split
    blocks first) and MUST be monotonic (a group that fits stays fitting when shortened).
    Nothing is lost, repeated or reordered: concatenating the groups gives all blocks in order.
    """
    groups: list[list[T]] = []
    cur: list[T] = []
    for unit in units:
        if fits([*cur, *unit]):
            cur.extend(unit)
            continue
        if cur and fits(list(unit)):
            groups.append(cur)
            cur = list(unit)
            continue
        for block in unit:
            if cur and not fits([*cur, block]):
                groups.append(cur)
                cur = []
            cur.append(block)
    if cur:
        groups.append(cur)
    return groups


def chunk_lines(text: str, limit: int, measure: Measure = len) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` at line ends where it can (dropping the
    newline at each cut), else within lines at sentence ends; never returns an empty list."""
    lines = text.split("\n")
    pieces: list[str] = []
    for line in lines:
        pieces.extend(chunk_text(line, limit, measure) if measure(line) > limit else [line])
    groups = pack(pieces, limit, measure, sep=1)
    return ["\n".join(group) for group in groups] or [""]
