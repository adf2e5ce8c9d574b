"""Property tests of the Telegram renderer: limits, valid HTML, nothing lost or repeated."""

from __future__ import annotations

import datetime as dt
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from digest_core.models import Issue, Item, Section
from digest_core.rendering import Part, RenderOptions
from digest_core.rendering import html as tg_html
from digest_core.rendering import telegram as tg
from tests.quick import examples
from tests.rendering.inverses import check_html, unmute_mentions, visible_text
from tests.rendering.strategies import url_strategy
from tests.rendering.test_telegram import assert_invariants

SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SPECIAL = [*"<>&\"'*_~|@`#[](){}\\/;:=", "&amp;", "&lt;", "<b>", "</a>", "@everyone"]
# what Telegram would read as a mention, and the ZWSP the renderer puts after such an "@"
SPECIAL += ["@alice", "@_bot", "@9", "@\u200b", "\u200b", "a@b.org", "#tag"]
SENTENCE_ENDS = list("。！？!?.;，、 ")
ASTRAL = ["😀", "🚀", "👍🏽", "👨‍👩‍👧", "𠀀", "𠀋", "𝔘", "🇨🇳"]

chars = st.one_of(
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5),  # CJK
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),  # printable ASCII
    st.sampled_from(SPECIAL + SENTENCE_ENDS + ASTRAL),
    st.characters(blacklist_categories=("Cs", "Cc")),  # anything else but surrogates/controls
)
fragment = st.lists(chars, min_size=1, max_size=30).map("".join)


def _line(text: str) -> str:
    return text.strip() or "空"


short = fragment.map(_line)
# a paragraph of many sentences, long enough to need several messages
many_sentences = st.builds(
    lambda s, end, n: (s + end) * n,
    short,
    st.sampled_from(["。", "！", "? ", ". "]),
    st.integers(50, 700),
).map(_line)
# one long sentence without any sentence end: only a clause or hard cut can split it
no_stop = st.builds(
    lambda s, n: s * n,
    short.map(lambda s: re.sub(r"[。！？!?.;]", "", s) or "字"),
    st.integers(100, 1500),
).map(_line)

paragraph = st.one_of(short, short, short, many_sentences, no_stop)
title = st.one_of(short, short, short, short, short, short, short, short, no_stop)
url = url_strategy()


# Unvalidated (model_construct): titles and paragraphs here run past the model's caps, and the
# renderer must cope with any issue all the same.
@st.composite
def items(draw: st.DrawFn) -> Item:
    return Item.model_construct(
        title=draw(title),
        paragraphs=tuple(draw(st.lists(paragraph, min_size=1, max_size=3))),
        links=tuple(draw(st.lists(url, max_size=3))),
        question=draw(st.none() | short),
    )


@st.composite
def issues(draw: st.DrawFn) -> Issue:
    return Issue.model_construct(
        date=draw(st.dates(dt.date(2000, 1, 1), dt.date(2099, 12, 31))),
        masthead=draw(st.just("AI 技术日报") | short),
        lede=draw(st.none() | short | many_sentences),
        headline=draw(items()),
        briefs=tuple(draw(st.lists(items(), max_size=6))),
        classic=draw(st.none() | items()),
    )


@SETTINGS
@given(issues(), st.booleans(), st.booleans())
def test_every_part_within_limits_valid_and_lossless(
    issue: Issue, buttons: bool, link_preview: bool
) -> None:
    options = RenderOptions(buttons=buttons, link_preview=link_preview)
    parts: list[tuple[Part, int | None]] = [
        (Part.ALL, None),
        (Part.HEADLINE, None),
        (Part.BRIEFS, None),
        (Part.CLASSIC, None),
        (Part.TOC, None),
    ]
    parts += [(Part.BRIEF, n) for n in range(1, len(issue.briefs) + 1)]
    for part, brief in parts:
        messages = tg.render(issue, part, brief=brief, options=options)
        assert_invariants(issue, part, messages, brief)
        assert ("reply_markup" in messages[-1].payload) is buttons
        previewed = [
            m for m in messages if m.payload["link_preview_options"]["is_disabled"] is False
        ]
        should_preview = link_preview and issue.headline.url and part in (Part.ALL, Part.HEADLINE)
        assert len(previewed) == (1 if should_preview else 0)
        if previewed:
            assert previewed[0].payload["link_preview_options"]["url"] == issue.headline.url
            title_start = issue.headline.title[:10]
            shown = unmute_mentions(visible_text(previewed[0].payload["text"]))
            assert title_start in shown


@settings(SETTINGS, max_examples=examples(100))
@given(st.lists(items(), min_size=1, max_size=8))
def test_a_brief_that_fits_one_message_is_never_split(briefs: list[Item]) -> None:
    issue = Issue(date=dt.date(2026, 10, 27), headline=briefs[0], briefs=tuple(briefs))
    shown = [visible_text(m.payload["text"]) for m in tg.render(issue, Part.BRIEFS)]
    header = tg.section_header(Section.BRIEFS) + "\n"
    for n in range(1, len(briefs) + 1):
        alone = tg.render(issue, Part.BRIEF, brief=n)
        if len(alone) == 1:
            block = visible_text(alone[0].payload["text"]).partition(header)[2]
            assert block.startswith(f"{n}. ")
            assert any(block in t for t in shown), f"brief {n} fits a message but was split"


@SETTINGS
@given(st.lists(st.one_of(chars, st.sampled_from(["\n", "\t"]))).map("".join))
def test_escaping_round_trips(text: str) -> None:
    escaped = tg_html.escape_text(text)
    check_html(escaped)
    assert visible_text(escaped) == text
    attr = tg_html.escape_attr(text)
    assert '"' not in attr and "<" not in attr and ">" not in attr
    if text:
        html = f'<a href="{attr}">x</a>'
        check_html(html)
        link = next(ev for ev in tg_html.parse(html) if isinstance(ev, tg_html.Open))
        assert link.attr("href") == text
