"""Telegram renderer: golden files, table tests of escaping and layout, and splitting cases."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from digest_core.models import QUESTION_MARKER, Issue, Item, Section
from digest_core.rendering import Message, Part, RenderOptions, button_data, parse_button_data
from digest_core.rendering import html as tg_html
from digest_core.rendering import telegram as tg
from digest_core.rendering.split import utf16_len
from tests.rendering.inverses import check_html, unmute_mentions, visible_text

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parents[1] / "golden" / "telegram"
FIXTURES = ("special", "long", "english")
DATE = dt.date(2026, 10, 27)

# --- helpers (also used by the property tests) --------------------------------------------------


def load_fixture(name: str) -> Issue:
    return Issue.model_validate_json((DATA / f"telegram_{name}.json").read_text(encoding="utf-8"))


def make_item(
    title: str = "标题", *paragraphs: str, links: tuple[str, ...] = (), **kw: Any
) -> Item:
    return Item(title=title, paragraphs=paragraphs or ("正文。",), links=links, **kw)


def make_issue(**kw: Any) -> Issue:
    kw.setdefault("date", DATE)
    kw.setdefault("headline", make_item("头条", "头条正文。", links=("https://h.example/1",)))
    return Issue(**kw)


def texts(messages: list[Message]) -> list[str]:
    """The visible text of each message."""
    return [visible_text(m.payload["text"]) for m in messages]


def expected_pieces(issue: Issue, part: Part, brief: int | None = None) -> list[str]:
    """Every piece of issue text ``part`` must show, in order."""
    head = [issue.masthead]
    if part is Part.ALL or part is Part.TOC:
        if issue.lede:
            head.append(issue.lede)
        items = [item for _, item in issue.items()]
        if part is Part.TOC:
            return head + [item.title for item in items]
    elif part is Part.HEADLINE:
        items = [issue.headline]
    elif part is Part.BRIEFS:
        items = list(issue.briefs)
    elif part is Part.BRIEF:
        assert brief is not None
        items = [issue.brief(brief)]
    else:
        items = [issue.classic] if issue.classic else []
    return head + [piece for item in items for piece in item.text_pieces()]


def expected_links(issue: Issue, part: Part, brief: int | None = None) -> list[str]:
    """Every href ``part`` must link, in order."""
    if part is Part.TOC:
        return [item.url for _, item in issue.items() if item.url]
    if part is Part.ALL:
        items = [item for _, item in issue.items()]
    elif part is Part.HEADLINE:
        items = [issue.headline]
    elif part is Part.BRIEFS:
        items = list(issue.briefs)
    elif part is Part.BRIEF:
        assert brief is not None
        items = [issue.brief(brief)]
    else:
        items = [issue.classic] if issue.classic else []
    return [url for item in items for url in item.links]


def glue_pattern(issue: Issue) -> str:
    """A regex for one piece of text the renderer adds (labels, numbers, separators)."""
    labels = [
        tg.CONTINUED,
        tg.LEDE_LABEL,
        tg.MASTHEAD_SEP,
        tg.SOURCE_SEP,
        tg.format_date(issue),
        QUESTION_MARKER,
        tg.NO_BRIEFS,
        tg.NO_CLASSIC,
        *(tg.section_header(s) for s in Section),
    ]
    alternatives = [re.escape(label) for label in labels] + [r"\d+\. ", r"来源 \d+", r"\n"]
    return "(?:" + "|".join(alternatives) + ")*"


#: The longest run of renderer text between two pieces of issue text (labels, numbers, sources).
MAX_GLUE = 200


def assert_text_exactly_once(
    issue: Issue, part: Part, messages: list[Message], brief: int | None = None
) -> None:
    """All messages' visible text together is the issue's text pieces, in order, each exactly
    once, with nothing between them but the renderer's own labels and separators.

    A continued message's marker is removed first: it may sit inside a cut paragraph. So is the
    one MENTION_BREAK the renderer puts after an "@" (exactly that one: a lost, added or moved
    ZWSP still fails)."""
    shown = texts(messages)
    marker = tg.CONTINUED + "\n"
    joined = unmute_mentions(shown[0] + "".join(t.removeprefix(marker) for t in shown[1:]))
    glue = re.compile(glue_pattern(issue))
    # every position where the pieces so far can end (a piece may also look like a label,
    # e.g. a title "1" after the number "1. ", so all alternatives are followed)
    ends = {0}
    for n, piece in enumerate(expected_pieces(issue, part, brief)):
        after: set[int] = set()
        for pos in ends:
            at = joined.find(piece, pos)
            while 0 <= at <= pos + MAX_GLUE:
                if glue.fullmatch(joined, pos, at):
                    after.add(at + len(piece))
                at = joined.find(piece, at + 1)
        start = min(ends)
        assert after, (
            f"{part}: piece {n} {piece[:30]!r} lost, repeated or out of order; "
            f"found instead {joined[start : start + 40]!r}"
        )
        ends = after
    assert any(glue.fullmatch(joined, pos) for pos in ends), f"{part}: unexpected text at the end"


def hrefs(messages: list[Message]) -> list[str]:
    """Link targets in send order; a link cut across messages (reopened) counts once."""
    out: list[str] = []
    for m in messages:
        for ev in tg_html.parse(m.payload["text"]):
            if isinstance(ev, tg_html.Open) and ev.name == "a":
                out.append(ev.attr("href") or "")
    return [u for i, u in enumerate(out) if i == 0 or out[i - 1] != u]


def collapse(urls: list[str]) -> list[str]:
    return [u for i, u in enumerate(urls) if i == 0 or urls[i - 1] != u]


def assert_invariants(
    issue: Issue, part: Part, messages: list[Message], brief: int | None = None
) -> None:
    """Everything every rendering must satisfy."""
    assert messages
    for m in messages:
        text = m.payload["text"]
        check_html(text)
        assert utf16_len(visible_text(text)) <= tg.Limits.body_maxlen
        assert m.payload["parse_mode"] == "HTML"
        assert set(m.payload) <= {"text", "parse_mode", "link_preview_options", "reply_markup"}
        for row in m.payload.get("reply_markup", {}).get("inline_keyboard", []):
            for button in row:
                assert 1 <= len(button["callback_data"].encode("utf-8")) <= 64
    assert all("reply_markup" not in m.payload for m in messages[:-1])
    previews = [m for m in messages if not m.payload["link_preview_options"].get("is_disabled")]
    assert len(previews) <= 1
    for i, t in enumerate(texts(messages)[1:], start=1):
        # every later message starts with the continuation marker, a section header or a number
        assert re.match(r"（续）\n|【.+?】|\d+\. ", t), f"message {i} starts oddly: {t[:20]!r}"
    assert_text_exactly_once(issue, part, messages, brief)
    assert hrefs(messages) == collapse(expected_links(issue, part, brief))
    assert_no_mentions(messages)


#: What Telegram reads as the start of a mention: "@" and a username character.
LIVE_MENTION = re.compile(r"@[A-Za-z0-9_]")


def assert_no_mentions(messages: list[Message]) -> None:
    """No message's visible text has an "@" that Telegram could read as a mention."""
    for i, t in enumerate(texts(messages)):
        found = LIVE_MENTION.search(t)
        assert found is None, f"message {i} has a live mention at {t[found.start() :][:20]!r}"


# --- golden files -------------------------------------------------------------------------------

GOLDEN_PARTS: list[tuple[Part, int | None]] = [
    (Part.ALL, None),
    (Part.HEADLINE, None),
    (Part.BRIEFS, None),
    (Part.BRIEF, 2),
    (Part.CLASSIC, None),
    (Part.TOC, None),
]


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize(("part", "brief"), GOLDEN_PARTS, ids=[p.value for p, _ in GOLDEN_PARTS])
def test_golden(fixture: str, part: Part, brief: int | None) -> None:
    issue = load_fixture(fixture)
    messages = tg.render(issue, part, brief=brief, options=RenderOptions(buttons=True))
    got = [{"payload": m.payload, "preview": tg.preview(m)} for m in messages]
    suffix = f"{part.value}{brief}" if brief else part.value
    path = GOLDEN / f"{fixture}_{suffix}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    assert path.exists(), (
        f"missing golden {path.name}: run with UPDATE_GOLDEN=1 and review the diff"
    )
    assert json.loads(path.read_text(encoding="utf-8")) == got
    assert_invariants(issue, part, messages, brief)


def test_long_fixture_splits_the_headline() -> None:
    issue = load_fixture("long")
    messages = tg.render(issue, Part.HEADLINE)
    shown = texts(messages)
    assert len(messages) >= 3
    assert sum(t.count(issue.headline.title) for t in shown) == 1
    assert all(t.startswith(tg.CONTINUED + "\n") for t in shown[1:])
    # the paragraph without any sentence end was cut after a comma, not mid-clause
    no_stop = issue.headline.paragraphs[3]
    assert "。" not in no_stop[:-1]
    cut = next(t for t in shown if no_stop[:20] in t)
    assert no_stop[-20:] not in cut
    assert cut.endswith("，")


def test_checker_can_fail() -> None:
    """The no-loss check rejects a lost character, a repeated piece and a reordering."""
    issue = load_fixture("special")
    messages = tg.render(issue, Part.ALL)
    assert_text_exactly_once(issue, Part.ALL, messages)

    def tampered(html: str) -> list[Message]:
        return [Message(payload={**messages[0].payload, "text": html})]

    original = messages[0].payload["text"]
    para = tg_html.escape_text(issue.briefs[0].paragraphs[0])
    lost = original.replace(para, para[:-1])
    repeated = original.replace(para, para + "\n" + para)
    b1, b2 = (tg_html.escape_text(b.paragraphs[0]) for b in issue.briefs[2:4])
    swapped = original.replace(b1, "\0").replace(b2, b1).replace("\0", b2)
    for html in (lost, repeated, swapped):
        assert html != original
        with pytest.raises(AssertionError):
            assert_text_exactly_once(issue, Part.ALL, tampered(html))


# --- escaping -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("a < b", "a &lt; b"),
        ("A & B", "A &amp; B"),
        ("<b>x</b>", "&lt;b&gt;x&lt;/b&gt;"),
        ("&amp; stays literal", "&amp;amp; stays literal"),
        ("&#60;", "&amp;#60;"),
        ('say "hi"', 'say "hi"'),
        ("*bold* _it_ ~s~ ||sp|| `c`", "*bold* _it_ ~s~ ||sp|| `c`"),
        ("@everyone @here", "@\u200beveryone @\u200bhere"),
        ("mail me@example.org", "mail me@\u200bexample.org"),
        ("#hashtag @ 1", "#hashtag @ 1"),
        ("😀 𠀀", "😀 𠀀"),
    ],
)
def test_issue_text_is_escaped(text: str, html: str) -> None:
    issue = make_issue(headline=make_item("T", text))
    out = tg.render(issue, Part.HEADLINE)[0].payload["text"]
    assert "\n" + html in out
    assert text in unmute_mentions(visible_text(out))
    check_html(out)


@pytest.mark.parametrize(
    ("url", "attr"),
    [
        ("https://e.example/?a=1&b=2", 'href="https://e.example/?a=1&amp;b=2"'),
        ('https://e.example/"q"', 'href="https://e.example/&quot;q&quot;"'),
        ("https://e.example/<x>", 'href="https://e.example/&lt;x&gt;"'),
        ("https://e.example/it's", 'href="https://e.example/it\'s"'),
        ('https://e.example/"><b>x', 'href="https://e.example/&quot;&gt;&lt;b&gt;x"'),
    ],
)
def test_urls_are_escaped_in_href(url: str, attr: str) -> None:
    # the model refuses quotes and <> in links; the renderer must cope with them anyway
    item = Item.model_construct(title="T", paragraphs=("p",), links=(url,), question=None)
    issue = make_issue(headline=item)
    out = tg.render(issue, Part.HEADLINE)[0].payload["text"]
    assert f"<a {attr}>T</a>" in out
    opened = [ev for ev in tg_html.parse(out) if isinstance(ev, tg_html.Open) and ev.name == "a"]
    assert [ev.attr("href") for ev in opened] == [url]


@pytest.mark.parametrize(
    ("text", "muted"),
    [
        ("@alice", "@\u200balice"),
        ("hi @Bob_1, @_x and @9", "hi @\u200bBob_1, @\u200b_x and @\u200b9"),
        ("a@b.org", "a@\u200bb.org"),
        ("@@a", "@@\u200ba"),
        ("@\u200bbob", "@\u200b\u200bbob"),  # doubled, so unmuting is exact
        ("@ 空格 @中文 @- @", "@ 空格 @中文 @- @"),  # not a username start: left alone
        ("#hashtag", "#hashtag"),  # hashtags notify nobody
        ("", ""),
    ],
)
def test_mute_mentions_table(text: str, muted: str) -> None:
    assert tg.mute_mentions(text) == muted
    assert unmute_mentions(muted) == text


def test_mentions_muted_in_every_kind_of_issue_text_but_not_in_links() -> None:
    issue = make_issue(
        masthead="@m 日报",
        lede="@lede 今天",
        headline=make_item(
            "@title",
            "@para 正文。",
            links=("https://h.example/@alice", "https://h.example/2?u=@bob"),
            question="@q 为什么？",
        ),
        briefs=(make_item("@brief", "正文。", links=("https://b.example/@c",)),),
    )
    for part in (Part.ALL, Part.TOC):
        messages = tg.render(issue, part)
        assert_invariants(issue, part, messages)
        html = messages[0].payload["text"]
        for name in ("m", "lede", "title"):
            assert f"@{tg.MENTION_BREAK}{name}" in html
        assert 'href="https://h.example/@alice"' in html
        assert "@alice" not in visible_text(html)
    html = tg.render(issue, Part.HEADLINE)[0].payload["text"]
    assert f"@{tg.MENTION_BREAK}para" in html and f"@{tg.MENTION_BREAK}q" in html
    assert 'href="https://h.example/2?u=@bob"' in html


def test_mention_checks_can_fail() -> None:
    """The no-loss check undoes exactly the renderer's ZWSP; the mention check sees a live one."""
    issue = make_issue(headline=make_item("T", "找 @alice 和 @\u200bbob 以及 x\u200by。"))
    messages = tg.render(issue, Part.HEADLINE)
    assert_invariants(issue, Part.HEADLINE, messages)
    original = messages[0].payload["text"]

    def tampered(html: str) -> list[Message]:
        assert html != original
        return [Message(payload={**messages[0].payload, "text": html})]

    zwsp = tg.MENTION_BREAK
    live = tampered(original.replace(f"@{zwsp}alice", "@alice"))
    assert_text_exactly_once(issue, Part.HEADLINE, live)  # the text is all there ...
    with pytest.raises(AssertionError, match="live mention"):
        assert_no_mentions(live)  # ... but Telegram would notify @alice
    for html in (
        original.replace(f"@{zwsp}{zwsp}bob", f"@{zwsp}bob"),  # the issue's own ZWSP lost
        original.replace(f"x{zwsp}y", "xy"),  # a ZWSP elsewhere lost
        original.replace("和", f"和{zwsp}"),  # a stray ZWSP added
        original.replace(f"@{zwsp}alice", f"@{zwsp}{zwsp}alice"),  # one too many
    ):
        with pytest.raises(AssertionError):
            assert_text_exactly_once(issue, Part.HEADLINE, tampered(html))


def test_masthead_and_titles_cannot_create_tags() -> None:
    evil = '</b><a href="https://evil.example">x</a><b>'
    issue = make_issue(
        masthead=evil, lede=evil, headline=make_item(evil, evil), briefs=(make_item(evil, evil),)
    )
    for part in (Part.ALL, Part.TOC):
        for m in tg.render(issue, part):
            events = tg_html.parse(m.payload["text"])
            assert not any(isinstance(e, tg_html.Open) and e.name == "a" for e in events)
            assert visible_text(m.payload["text"]).count(evil) >= 3


# --- html helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "html",
    [
        "plain",
        "<b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><ins>n</ins>",
        "<s>s</s><strike>t</strike><del>d</del><code>c</code><pre>p</pre>",
        '<pre><code class="language-python">x</code></pre>',
        '<a href="https://x.example/?a=1&amp;b=&quot;2&quot;">l</a>',
        "<blockquote>q</blockquote><blockquote expandable>q</blockquote>",
        '<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>',
        "<b>bold <i>both</i></b> &lt; &gt; &amp; &quot; &#128512; &#x1F600;",
    ],
)
def test_check_html_accepts(html: str) -> None:
    check_html(html)


@pytest.mark.parametrize(
    ("html", "why"),
    [
        ("<div>x</div>", "not supported"),
        ("<b>x", "unclosed"),
        ("x</b>", "does not close"),
        ("<b><i>x</b></i>", "does not close"),
        ("a < b", "malformed tag"),
        ("a <b", "malformed tag"),
        ("a > b", "unescaped"),
        ("a & b", "unescaped '&'"),
        ("&nbsp;", "unsupported entity"),
        ("&#xD800;", "invalid character"),
        ("<a>x</a>", "needs a 'href'"),
        ('<a href="">x</a>', "bad value"),
        ('<b class="x">x</b>', "not allowed"),
        ('<span class="other">x</span>', "bad value"),
        ('<a href="https://a.example"><a href="https://b.example">x</a></a>', "nested"),
        ("<blockquote><blockquote>x</blockquote></blockquote>", "nested"),
        ("<b x='1'>x</b>", "malformed"),
        ('<a href="x"y">z</a>', "malformed"),
    ],
)
def test_check_html_rejects(html: str, why: str) -> None:
    with pytest.raises(tg_html.HtmlError, match=why):
        check_html(html)


@pytest.mark.parametrize(
    ("html", "visible", "with_links"),
    [
        ("<b>a</b> &lt;b&gt;", "a <b>", "a <b>"),
        ('<a href="https://x.example/?a=1&amp;b=2">t</a>', "t", "t <https://x.example/?a=1&b=2>"),
        ("&quot;&amp;amp;&#20013;", '"&amp;中', '"&amp;中'),
        ("line\n<blockquote>q</blockquote>", "line\nq", "line\nq"),
    ],
)
def test_visible_text(html: str, visible: str, with_links: str) -> None:
    assert visible_text(html) == visible
    assert tg_html.text_with_links(html) == with_links


# --- layout -------------------------------------------------------------------------------------

SMALL = make_issue(
    lede="今天的要点。",
    headline=make_item(
        "头条",
        "第一段。",
        "第二段。",
        links=("https://h.example/1", "https://h.example/2", "https://h.example/3"),
    ),
    briefs=(
        make_item("简讯甲", "甲的正文。", "甲的补充。", links=("https://b.example/1",)),
        make_item("简讯乙", "乙的正文。"),
    ),
    classic=make_item(
        "老论文", "为什么值得重读。", links=("https://c.example/1",), question="它解决了什么问题？"
    ),
)


def test_layout_whole_issue() -> None:
    (message,) = tg.render(SMALL, Part.ALL)
    assert message.payload["text"] == (
        "<b>AI 技术日报 · 2026年10月27日</b>\n"
        "本期重点：今天的要点。\n\n"
        "<b>【重点】</b>\n"
        '<b><a href="https://h.example/1">头条</a></b>\n'
        "第一段。\n\n第二段。\n"
        '<a href="https://h.example/2">来源 2</a> · <a href="https://h.example/3">来源 3</a>\n\n'
        "<b>【简讯】</b>\n"
        '<b>1. <a href="https://b.example/1">简讯甲</a></b>\n'
        "甲的正文。\n甲的补充。\n\n"
        "<b>2. 简讯乙</b>\n"
        "乙的正文。\n\n"
        "<b>【经典回顾】</b>\n"
        '<b><a href="https://c.example/1">老论文</a></b>\n'
        "为什么值得重读。\n"
        "<blockquote>带着一个问题读：它解决了什么问题？</blockquote>"
    )


def test_layout_toc() -> None:
    (message,) = tg.render(SMALL, Part.TOC)
    assert message.payload["text"] == (
        "<b>AI 技术日报 · 2026年10月27日</b>\n"
        "本期重点：今天的要点。\n\n"
        "<b>【重点】</b>\n"
        '<a href="https://h.example/1">头条</a>\n\n'
        "<b>【简讯】</b>\n"
        '1. <a href="https://b.example/1">简讯甲</a>\n'
        "2. 简讯乙\n\n"
        "<b>【经典回顾】</b>\n"
        '<a href="https://c.example/1">老论文</a>'
    )


@pytest.mark.parametrize(
    ("part", "brief", "starts", "contains", "lacks"),
    [
        (
            Part.HEADLINE,
            None,
            "AI 技术日报 · 2026年10月27日\n\n【重点】\n头条\n",
            ["来源 3"],
            ["简讯甲", "本期重点"],
        ),
        (
            Part.BRIEFS,
            None,
            "AI 技术日报 · 2026年10月27日\n\n【简讯】\n1. 简讯甲\n",
            ["2. 简讯乙"],
            ["头条"],
        ),
        (
            Part.BRIEF,
            2,
            "AI 技术日报 · 2026年10月27日\n\n【简讯】\n2. 简讯乙\n乙的正文。",
            [],
            ["简讯甲"],
        ),
        (
            Part.CLASSIC,
            None,
            "AI 技术日报 · 2026年10月27日\n\n【经典回顾】\n老论文\n",
            ["带着一个问题读："],
            ["头条"],
        ),
    ],
)
def test_layout_parts(
    part: Part, brief: int | None, starts: str, contains: list[str], lacks: list[str]
) -> None:
    (message,) = tg.render(SMALL, part, brief=brief)
    shown = visible_text(message.payload["text"])
    assert shown.startswith(starts)
    assert all(c in shown for c in contains)
    assert not any(c in shown for c in lacks)


def test_lede_absent_and_title_without_link() -> None:
    issue = make_issue(headline=make_item("无链接", "正文。"))
    (message,) = tg.render(issue, Part.ALL)
    assert tg.LEDE_LABEL not in message.payload["text"]
    assert "<b>无链接</b>" in message.payload["text"]
    assert "<a " not in message.payload["text"]
    assert message.payload["link_preview_options"] == {"is_disabled": True}


@pytest.mark.parametrize(
    ("part", "says"), [(Part.CLASSIC, tg.NO_CLASSIC), (Part.BRIEFS, tg.NO_BRIEFS)]
)
def test_missing_section_is_one_message_saying_so(part: Part, says: str) -> None:
    messages = tg.render(make_issue(), part)
    assert len(messages) == 1
    assert visible_text(messages[0].payload["text"]).endswith("\n\n" + says)


@pytest.mark.parametrize(("brief", "error"), [(None, ValueError), (0, IndexError), (3, IndexError)])
def test_brief_errors(brief: int | None, error: type[Exception]) -> None:
    with pytest.raises(error):
        tg.render(SMALL, Part.BRIEF, brief=brief)


# --- options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "link_preview", "expected"),
    [
        (Part.ALL, True, {"is_disabled": False, "url": "https://h.example/1"}),
        (Part.HEADLINE, True, {"is_disabled": False, "url": "https://h.example/1"}),
        (Part.ALL, False, {"is_disabled": True}),
        (Part.HEADLINE, False, {"is_disabled": True}),
        (Part.BRIEFS, True, {"is_disabled": True}),
        (Part.CLASSIC, True, {"is_disabled": True}),
        (Part.TOC, True, {"is_disabled": True}),
    ],
)
def test_link_preview(part: Part, link_preview: bool, expected: dict[str, Any]) -> None:
    (message,) = tg.render(SMALL, part, options=RenderOptions(link_preview=link_preview))
    assert message.payload["link_preview_options"] == expected


def test_link_preview_only_on_the_message_with_the_headline() -> None:
    issue = load_fixture("long")
    messages = tg.render(issue, Part.ALL, options=RenderOptions(link_preview=True))
    assert [m.payload["link_preview_options"].get("is_disabled") for m in messages] == [False] + [
        True
    ] * (len(messages) - 1)


def test_a_lede_filling_a_message_ends_it_before_the_headline() -> None:
    # found by the property test: a lede of ~4,000 characters left room for only a cut-off
    # fragment of a title with clause marks, and the link preview went on that fragment
    title = "标题片段：" * 60
    headline = Item.model_construct(
        title=title, paragraphs=("正文。",), links=("https://example.org/a",), question=None
    )
    issue = make_issue(lede="一句话。" * 1010, headline=headline)
    messages = tg.render(issue, Part.ALL, options=RenderOptions(link_preview=True))
    [previewed] = [
        m for m in messages if m.payload["link_preview_options"].get("is_disabled") is False
    ]
    shown = visible_text(previewed.payload["text"])
    assert title in shown.replace("\n", "")  # the whole title, with the preview
    assert "【重点】" not in visible_text(messages[0].payload["text"])


def test_buttons_on_the_last_message_only() -> None:
    messages = tg.render(load_fixture("long"), Part.ALL, options=RenderOptions(buttons=True))
    assert len(messages) > 1
    assert all("reply_markup" not in m.payload for m in messages[:-1])
    keyboard = messages[-1].payload["reply_markup"]["inline_keyboard"]
    # the long fixture has no classic review: no button for it
    assert keyboard == [
        [
            {"text": "重点", "callback_data": "dg:2026-10-28:headline"},
            {"text": "简讯", "callback_data": "dg:2026-10-28:briefs"},
        ]
    ]


@pytest.mark.parametrize("buttons", [False, True])
def test_keyboard_round_trips(buttons: bool) -> None:
    (message,) = tg.render(SMALL, Part.TOC, options=RenderOptions(buttons=buttons))
    if not buttons:
        assert "reply_markup" not in message.payload
        return
    row = message.payload["reply_markup"]["inline_keyboard"][0]
    assert [parse_button_data(b["callback_data"]) for b in row] == [
        (DATE, s) for s in (Section.HEADLINE, Section.BRIEFS, Section.CLASSIC)
    ]
    assert [b["callback_data"] for b in row] == [button_data(DATE, s) for s in Section]


def test_preview() -> None:
    (message,) = tg.render(SMALL, Part.CLASSIC, options=RenderOptions(buttons=True))
    assert tg.preview(message) == (
        "AI 技术日报 · 2026年10月27日\n\n【经典回顾】\n"
        "老论文 <https://c.example/1>\n为什么值得重读。\n带着一个问题读：它解决了什么问题？\n"
        "[重点] [简讯] [经典回顾]"
    )


# --- splitting ----------------------------------------------------------------------------------


def test_items_that_fit_are_never_split() -> None:
    body = "这是一句用来填充长度的话。" * 110  # ~1430 units per brief
    issue = make_issue(
        briefs=tuple(
            make_item(f"简讯{i}", body, links=(f"https://b.example/{i}",)) for i in range(5)
        )
    )
    messages = tg.render(issue, Part.BRIEFS)
    shown = texts(messages)
    assert len(messages) == 3
    assert not any(tg.CONTINUED in t for t in shown)
    assert [len(re.findall(r"^\d+\. ", t, re.M)) for t in shown] == [2, 2, 1]
    assert_invariants(issue, Part.BRIEFS, messages)


def test_paragraph_cut_at_sentence_end() -> None:
    sentence = "第一句说明了背景。"
    issue = make_issue(headline=make_item("长段", sentence * 600))
    messages = tg.render(issue, Part.HEADLINE)
    shown = texts(messages)
    assert len(shown) == 2
    assert shown[0].endswith("。") and shown[1].startswith(tg.CONTINUED + "\n" + sentence)
    assert_invariants(issue, Part.HEADLINE, messages)


@pytest.mark.parametrize(
    ("paragraph", "cut_at"),
    [
        ("字" * 5000, 4096),  # no sentence or clause end at all: hard cut, filled to the limit
        ("😀" * 3000, 4096),  # surrogate pairs: 2 units each, never split
        ("&<>" * 2000, 4096),  # escapes count as one visible character
        ("word " * 1000, None),  # English without full stops: cut after a space
    ],
)
def test_hard_cuts(paragraph: str, cut_at: int | None) -> None:
    issue = make_issue(masthead="M", headline=make_item("T", paragraph))
    messages = tg.render(issue, Part.HEADLINE)
    shown = texts(messages)
    assert len(shown) == 2
    if cut_at is not None:
        assert utf16_len(shown[0]) == cut_at
    else:
        assert shown[0].endswith(" ") and shown[1].startswith(tg.CONTINUED + "\nword")
    assert_invariants(issue, Part.HEADLINE, messages)


def test_title_longer_than_a_message_is_closed_and_reopened() -> None:
    title = "很长的标题" * 1000  # over the model's MAX_TITLE_CHARS: the renderer copes anyway
    headline = Item.model_construct(
        title=title, paragraphs=("正文。",), links=("https://h.example/long",), question=None
    )
    issue = make_issue(headline=headline)
    messages = tg.render(issue, Part.ALL)
    assert len(messages) == 2
    for m in messages:
        assert m.payload["text"].count('<a href="https://h.example/long">') == 1
        check_html(m.payload["text"])
    assert_invariants(issue, Part.ALL, messages)


def test_question_and_sources_survive_a_split() -> None:
    issue = make_issue(
        classic=make_item(
            "经典",
            "很长的一句。" * 700,
            links=("https://c.example/1", "https://c.example/2"),
            question="问题是什么？",
        )
    )
    messages = tg.render(issue, Part.CLASSIC)
    assert len(messages) == 2
    last = messages[-1].payload["text"]
    assert last.endswith(
        '<a href="https://c.example/2">来源 2</a>\n'
        "<blockquote>带着一个问题读：问题是什么？</blockquote>"
    )
    assert_invariants(issue, Part.CLASSIC, messages)


def test_core_does_not_import_telegram() -> None:
    code = "import sys, digest_core.rendering.telegram; assert 'telegram' not in sys.modules"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).parents[2], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


# --- the web archive link ------------------------------------------------------------------------

SITE = "https://digest.example/"


@pytest.mark.parametrize(("part", "brief"), [(Part.ALL, None), (Part.BRIEF, 2), (Part.TOC, None)])
def test_golden_with_the_web_link(part: Part, brief: int | None) -> None:
    issue = load_fixture("special")
    options = RenderOptions(buttons=True, site_url=SITE)
    messages = tg.render(issue, part, brief=brief, options=options)
    got = [{"payload": m.payload, "preview": tg.preview(m)} for m in messages]
    suffix = f"{part.value}{brief}" if brief else part.value
    path = GOLDEN / f"special_{suffix}_web.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(got, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    assert path.exists(), f"missing golden {path.name}: run with UPDATE_GOLDEN=1 and review"
    assert json.loads(path.read_text(encoding="utf-8")) == got
    anchor = {Part.ALL: "", Part.BRIEF: "#brief-2", Part.TOC: ""}[part]
    link = f'<a href="{SITE}{issue.date:%Y/%m/%d}/{anchor}">全文 / web</a>'
    first_line = messages[0].payload["text"].split("\n", 1)[0]
    assert first_line.endswith(link)
    # the link is the only difference from a post without it
    plain = tg.render(issue, part, brief=brief, options=RenderOptions(buttons=True))
    assert [m.payload["text"].replace(" · " + link, "", 1) for m in messages] == [
        m.payload["text"] for m in plain
    ]
