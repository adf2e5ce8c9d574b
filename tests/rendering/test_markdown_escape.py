"""Discord escaping: the regex escaper gives exactly what the per-character loop it replaced did."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest_core.rendering import markdown
from digest_core.rendering.markdown import ZWSP, escape
from tests.quick import examples
from tests.rendering.inverses import unescape

log = logging.getLogger(__name__)

SETTINGS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# --- the oracle: markdown.escape as it was before it used regular expressions ------------------
# Kept verbatim (names prefixed "_ref") so the fast version is checked against the behaviour the
# golden files were written with, on any text.

_REF_ESCAPED_ANYWHERE = frozenset("\\*_~`|<>[]()")
_REF_ESCAPED_AT_LINE_START = frozenset("#-+")
_REF_URL_CHAR = r"(?!@(?:everyone|here))[^\s<>"
_REF_URL_IN_TEXT = re.compile(rf"https?://(?:{_REF_URL_CHAR}])*{_REF_URL_CHAR}.,:;\"')\]]")
_REF_ORDERED_LIST = re.compile(r"[ \t]*\d+(?=\.[ \t])")


def _ref_escape(text: str, *, line_start: bool = True) -> str:
    out: list[str] = []
    pos = 0
    while m := _REF_URL_IN_TEXT.search(text, pos):
        end = m.end()
        while text.startswith(")", end) and text.count("(", m.start(), end) > text.count(
            ")", m.start(), end
        ):
            end += 1
        out.append(_ref_escape_plain(text[pos : m.start()], line_start and pos == 0))
        out.append(f"<{text[m.start() : end]}>")
        pos = end
    out.append(_ref_escape_plain(text[pos:], line_start and pos == 0))
    return "".join(out)


def _ref_escape_plain(text: str, line_start: bool) -> str:
    out: list[str] = []
    at_start = line_start
    i = 0
    n = len(text)
    while i < n:
        if at_start:
            at_start = False
            m = _REF_ORDERED_LIST.match(text, i)
            if m:
                out.append(_ref_escape_plain(m.group(), False) + "\\.")
                i = m.end() + 1
                continue
            j = i
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] in _REF_ESCAPED_AT_LINE_START:
                out.append(text[i:j] + "\\" + text[j])
                i = j + 1
                continue
        ch = text[i]
        if ch in _REF_ESCAPED_ANYWHERE:
            out.append("\\" + ch)
        elif ch == "@":
            out.append("@" + ZWSP)
        else:
            out.append(ch)
            if ch == "\n":
                at_start = True
        i += 1
    return "".join(out)


# --- generated text ----------------------------------------------------------------------------

#: Pieces that exercise every branch: mentions, URLs (with parentheses, an "@everyone" inside,
#: trailing punctuation), markdown specials, line-start markers and list numbers (also Unicode
#: digits, which ``\d`` matches), full-width look-alikes that must stay as they are, emoji,
#: ZWSP, lone surrogates and a surrogate pair written as two code points.
FRAGMENTS = (
    "@everyone", "@here", "@alice", "mail@x.org", "@", f"@{ZWSP}", ZWSP,
    "<@123456789012345678>", "<@!9>", "<@&42>", "<#77>",
    "https://x.org/a_(b)", "https://x.org/a_(b))", "https://x.org/@everyone/p", "http://x.org/*s*",
    "(https://y.org)", "https://y.org.", "https://y.org/p?q=1&r=2,", "http://", "https://@here",
    "\n", "\n\n", "\n ", "\n\t", " ", "\t", "\r\n", "\r",
    "# ", "-# ", "- ", "+ ", "* ", "1. ", "12.\t", "1.", "1)", "０. ", "１２. ", "٣. ", "²",
    "> ", ">>> ", "```", "`", "\\", "\\\\", "||", "**", "~~", "__", "*", "_", "~", "|",
    "[a](b)", "](<", "<", ">", "[", "]", "(", ")", "&amp;", ".", "#", "-", "+",
    "＊", "＃", "－", "＋", "．", "＠", "（", "）", "［", "］", "＜", "＞", "＿", "｀", "　",
    "。", "！", "？", "…", "数据模型", "训练", "😀", "👩‍💻", "🇨🇳",
    "\ud83d", "\ude00", "\ud83d\ude00", "\udfff",
)  # fmt: skip
ALPHABET = "abcXYZ019 数据*_~`|<>[]()#-+.:\\@&\n\t😀１＃"

#: What may start a line: indentation, then a list number, a marker or a look-alike.
LINE_STARTS = st.tuples(
    st.sampled_from(["", " ", "\t", "  \t"]),
    st.sampled_from(["", "1. ", "23.\t", "4.", "１. ", "٣. ", "#", "-", "+", "*", "＃", "－", "@"]),
).map("".join)
pieces = st.one_of(st.sampled_from(FRAGMENTS), st.text(ALPHABET, max_size=6))
lines = st.tuples(LINE_STARTS, st.lists(pieces, max_size=4).map("".join)).map("".join)
texts = st.one_of(
    st.lists(pieces, max_size=24).map("".join),
    # several lines, broken by "\n" (a line start) or by what is not one ("\r", U+2028)
    st.lists(st.tuples(lines, st.sampled_from(["\n", "\n", "\r", "\u2028"])), max_size=6).map(
        lambda parts: "".join(line + brk for line, brk in parts)
    ),
    st.text(st.characters(exclude_categories=())),  # anything, surrogates included
)


@SETTINGS
@given(text=texts, line_start=st.booleans())
@example(text="1. a\n 2.\tb\n# c\n - d\n+e\n*f", line_start=True)
@example(text="1. a\n 2.\tb\n# c\n - d\n+e\n*f", line_start=False)
@example(text="x https://a.org/(b)\n- y", line_start=True)
@example(text="@everyone https://a.org/@here\n@here", line_start=False)
@example(text="x\r- a\r1. b\u2028# c", line_start=False)
@example(text="１. a\n٣. b", line_start=False)
def test_escape_equals_the_old_escaper(text: str, line_start: bool) -> None:
    assert escape(text, line_start=line_start) == _ref_escape(text, line_start=line_start)


@SETTINGS
@given(text=texts, line_start=st.booleans())
def test_escape_plain_equals_the_old_one(text: str, line_start: bool) -> None:
    """The part without URLs on its own, so a text URL does not hide a difference after it."""
    got = markdown._escape_plain(text, line_start)
    assert got == _ref_escape_plain(text, line_start)
    assert unescape(got) == text


@pytest.mark.parametrize(
    ("text", "line_start", "expected"),
    [
        ("1. a", True, "1\\. a"),
        ("1. a", False, "1. a"),  # not at a line start
        ("x\n1. a", False, "x\n1\\. a"),  # a line break starts a line whatever line_start says
        (" \t12.\tb", True, " \t12\\.\tb"),
        ("１. a", True, "１\\. a"),  # full-width digits are digits to \d
        ("1.a", True, "1.a"),  # no space: not a list
        ("- a\n+ b\n# c\n-# d", True, "\\- a\n\\+ b\n\\# c\n\\-# d"),
        ("a - b # c", True, "a - b # c"),  # markers only at a line start
        ("－ a ＃ b", True, "－ a ＃ b"),  # full-width look-alikes are not markdown
        ("x\r- a", True, "x\r- a"),  # only "\n" breaks a line
        ("@everyone @here", True, f"@{ZWSP}everyone @{ZWSP}here"),
        ("a\\*b", True, "a\\\\\\*b"),
        ("😀\ud83d*", True, "😀\ud83d\\*"),
    ],
)
def test_escape_table(text: str, line_start: bool, expected: str) -> None:
    assert escape(text, line_start=line_start) == expected
    assert _ref_escape(text, line_start=line_start) == expected
