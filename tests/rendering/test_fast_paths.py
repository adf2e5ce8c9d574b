"""The shortcuts taken for render speed answer exactly as the plain code they replaced."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest_core.rendering import html
from digest_core.rendering.html import Close, Event, HtmlError, Open, Text
from digest_core.rendering.split import utf16_len
from tests.quick import examples
from tests.rendering.inverses import check_html, visible_text

log = logging.getLogger(__name__)

SETTINGS = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# --- the oracle: html.parse / check_html as they were, on Event objects ------------------------


def _ref_unescape(raw: str, where: int) -> str:
    def decode(m: re.Match[str]) -> str:
        offset = where + m.start()
        if m["bad"] is not None:
            raise HtmlError(f"unescaped {m['bad']!r} at offset {offset}")
        if m["name"] is not None:
            if m["name"] not in html._NAMED_ENTITIES:
                raise HtmlError(f"unsupported entity &{m['name']}; at offset {offset}")
            return html._NAMED_ENTITIES[m["name"]]
        code = int(m["dec"]) if m["dec"] is not None else int(m["hex"], 16)
        if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise HtmlError(f"invalid character reference at offset {offset}")
        return chr(code)

    if "&#" in raw or html._BAD_RE.search(raw):
        return html._ENTITY_RE.sub(decode, raw)
    out = raw.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    return out.replace("&amp;", "&")


def _ref_parse(text: str) -> list[Event]:
    events: list[Event] = []
    pos = 0
    while pos < len(text):
        lt = text.find("<", pos)
        end = len(text) if lt < 0 else lt
        if end > pos:
            events.append(Text(_ref_unescape(text[pos:end], pos)))
        if lt < 0:
            break
        m = html._TAG_RE.match(text, lt)
        if m is None:
            raise HtmlError(f"malformed tag at offset {lt}: {text[lt : lt + 30]!r}")
        name = m["name"].lower()
        if m["close"]:
            if m["attrs"].strip():
                raise HtmlError(f"closing tag </{name}> with attributes at offset {lt}")
            events.append(Close(name))
        else:
            attrs = tuple(
                (a["name"].lower(), _ref_unescape(a["value"] or "", lt))
                for a in html._ATTR_RE.finditer(m["attrs"])
            )
            events.append(Open(name, attrs))
        pos = m.end()
    return events


def _ref_check_html(text: str) -> None:
    stack: list[str] = []
    for ev in _ref_parse(text):
        if isinstance(ev, Text):
            continue
        if ev.name not in html.ALLOWED_TAGS:
            raise HtmlError(f"tag <{ev.name}> is not supported by Telegram")
        if isinstance(ev, Close):
            if not stack or stack[-1] != ev.name:
                open_tag = stack[-1] if stack else None
                raise HtmlError(f"</{ev.name}> does not close the open tag {open_tag!r}")
            stack.pop()
            continue
        allowed = html.ALLOWED_TAGS[ev.name]
        seen: set[str] = set()
        for key, value in ev.attrs:
            if key not in allowed:
                raise HtmlError(f"attribute {key!r} is not allowed on <{ev.name}>")
            if key in seen:
                raise HtmlError(f"attribute {key!r} repeated on <{ev.name}>")
            seen.add(key)
            if not allowed[key].fullmatch(value):
                raise HtmlError(f"bad value {value!r} for {key!r} on <{ev.name}>")
        required = html._REQUIRED_ATTRS.get(ev.name)
        if required is not None and required not in seen:
            raise HtmlError(f"<{ev.name}> needs a {required!r} attribute")
        if ev.name in html._NO_SELF_NESTING and ev.name in stack:
            raise HtmlError(f"<{ev.name}> must not be nested in another <{ev.name}>")
        stack.append(ev.name)
    if stack:
        raise HtmlError(f"unclosed tags at end: {stack}")


def _outcome(f: object, text: str) -> tuple[str, object]:
    """What ``f(text)`` returns, or the message of the HtmlError it raises."""
    try:
        return "ok", f(text)  # type: ignore[operator]
    except HtmlError as e:
        return "error", str(e)


# --- generated HTML, valid and broken ------------------------------------------------------------

HTML_PIECES = (
    "<b>", "</b>", "<i>", "</i>", "<B>", "</B >", "<blockquote>", "</blockquote>",
    "<blockquote expandable>", '<a href="https://x.org/?a=1&amp;b=2">', '<a href="x">', "</a>",
    '<a href="">', '<a href="1" href="2">', '<a title="t">', '<span class="tg-spoiler">',
    "</span>", '<code class="language-py">', "</code>", "<pre>", "</pre>", "<x>", "</x>",
    "</b x>", "<b x='1'>", "<", ">", "&", "&amp;", "&lt;", "&gt;", "&quot;", "&#65;", "&#x1F600;",
    "&#xD800;", "&#0;", "&nbsp;", "&amp", "text", "数据", "😀", " ", "\n", "\ud83d",
)  # fmt: skip

documents = st.lists(
    st.one_of(st.sampled_from(HTML_PIECES), st.text("ab<>&;#x\"'= /", max_size=5)), max_size=16
).map("".join)


@SETTINGS
@given(documents)
@example('<b>a &amp; b</b><a href="x&quot;">c</a>')
@example("<b>unclosed")
@example("a < b <b>")
def test_parse_and_check_equal_the_old_ones(text: str) -> None:
    assert _outcome(html.parse, text) == _outcome(_ref_parse, text)
    assert _outcome(check_html, text) == _outcome(_ref_check_html, text)


@SETTINGS
@given(documents)
def test_checked_visible_text_is_check_then_visible_text(text: str) -> None:
    def separately(t: str) -> str:
        check_html(t)
        return visible_text(t)

    assert _outcome(html.checked_visible_text, text) == _outcome(separately, text)


@SETTINGS
@given(st.text(st.sampled_from("a数&<>\"'😀 ")))
def test_escape_text_equals_the_replace_chain(text: str) -> None:
    expected = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert html.escape_text(text) == expected
    assert visible_text(html.escape_text(text)) == text


@SETTINGS
@given(st.text())
def test_utf16_len_counts_code_units(text: str) -> None:
    assert utf16_len(text) == len(text.encode("utf-16-le")) // 2
    assert utf16_len(text) == len(text) + sum(ord(c) > 0xFFFF for c in text)


def test_utf16_len_refuses_a_lone_surrogate_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        utf16_len("a\ud800")
