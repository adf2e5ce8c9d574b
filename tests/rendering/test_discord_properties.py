"""Discord renderer properties: within every limit, nothing lost or repeated, no pings."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from digest_core.models import Issue, Item
from digest_core.rendering import Message, Part, RenderOptions
from digest_core.rendering import discord as dc
from digest_core.rendering.markdown import escape, pingable, safe_url, visible
from digest_core.rendering.split import flow
from tests.quick import examples
from tests.rendering.inverses import unescape
from tests.rendering.strategies import url_strategy
from tests.rendering.test_discord import (
    DISCORD_DECORATION,
    assert_covers,
    discord_stream,
    issue_pieces,
    linked_urls,
    load_fixture,
)

log = logging.getLogger(__name__)


SETTINGS = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

#: Pieces that stress escaping, mentions, links and sentence splitting.
FRAGMENTS = (
    "@everyone", "@here", "<@123456789012345678>", "<@!9>", "<@&42>", "<#77>",
    "https://x.org/a_(b)", "https://x.org/@everyone/p", "http://x.org/*s*_t~|u", "(https://y.org)",
    "# ", "-# ", "- ", "1. ", "> ", ">>> ", "```", "`", "\\", "||", "**", "~~", "__", "*",
    "[a](b)", "](<", "<", ">", "&amp;", "。", ". ", "！", "? ", "😀", "…", "\u200b", "\t",
)  # fmt: skip
ALPHABET = "abcXYZ019 数据模型训练调度*_~`|<>[]()#-+.:\\@&😀"

words = st.one_of(st.sampled_from(FRAGMENTS), st.text(ALPHABET, min_size=1, max_size=12))
lines = (
    st.lists(words, min_size=1, max_size=8).map("".join).map(str.strip).filter(bool)
)  # a one-line piece of issue text
titles = st.tuples(lines, st.sampled_from([1] * 12 + [2, 40])).map(
    lambda t: " ".join([t[0]] * t[1])
)
paragraphs = st.tuples(lines, st.sampled_from([1] * 20 + [25, 150])).map(
    lambda t: " ".join([t[0]] * t[1])
)
urls = url_strategy()
# Unvalidated (model_construct): long titles and paragraphs here run past the model's caps, and
# the renderer must cope with any issue all the same.
items = st.builds(
    Item.model_construct,
    title=titles,
    paragraphs=st.lists(paragraphs, min_size=1, max_size=4).map(tuple),
    links=st.lists(urls, max_size=3).map(tuple),
    question=st.none() | lines,
)
issues = st.builds(
    Issue.model_construct,
    date=st.dates(dt.date(2020, 1, 1), dt.date(2030, 12, 31)),
    masthead=st.just("AI 技术日报") | lines,
    lede=st.none() | paragraphs,
    headline=items,
    briefs=st.lists(items, max_size=11).map(tuple),
    classic=st.none() | items,
)
parts = st.sampled_from([Part.ALL, Part.ALL, Part.HEADLINE, Part.BRIEFS, Part.CLASSIC, Part.TOC])


def preview(message: Message) -> str:
    return dc.preview(message)


def _expected_urls(issue: Issue, part: Part, *, embeds: bool) -> list[str]:
    chosen = {
        Part.ALL: [item for _, item in issue.items()],
        Part.HEADLINE: [issue.headline],
        Part.BRIEFS: list(issue.briefs),
        Part.CLASSIC: [issue.classic] if issue.classic else [],
    }.get(part, [])
    out: list[str] = []
    for item in chosen:
        for n, url in enumerate(item.links):
            out.append(url if (embeds and n == 0) else safe_url(url))
    return out


_MENTIONS_TITLE = " ".join(["@everyone" * 6 + "<@123456789012345678>" * 2] * 40)


@SETTINGS
@given(issue=issues, part=parts, embeds=st.booleans(), buttons=st.booleans())
# a title too long for the embed title *and* (escaped) for one bold description block
@example(
    issue=Issue.model_construct(
        date=dt.date(2020, 1, 1),
        masthead="AI 技术日报",
        lede=None,
        headline=Item(title="@everyone", paragraphs=("@everyone",), links=(), question=None),
        briefs=(
            Item.model_construct(
                title=_MENTIONS_TITLE, paragraphs=("@everyone",), links=(), question=None
            ),
        ),
        classic=None,
    ),
    part=Part.ALL,
    embeds=True,
    buttons=False,
)
def test_every_message_fits_and_nothing_is_lost(
    issue: Issue, part: Part, embeds: bool, buttons: bool
) -> None:
    messages = dc.render(issue, part, options=RenderOptions(embeds=embeds, buttons=buttons))
    assert messages
    embeds_seen = [e for m in messages for e in m.payload.get("embeds", [])]
    event(f"{'several' if len(messages) > 1 else 'one'} message(s)")  # --hypothesis-show-statistics
    event(f"an item over several embeds: {any('title' not in e for e in embeds_seen)}")
    long_label = dc.LONG_SOURCE_LABEL.partition("{n}")[2]
    event(f"a source too long to link: {any(long_label in preview(m) for m in messages)}")
    for m in messages:
        assert dc.check_message(m.payload) == []
        raw = [m.payload.get("content", "")]
        raw += [e.get("title", "") + e.get("description", "") for e in m.payload.get("embeds", [])]
        assert not any("@everyone" in t or "@here" in t for t in raw)
    assert_covers(discord_stream(messages), issue_pieces(issue, part), DISCORD_DECORATION)
    if part is not Part.TOC:
        assert linked_urls(messages) == _expected_urls(issue, part, embeds=embeds)
    assert ("components" in messages[-1].payload) == buttons
    assert not any("components" in m.payload for m in messages[:-1])


@SETTINGS
@given(st.text())
def test_escape_round_trips_and_pings_nobody(text: str) -> None:
    escaped = escape(text)
    assert unescape(escaped) == text
    assert visible(escaped) == text
    assert pingable(escaped) == []
    assert "@everyone" not in escaped and "@here" not in escaped


@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8))).map("".join))
def test_escape_leaves_no_live_markup(text: str) -> None:
    """Outside ``<url>`` autolinks, every markdown character in the output is escaped."""
    escaped = escape(text)
    i = 0
    while i < len(escaped):
        ch = escaped[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "<":
            end = escaped.index(">", i)
            assert escaped[i + 1 : end].startswith(("http://", "https://"))
            i = end + 1
            continue
        assert ch not in "*_~`|>[]()", (ch, escaped)
        i += 1


@SETTINGS
@given(paragraphs, st.integers(min_value=12, max_value=300))
def test_escaped_chunks_fit_and_lose_nothing(text: str, limit: int) -> None:
    chunks = dc.escaped_chunks(text, limit)
    assert all(dc.measure(c) <= limit for c in chunks)
    assert "".join(unescape(c) for c in chunks) == text


@SETTINGS
@given(
    st.lists(st.lists(st.integers(1, 10), min_size=1, max_size=6), max_size=10),
    st.integers(10, 30),
)
def test_flow_keeps_order_and_fits(units: list[list[int]], limit: int) -> None:
    groups = flow(units, lambda g: sum(g) <= limit)
    assert [b for g in groups for b in g] == [b for u in units for b in u]
    assert all(sum(g) <= limit for g in groups)
    # a unit that fits a message is never split
    for unit in units:
        if sum(unit) <= limit:
            assert any(unit == g[i : i + len(unit)] for g in groups for i in range(len(g)))


# --- the checks themselves can fail -----------------------------------------------------------


def _rendered() -> tuple[Issue, list[Message]]:
    issue = load_fixture("special")
    return issue, dc.render(issue)


def test_coverage_check_passes_on_real_output() -> None:
    issue, messages = _rendered()
    assert_covers(discord_stream(messages), issue_pieces(issue, Part.ALL), DISCORD_DECORATION)


@pytest.mark.parametrize("mutation", ["drop", "repeat", "swap", "stray"])
def test_coverage_check_catches(mutation: str) -> None:
    issue, messages = _rendered()
    embed = messages[0].payload["embeds"][0]
    paragraphs = embed["description"].split("\n\n")
    if mutation == "drop":
        del paragraphs[1]
    elif mutation == "repeat":
        paragraphs.insert(2, paragraphs[1])
    elif mutation == "swap":
        paragraphs[0], paragraphs[1] = paragraphs[1], paragraphs[0]
    else:
        paragraphs.insert(1, "stray words")
    embed["description"] = "\n\n".join(paragraphs)
    with pytest.raises(AssertionError):
        assert_covers(discord_stream(messages), issue_pieces(issue, Part.ALL), DISCORD_DECORATION)


def test_limit_check_catches_an_oversized_render() -> None:
    _, messages = _rendered()
    payload = messages[0].payload
    payload["embeds"] = payload["embeds"] * 3  # 15 embeds
    assert dc.check_message(payload) != []
