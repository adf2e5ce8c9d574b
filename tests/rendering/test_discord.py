"""Discord renderer: golden payloads, escaping tables, limits and parts."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from digest_core.models import MAX_URL_CHARS, Issue, Item
from digest_core.rendering import Message, Part, RenderOptions, parse_button_data
from digest_core.rendering import discord as dc
from digest_core.rendering.markdown import (
    ZWSP,
    escape,
    link,
    pingable,
    safe_url,
    visible,
)
from tests.rendering.inverses import unescape

log = logging.getLogger(__name__)

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent.parent / "golden"
FIXTURES = ("special", "long", "english")
#: (name in the golden file, part, brief)
PARTS: tuple[tuple[str, Part, int | None], ...] = (
    ("all", Part.ALL, None),
    ("headline", Part.HEADLINE, None),
    ("briefs", Part.BRIEFS, None),
    ("brief2", Part.BRIEF, 2),
    ("classic", Part.CLASSIC, None),
    ("toc", Part.TOC, None),
)
MODES = {
    "embeds": RenderOptions(embeds=True, buttons=True),
    "markdown": RenderOptions(embeds=False, buttons=False),
}


# --- helpers shared by the rendering tests ------------------------------------------------------


def load_fixture(name: str) -> Issue:
    """A structured fixture issue from tests/rendering/data/discord_<name>.json."""
    return Issue.model_validate_json((DATA / f"discord_{name}.json").read_text(encoding="utf-8"))


def assert_golden(path: Path, text: str) -> None:
    """``text`` equals the golden file; UPDATE_GOLDEN=1 (re)writes it. A missing file fails."""
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing: run the tests with UPDATE_GOLDEN=1")
    assert text == path.read_text(encoding="utf-8"), f"differs from {path}"


def _squash(text: str) -> str:
    return "".join(text.split())


def assert_covers(stream: str, pieces: Sequence[str], decoration: Sequence[str]) -> None:
    """``stream`` is exactly ``pieces`` in order, each once, with only ``decoration`` (regexes)
    and whitespace around and between them: a lost, repeated, reordered or stray piece fails.

    An exact parse (no greedy guess), over the sets of positions reachable after each piece.
    """
    text = _squash(stream)
    deco = [re.compile(d) for d in decoration]

    def close(positions: set[int]) -> set[int]:
        todo, seen = list(positions), set(positions)
        while todo:
            at = todo.pop()
            for end in range(at + 1, min(len(text), at + 24) + 1):  # every way to match
                if end not in seen and any(d.fullmatch(text, at, end) for d in deco):
                    seen.add(end)
                    todo.append(end)
        return seen

    reachable = close({0})
    for piece in pieces:
        p = _squash(piece)
        if not p:
            continue
        reachable = close({at + len(p) for at in reachable if text.startswith(p, at)})
        if not reachable:
            raise AssertionError(f"missing, out of order or preceded by stray text: {p[:80]!r}")
    if len(text) not in reachable:
        end = max(reachable)
        raise AssertionError(f"stray or repeated text after the last piece: {text[end:][:80]!r}")


#: What the Discord renderer adds around issue text, as seen by a reader (whitespace removed).
DISCORD_DECORATION = (
    r"【(?:重点|简讯|经典回顾)】",
    r"\d+\.",
    r"·",
    r"\d{4}-\d{2}-\d{2}",
    r"本期重点：",
    r"带着一个问题读：",
    r"来源\d+",
    re.escape(dc.LONG_SOURCE_LABEL.replace(" ", "")).replace(re.escape("{n}"), r"\d+"),
    r"本期没有(?:简讯|经典回顾)。",
)
#: A line of a too-long source's address (inline code): only the renderer writes a raw backtick.
_ADDRESS_LINE = r"^`([^`\n]*)`$"


def _without_addresses(markdown: str) -> str:
    return re.sub(_ADDRESS_LINE, "", markdown, flags=re.M)


def discord_stream(messages: Iterable[Message]) -> str:
    """The text a reader sees, in order: content, then each embed's title and description.

    A truncated title (ending in "…", with the full title opening the description) is skipped:
    it repeats text on purpose. Footers and URLs (including the address lines of a source too
    long to link) are not issue text.
    """
    out: list[str] = []
    for m in messages:
        out.append(visible(_without_addresses(m.payload.get("content", ""))))
        for embed in m.payload.get("embeds", []):
            title = embed.get("title", "")
            truncated = title.endswith("…") and embed.get("description", "").startswith("**")
            if title and not truncated:
                out.append(visible(title))
            out.append(visible(_without_addresses(embed.get("description", ""))))
    return "\n".join(out)


def issue_pieces(issue: Issue, part: Part, brief: int | None = None) -> list[str]:
    """The issue text ``part`` must show, in order (links excluded)."""
    pieces = [issue.masthead]
    if part in (Part.ALL, Part.TOC) and issue.lede:
        pieces.append(issue.lede)
    items: list[Item]
    if part is Part.ALL:
        items = [item for _, item in issue.items()]
    elif part is Part.HEADLINE:
        items = [issue.headline]
    elif part is Part.BRIEFS:
        items = list(issue.briefs)
    elif part is Part.BRIEF:
        items = [issue.brief(brief or 0)]
    elif part is Part.CLASSIC:
        items = [issue.classic] if issue.classic else []
    else:
        return pieces + [item.title for _, item in issue.items()]
    for item in items:
        pieces += item.text_pieces()
    return pieces


_LONG_LABEL = re.escape(dc.LONG_SOURCE_LABEL).replace(re.escape("{n}"), r"\d+")
_LINK_PARTS = re.compile(
    r"\]\(<(?P<target>[^>]*)>\)" + rf"|^(?P<label>{_LONG_LABEL})$" + r"|^`(?P<address>[^`\n]*)`$",
    re.M,
)


def linked_urls(messages: Iterable[Message]) -> list[str]:
    """Every link target in order: embed urls, masked-link targets ``](<url>)`` and the address
    of a source too long to link (its inline-code lines joined, across messages too)."""
    out: list[str] = []

    def scan(markdown: str) -> None:
        for m in _LINK_PARTS.finditer(markdown):
            if m["target"] is not None:
                out.append(m["target"])
            elif m["label"] is not None:
                out.append("")  # a long source: its address lines follow
            else:
                out[-1] += m["address"]

    for m in messages:
        scan(m.payload.get("content", ""))
        for embed in m.payload.get("embeds", []):
            if "url" in embed:
                out.append(embed["url"])
            scan(embed.get("description", ""))
    return out


def assert_within_limits(messages: Sequence[Message]) -> None:
    assert messages
    for m in messages:
        assert dc.check_message(m.payload) == []


# --- golden files -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(("name", "part", "brief"), PARTS, ids=[p[0] for p in PARTS])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_golden_payloads(fixture: str, name: str, part: Part, brief: int | None, mode: str) -> None:
    messages = dc.render(load_fixture(fixture), part, brief=brief, options=MODES[mode])
    assert_within_limits(messages)
    payloads = [m.payload for m in messages]
    text = json.dumps(payloads, ensure_ascii=False, indent=2) + "\n"
    assert_golden(GOLDEN / "discord" / f"{fixture}-{name}-{mode}.json", text)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fixture", FIXTURES)
def test_golden_previews(fixture: str, mode: str) -> None:
    messages = dc.render(load_fixture(fixture), Part.ALL, options=MODES[mode])
    text = "\n\n=====\n\n".join(dc.preview(m) for m in messages) + "\n"
    assert_golden(GOLDEN / "discord" / f"{fixture}-all-{mode}.preview.txt", text)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(("name", "part", "brief"), PARTS, ids=[p[0] for p in PARTS])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_fixtures_lose_nothing(
    fixture: str, name: str, part: Part, brief: int | None, mode: str
) -> None:
    issue = load_fixture(fixture)
    messages = dc.render(issue, part, brief=brief, options=MODES[mode])
    assert_covers(discord_stream(messages), issue_pieces(issue, part, brief), DISCORD_DECORATION)


# --- the long fixture really exercises splitting ---------------------------------------------


def test_long_item_is_split_over_embeds_and_messages() -> None:
    issue = load_fixture("long")
    messages = dc.render(issue, Part.HEADLINE)
    embeds = [e for m in messages for e in m.payload["embeds"]]
    assert len(embeds) > 1, "the long headline needs several embeds"
    assert embeds[0]["title"].endswith("…") and len(embeds[0]["title"]) <= dc.Limits.title_maxlen
    assert visible(embeds[0]["description"]).startswith(issue.headline.title)
    assert embeds[0]["url"] == issue.headline.links[0]
    assert all("title" not in e and "（续）" in e["footer"]["text"] for e in embeds[1:])
    assert {e["color"] for e in embeds} == {dc.SECTION_COLOURS[issue.items()[0][0]]}


def test_long_issue_packs_items_into_few_messages() -> None:
    issue = load_fixture("long")
    messages = dc.render(issue)
    sizes = [sum(dc.embed_chars(e) for e in m.payload["embeds"]) for m in messages]
    assert sum(sizes) > dc.Limits.embed_total_maxlen
    # no two neighbouring messages could have been one
    for m, n in itertools.pairwise(messages):
        together = m.payload["embeds"] + n.payload["embeds"]
        assert (
            len(together) > dc.Limits.embeds_per_message
            or sum(map(dc.embed_chars, together)) > dc.Limits.embed_total_maxlen
        )


def test_markdown_fallback_splits_within_content_limit() -> None:
    messages = dc.render(load_fixture("long"), options=RenderOptions(embeds=False))
    assert len(messages) > 5
    assert all("embeds" not in m.payload for m in messages)
    assert all(len(m.payload["content"]) <= dc.Limits.body_maxlen for m in messages)


# --- escaping tables ---------------------------------------------------------------------------

ESCAPES = [
    ("\\", "\\\\"),
    ("*", "\\*"),
    ("_", "\\_"),
    ("~", "\\~"),
    ("`", "\\`"),
    ("|", "\\|"),
    (">", "\\>"),
    ("<", "\\<"),
    ("[", "\\["),
    ("]", "\\]"),
    ("(", "\\("),
    (")", "\\)"),
    ("a*b*c", "a\\*b\\*c"),
    ("**bold**", "\\*\\*bold\\*\\*"),
    ("||spoiler||", "\\|\\|spoiler\\|\\|"),
    ("```py```", "\\`\\`\\`py\\`\\`\\`"),
    # only meaningful at the start of a line
    ("# 标题", "\\# 标题"),
    ("### x", "\\### x"),
    ("-# small", "\\-# small"),
    ("- item", "\\- item"),
    ("+ item", "\\+ item"),
    ("  - item", "  \\- item"),
    ("1. one", "1\\. one"),
    ("12. twelve", "12\\. twelve"),
    ("C# and a-b", "C# and a-b"),
    ("3.14 and 1.5", "3.14 and 1.5"),
    ("x\n# y", "x\n\\# y"),
    # full-width lookalikes and ordinary text stay as they are
    ("＊全角＊　【】（）", "＊全角＊　【】（）"),
    ("A & B", "A & B"),
    ("", ""),
    # mentions
    ("@everyone", f"@{ZWSP}everyone"),
    ("@here", f"@{ZWSP}here"),
    ("<@123456789012345678>", f"\\<@{ZWSP}123456789012345678\\>"),
    ("<@!123>", f"\\<@{ZWSP}!123\\>"),
    ("<@&42>", f"\\<@{ZWSP}&42\\>"),
    ("<#42>", "\\<#42\\>"),
    ("mail@example.org", f"mail@{ZWSP}example.org"),
    # URLs in running text become autolinks, untouched inside
    ("see https://a.org/x_y", "see <https://a.org/x_y>"),
    ("(https://a.org/b).", "\\(<https://a.org/b>\\)."),
    ("https://a.org/w_(x) y", "<https://a.org/w_(x)> y"),
    ("https://a.org/p?q=1, next", "<https://a.org/p?q=1>, next"),
    ("https://a.org/@everyone", f"<https://a.org/>@{ZWSP}everyone"),
]


@pytest.mark.parametrize(("text", "expected"), ESCAPES)
def test_escape_table(text: str, expected: str) -> None:
    assert escape(text) == expected
    assert unescape(expected) == text


def test_escape_mid_line_keeps_line_start_markers() -> None:
    assert escape("# x", line_start=False) == "# x"
    assert escape("1. x", line_start=False) == "1. x"
    assert escape("*x", line_start=False) == "\\*x"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://a.org/x", "https://a.org/x"),
        ("https://a.org/w_(x)", "https://a.org/w_%28x%29"),
        ("https://a.org/?q=a>b", "https://a.org/?q=a%3Eb"),
        ("https://a.org/<x>", "https://a.org/%3Cx%3E"),
        ("https://a.org/[1]", "https://a.org/%5B1%5D"),
        ("https://a.org/a\\b", "https://a.org/a%5Cb"),
        ("https://a.org/~u/*s*_x", "https://a.org/~u/*s*_x"),
        # "@everyone" / "@here" would be mentions: the letter after "@" is percent-encoded
        ("https://a.org/@everyone", "https://a.org/@%65veryone"),
        ("https://a.org/x/@here?u=@everyone", "https://a.org/x/@%68ere?u=@%65veryone"),
        ("https://u@here.example/", "https://u@%68ere.example/"),  # still user "u", host "here…"
        ("https://a.org/@alice", "https://a.org/@alice"),
    ],
)
def test_safe_url_table(url: str, expected: str) -> None:
    assert safe_url(url) == expected
    assert pingable(f"[x](<{safe_url(url)}>)") == []


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("plain", "[plain](<https://a.org/x_(y)>)"),
        ("a]b", "[a\\]b](<https://a.org/x_(y)>)"),
        (
            "[x](https://evil.example)",
            "[\\[x\\]\\(<https://evil.example>\\)](<https://a.org/x_(y)>)",
        ),
        ("1. x", "[1. x](<https://a.org/x_(y)>)"),
    ],
)
def test_masked_link_text_cannot_break_out(title: str, expected: str) -> None:
    md = link(title, "https://a.org/x_(y)").replace("%28", "(").replace("%29", ")")
    assert md == expected
    real = link(title, "https://a.org/x_(y)")
    assert real.endswith("](<https://a.org/x_%28y%29>)")
    assert visible(real) == title
    assert visible(real, links=True) == f"{title} <https://a.org/x_%28y%29>"


@pytest.mark.parametrize(
    ("markdown", "found"),
    [
        ("hi @everyone", ["@everyone"]),
        ("hi @here now", ["@here"]),
        ("<@123>", ["<@123>"]),
        ("<@!123>", ["<@!123>"]),
        ("<@&5>", ["<@&5>"]),
        ("<#5>", ["<#5>"]),
        ("\\<@123\\>", []),
        ("\\\\<@123>", ["<@123>"]),  # an escaped backslash does not escape the "<"
        (f"@{ZWSP}everyone", []),
        ("plain text", []),
    ],
)
def test_pingable_table(markdown: str, found: list[str]) -> None:
    assert pingable(markdown) == found


def test_special_fixture_pings_nobody() -> None:
    for mode in MODES.values():
        for m in dc.render(load_fixture("special"), options=mode):
            assert m.payload["allowed_mentions"] == {"parse": []}
            texts = [m.payload.get("content", "")]
            texts += [e.get("title", "") + e["description"] for e in m.payload.get("embeds", [])]
            assert all(pingable(t) == [] for t in texts)
            assert all("@everyone" not in t and "@here" not in t for t in texts)


def test_links_point_at_every_source_in_order() -> None:
    issue = load_fixture("special")
    embedded = linked_urls(dc.render(issue))
    expected = []
    for _, item in issue.items():
        expected += [item.links[0], *map(safe_url, item.links[1:])] if item.links else []
    assert embedded == expected
    fallback = linked_urls(dc.render(issue, options=RenderOptions(embeds=False)))
    assert fallback == [safe_url(url) for _, item in issue.items() for url in item.links]


# --- long links ---------------------------------------------------------------------------


def _with_links(*links: str, title: str = "标题") -> Issue:
    item = Item(title=title, paragraphs=("正文。",), links=links)
    return Issue(date=load_fixture("english").date, headline=item)


def _unvalidated(*links: str) -> Issue:
    """An issue whose links skip the model's checks (the renderer must cope anyway)."""
    item = Item.model_construct(title="标题", paragraphs=("正文。",), links=links, question=None)
    return Issue.model_construct(
        date=load_fixture("english").date,
        masthead="AI 技术日报",
        lede=None,
        headline=item,
        briefs=(),
        classic=None,
    )


def _markdown(messages: Iterable[Message]) -> list[str]:
    """Each message's content and embed descriptions, as written."""
    out: list[str] = []
    for m in messages:
        out.append(m.payload.get("content", ""))
        out += [e.get("description", "") for e in m.payload.get("embeds", [])]
    return out


def test_model_caps_url_length() -> None:
    at_cap = "https://example.com/" + "a" * (MAX_URL_CHARS - 20)
    assert _with_links(at_cap).headline.links == (at_cap,)
    with pytest.raises(ValueError, match=f"2001 characters long; at most {MAX_URL_CHARS}"):
        _with_links(at_cap + "a")


LONG = "https://example.com/r?u=" + "a" * (MAX_URL_CHARS - 24)
ODD = "https://example.com/" + "()" * ((MAX_URL_CHARS - 20) // 2)  # triples when made safe


@pytest.mark.parametrize("long", [LONG, ODD])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("part", [Part.ALL, Part.TOC])
def test_a_link_too_long_to_mask_is_its_address_as_code(long: str, mode: str, part: Part) -> None:
    issue = _with_links("https://example.com/1", long, "https://example.com/3")
    messages = dc.render(issue, part, options=MODES[mode])
    assert_within_limits(messages)
    assert_covers(discord_stream(messages), issue_pieces(issue, part), DISCORD_DECORATION)
    if part is Part.TOC:
        return
    first = "https://example.com/1" if mode == "embeds" else safe_url("https://example.com/1")
    assert linked_urls(messages) == [first, safe_url(long), "https://example.com/3"]
    shown = "\n".join(_markdown(messages))
    limit = dc.Limits.embed_description_maxlen if mode == "embeds" else dc.Limits.body_maxlen
    if dc.measure(f"[来源 2](<{safe_url(long)}>)") > limit:
        assert "来源 2（链接太长，地址如下）：\n`https://example.com/" in shown
        assert "[来源 2]" not in shown
    else:
        assert "来源 2（链接太长" not in shown


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("part", [Part.ALL, Part.TOC])
def test_a_first_link_too_long_for_the_title(mode: str, part: Part) -> None:
    issue = _with_links(LONG)
    messages = dc.render(issue, part, options=MODES[mode])
    assert_within_limits(messages)
    assert_covers(discord_stream(messages), issue_pieces(issue, part), DISCORD_DECORATION)
    if mode == "markdown" or part is Part.TOC:  # the title is content: too long to link
        content = "\n".join(_markdown(messages))
        assert "**【重点】**" in content and "来源 1（链接太长，地址如下）：\n`" in content
        assert "[标题]" not in content
    if part is not Part.TOC:
        expected = LONG if mode == "embeds" else safe_url(LONG)
        assert linked_urls(messages) == [expected]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("part", [Part.ALL, Part.TOC])
def test_links_over_the_model_cap_still_fit(mode: str, part: Part) -> None:
    """The reviewer's cases, past the model's check: nothing over a limit, nothing lost."""
    for links in [
        ("https://example.com/1", "https://example.com/r?u=" + "a" * 4200),
        ("https://example.com/" + "b" * 9000,),
    ]:
        issue = _unvalidated(*links)
        messages = dc.render(issue, part, options=MODES[mode])
        assert_within_limits(messages)
        assert_covers(discord_stream(messages), issue_pieces(issue, part), DISCORD_DECORATION)
        if part is not Part.TOC and mode == "markdown":
            assert linked_urls(messages) == [safe_url(u) for u in links]


@pytest.mark.parametrize("mode", list(MODES))
def test_mentions_in_links_ping_nobody(mode: str) -> None:
    issue = _with_links("https://example.com/@everyone", "https://example.com/x/@here")
    for part in (Part.ALL, Part.TOC):
        for m in dc.render(issue, part, options=MODES[mode]):
            texts = [m.payload.get("content", "")]
            texts += [e.get("description", "") for e in m.payload.get("embeds", [])]
            assert all(pingable(t) == [] for t in texts)


def test_render_refuses_a_payload_over_a_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer bug fails loudly in render, never reaches Discord."""
    buttons = dc._buttons

    def six_buttons(issue: Issue) -> dict[str, Any]:
        row = buttons(issue)
        row["components"] = row["components"] * 6
        return row

    monkeypatch.setattr(dc, "_buttons", six_buttons)
    with pytest.raises(AssertionError, match="breaks a limit"):
        dc.render(load_fixture("english"), options=RenderOptions(buttons=True))


# --- parts, buttons, errors ----------------------------------------------------------------


def test_buttons_only_on_last_message_and_parse_back() -> None:
    issue = load_fixture("long")
    messages = dc.render(issue, options=RenderOptions(buttons=True))
    assert all("components" not in m.payload for m in messages[:-1])
    (row,) = messages[-1].payload["components"]
    assert row["type"] == dc.COMPONENT_ACTION_ROW
    assert [b["label"] for b in row["components"]] == ["重点", "简讯", "经典回顾"]
    for button in row["components"]:
        assert button["type"] == dc.COMPONENT_BUTTON
        assert len(button["custom_id"]) <= dc.Limits.custom_id_maxlen
        parsed = parse_button_data(button["custom_id"])
        assert parsed is not None and parsed[0] == issue.date
        assert parsed[1].label == button["label"]
    assert dc.preview(messages[-1]).endswith("[重点] [简讯] [经典回顾]")


def test_buttons_only_for_sections_the_issue_has() -> None:
    issue = load_fixture("english").model_copy(update={"classic": None, "briefs": ()})
    (message,) = dc.render(issue, options=RenderOptions(buttons=True))
    labels = [b["label"] for b in message.payload["components"][0]["components"]]
    assert labels == ["重点"]


def test_missing_classic_is_one_message_saying_so() -> None:
    issue = load_fixture("english").model_copy(update={"classic": None})
    for options in MODES.values():
        (message,) = dc.render(issue, Part.CLASSIC, options=options)
        assert "embeds" not in message.payload
        assert "本期没有经典回顾。" in message.payload["content"]
        assert dc.check_message(message.payload) == []


def test_missing_briefs_is_one_message_saying_so() -> None:
    issue = load_fixture("english").model_copy(update={"briefs": ()})
    (message,) = dc.render(issue, Part.BRIEFS)
    assert "本期没有简讯。" in message.payload["content"]


def test_brief_number_errors() -> None:
    issue = load_fixture("english")
    with pytest.raises(ValueError, match="brief"):
        dc.render(issue, Part.BRIEF)
    with pytest.raises(IndexError):
        dc.render(issue, Part.BRIEF, brief=3)
    with pytest.raises(IndexError):
        dc.render(issue, Part.BRIEF, brief=0)


def test_brief_part_is_that_brief_numbered() -> None:
    issue = load_fixture("english")
    (message,) = dc.render(issue, Part.BRIEF, brief=2)
    (embed,) = message.payload["embeds"]
    assert visible(embed["title"]) == issue.briefs[1].title
    assert embed["footer"]["text"].startswith("简讯 2/2 · ")
    assert embed["color"] == dc.SECTION_COLOURS[issue.items()[1][0]]


def test_toc_lists_every_title_in_content() -> None:
    issue = load_fixture("english")
    (message,) = dc.render(issue, Part.TOC, options=RenderOptions(embeds=True))
    assert "embeds" not in message.payload
    shown = visible(message.payload["content"])
    positions = [shown.index(item.title) for _, item in issue.items()]
    assert positions == sorted(positions)


def test_question_is_set_apart_as_a_quote() -> None:
    issue = load_fixture("english")
    (message,) = dc.render(issue, Part.CLASSIC)
    description = message.payload["embeds"][0]["description"]
    assert issue.classic is not None and issue.classic.question
    assert f"\n\n> 带着一个问题读：{escape(issue.classic.question)}" in description


def test_lede_only_for_the_whole_issue() -> None:
    issue = load_fixture("english")
    first = dc.render(issue)[0].payload["content"]
    assert first.startswith("**AI Tech Daily** · 2026-11-05\n本期重点：Compilers")
    assert "本期重点" not in dc.render(issue, Part.HEADLINE)[0].payload["content"]


def test_title_of_exactly_the_limit_is_not_truncated() -> None:
    issue = load_fixture("english")
    headline = issue.headline.model_copy(update={"title": "x" * dc.Limits.title_maxlen})
    (message,) = dc.render(issue.model_copy(update={"headline": headline}), Part.HEADLINE)
    assert message.payload["embeds"][0]["title"] == "x" * dc.Limits.title_maxlen
    headline = issue.headline.model_copy(update={"title": "*" * 200})  # escapes to 400
    (message,) = dc.render(issue.model_copy(update={"headline": headline}), Part.HEADLINE)
    embed = message.payload["embeds"][0]
    assert embed["title"] == "\\*" * 127 + "…"
    assert embed["description"].startswith("**" + "\\*" * 200 + "**\n\n")


def test_digest_core_does_not_import_the_sdk() -> None:
    code = (
        "import sys, digest_core.rendering.discord, digest_core.rendering.plain;"
        "assert 'discord' not in sys.modules and 'telegram' not in sys.modules"
    )
    root = Path(__file__).parent.parent.parent
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


# --- check_message finds each violation ---------------------------------------------------


def _ok() -> dict[str, Any]:
    return {
        "content": "hi",
        "embeds": [{"title": "t", "description": "d", "footer": {"text": "f"}}],
        "allowed_mentions": {"parse": []},
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p: p.update(content="x" * 2001), "content is 2001 > 2000"),
        (lambda p: p.update(content="😀" * 1001), "content is 2002 > 2000"),
        (lambda p: p.update(embeds=p["embeds"] * 11), "11 embeds > 10"),
        (lambda p: p["embeds"][0].update(title="t" * 257), "embed 0 title is 257 > 256"),
        (lambda p: p["embeds"][0].update(description="d" * 4097), "description is 4097 > 4096"),
        (lambda p: p["embeds"][0].update(footer={"text": "f" * 2049}), "footer is 2049 > 2048"),
        (lambda p: p["embeds"][0].update(author={"name": "a" * 257}), "author is 257 > 256"),
        (
            lambda p: p.update(embeds=[{"description": "d" * 4000}, {"description": "d" * 2001}]),
            "embeds total 6001 > 6000",
        ),
        (lambda p: p["embeds"][0].update(url="javascript:alert(1)"), "is not http(s)"),
        (lambda p: p.update(content="", embeds=[]), "message is empty"),
        (lambda p: p.pop("allowed_mentions"), "allowed_mentions is not"),
        (lambda p: p.update(content="hi @everyone"), "live mention '@everyone'"),
        (lambda p: p["embeds"][0].update(description="<@&1>"), "live mention '<@&1>'"),
        (
            lambda p: p.update(components=[{"type": 1, "components": [{"custom_id": "x" * 101}]}]),
            "custom_id",
        ),
        (lambda p: p.update(components=[{"type": 1, "components": []}] * 6), "6 action rows > 5"),
    ],
)
def test_check_message_finds(change: Any, problem: str) -> None:
    payload = _ok()
    assert dc.check_message(payload) == []
    change(payload)
    problems = dc.check_message(payload)
    assert any(problem in p for p in problems), problems


def test_embed_chars_counts_every_counted_field() -> None:
    embed = {
        "title": "ab",
        "description": "cde",
        "url": "https://not.counted",
        "footer": {"text": "f"},
        "author": {"name": "gh"},
        "fields": [{"name": "i", "value": "jk"}],
    }
    assert dc.embed_chars(embed) == 11


def test_a_missing_golden_file_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UPDATE_GOLDEN", raising=False)
    with pytest.raises(pytest.fail.Exception, match="UPDATE_GOLDEN=1"):
        assert_golden(tmp_path / "missing.json", "[]\n")
    (tmp_path / "present.json").write_text("[1]\n", encoding="utf-8")
    with pytest.raises(AssertionError):
        assert_golden(tmp_path / "present.json", "[2]\n")


# --- the web archive link ------------------------------------------------------------------------

SITE = "https://digest.example/"


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("name", "part", "brief"), [("all", Part.ALL, None), ("brief2", Part.BRIEF, 2)]
)
def test_golden_payloads_with_the_web_link(
    name: str, part: Part, brief: int | None, mode: str
) -> None:
    issue = load_fixture("special")
    options = dataclasses.replace(MODES[mode], site_url=SITE)
    messages = dc.render(issue, part, brief=brief, options=options)
    assert_within_limits(messages)
    text = json.dumps([m.payload for m in messages], ensure_ascii=False, indent=2) + "\n"
    assert_golden(GOLDEN / "discord" / f"special-{name}-{mode}-web.json", text)
    anchor = "#brief-2" if brief else ""
    link = f"[全文 / web](<{SITE}{issue.date:%Y/%m/%d}/{anchor}>)"
    assert messages[0].payload["content"].split("\n", 1)[0].endswith(" · " + link)
    without = dc.render(issue, part, brief=brief, options=MODES[mode])
    assert [m.payload for m in without][1:] == [m.payload for m in messages][1:]
