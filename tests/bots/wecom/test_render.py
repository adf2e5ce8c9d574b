"""wecom renderer: golden markdown payloads, the size limit, nothing lost, escaping holds."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots.wecom import render as wr
from bots.workchat.markdown import escape, live_markup, safe_url, unescape, visible
from digest_core.models import MAX_URL_CHARS, Issue, Item
from digest_core.rendering import Part
from tests.bots.workchat_helpers import (
    DECORATION,
    GOLDEN,
    SETTINGS,
    load_golden_issue,
    markdown_stream,
)
from tests.fakes.wecom_api import FakeWeCom
from tests.rendering.test_discord import assert_covers, assert_golden, issue_pieces
from tests.rendering.test_discord_properties import FRAGMENTS, issues, lines, parts


def texts(messages: list) -> list[str]:  # type: ignore[type-arg]
    return [m.payload["markdown"]["content"] for m in messages]


def test_golden_issue() -> None:
    messages = wr.render(load_golden_issue())
    payloads = json.dumps([m.payload for m in messages], ensure_ascii=False, indent=1)
    assert_golden(GOLDEN / "wecom" / "2026-11-30-all.json", payloads + "\n")
    previews = "\n\n====\n\n".join(wr.preview(m) for m in messages)
    assert_golden(GOLDEN / "wecom" / "2026-11-30-all.preview.txt", previews + "\n")


@pytest.mark.parametrize("part", list(Part))
def test_every_part_of_the_bundled_issue(part: Part) -> None:
    issue = load_golden_issue()
    messages = wr.render(issue, part, brief=1 if part is Part.BRIEF else None)
    assert messages and all(wr.check_message(m.payload) == [] for m in messages)
    assert_covers(markdown_stream(texts(messages), issue), issue_pieces(issue, part, 1), DECORATION)


def test_markup_and_mentions_in_issue_text_stay_text() -> None:
    title = "**粗体** [链接](https://evil.example) <@all> <font color=red>红</font> @所有人"
    item = Item(title=title, paragraphs=("# 标题", "1. 列表", "> 引用", "<@zhangsan> 看"))
    issue = Issue(date=load_golden_issue().date, headline=item)
    messages = wr.render(issue)
    for m in messages:
        assert wr.live(m.payload) == []
        assert FakeWeCom().pings(m.payload) == []
    shown = wr.preview(messages[0])
    assert title in shown and "<@zhangsan> 看" in shown and "1. 列表" in shown


def test_a_long_issue_splits_within_the_limit() -> None:
    paragraph = "很长的段落，" * 1300 + "结束。"
    url = "https://example.org/" + "a" * (MAX_URL_CHARS - 20)
    item = Item(title="长" * 500, paragraphs=(paragraph, paragraph), links=(url, url))
    issue = Issue(date=load_golden_issue().date, headline=item, briefs=(item, item))
    messages = wr.render(issue)
    assert len(messages) > 3
    assert all(wr.check_message(m.payload) == [] for m in messages)
    assert_covers(
        markdown_stream(texts(messages), issue), issue_pieces(issue, Part.ALL), DECORATION
    )


def test_the_limit_check_catches_an_oversize_payload() -> None:
    message = wr.render(load_golden_issue())[0]
    message.payload["markdown"]["content"] *= 10
    assert wr.check_message(message.payload)


@SETTINGS
@given(issue=issues, part=parts)
def test_every_message_fits_and_nothing_is_lost(issue: Issue, part: Part) -> None:
    messages = wr.render(issue, part)
    for m in messages:
        assert wr.check_message(m.payload) == []
        assert wr.live(m.payload) == []
        assert FakeWeCom().pings(m.payload) == []
        FakeWeCom().check_payload(m.payload)  # the double's shape and size rules accept it
    assert_covers(markdown_stream(texts(messages), issue), issue_pieces(issue, part), DECORATION)


@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), lines), max_size=6).map("".join))
def test_escape_round_trips_and_leaves_no_markup(text: str) -> None:
    escaped = escape(text)
    assert unescape(escaped) == text
    assert visible(escaped) == text
    assert live_markup(escaped) == []


@SETTINGS
@given(st.text())
def test_safe_urls_cannot_close_a_link(url: str) -> None:
    safe = safe_url(url)
    assert not set(safe) & set("()<>[] @\\")
