"""dingtalk renderer: golden markdown payloads, the size limit, nothing lost, escaping holds."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots.dingtalk import render as dr
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
from tests.fakes.dingtalk_api import FakeDingTalk
from tests.rendering.test_discord import assert_covers, assert_golden, issue_pieces
from tests.rendering.test_discord_properties import FRAGMENTS, issues, lines, parts


def texts(messages: list) -> list[str]:  # type: ignore[type-arg]
    return [m.payload["markdown"]["text"] for m in messages]


def test_golden_issue() -> None:
    messages = dr.render(load_golden_issue())
    payloads = json.dumps([m.payload for m in messages], ensure_ascii=False, indent=1)
    assert_golden(GOLDEN / "dingtalk" / "2026-11-30-all.json", payloads + "\n")
    previews = "\n\n====\n\n".join(dr.preview(m) for m in messages)
    assert_golden(GOLDEN / "dingtalk" / "2026-11-30-all.preview.txt", previews + "\n")


@pytest.mark.parametrize("part", list(Part))
def test_every_part_of_the_bundled_issue(part: Part) -> None:
    issue = load_golden_issue()
    messages = dr.render(issue, part, brief=1 if part is Part.BRIEF else None)
    assert messages and all(dr.check_message(m.payload) == [] for m in messages)
    assert_covers(markdown_stream(texts(messages), issue), issue_pieces(issue, part, 1), DECORATION)


def test_markup_and_mentions_in_issue_text_stay_text() -> None:
    title = "**粗体** [链接](https://evil.example) <@all> <font color=red>红</font> @所有人"
    item = Item(title=title, paragraphs=("# 标题", "1. 列表", "> 引用", "<@zhangsan> 看"))
    issue = Issue(date=load_golden_issue().date, headline=item)
    messages = dr.render(issue)
    for m in messages:
        assert dr.live(m.payload) == []
        assert FakeDingTalk().pings(m.payload) == []
    shown = dr.preview(messages[0])
    assert title in shown and "<@zhangsan> 看" in shown and "1. 列表" in shown


def test_a_long_issue_splits_within_the_limit() -> None:
    paragraph = "很长的段落，" * 1300 + "结束。"
    url = "https://example.org/" + "a" * (MAX_URL_CHARS - 20)
    item = Item(title="长" * 500, paragraphs=(paragraph, paragraph), links=(url, url))
    issue = Issue(date=load_golden_issue().date, headline=item, briefs=(item, item))
    messages = dr.render(issue)
    assert len(messages) > 3
    assert all(dr.check_message(m.payload) == [] for m in messages)
    assert_covers(
        markdown_stream(texts(messages), issue), issue_pieces(issue, Part.ALL), DECORATION
    )


def test_the_limit_check_catches_an_oversize_payload() -> None:
    message = dr.render(load_golden_issue())[0]
    message.payload["markdown"]["text"] *= 10
    assert dr.check_message(message.payload)


@SETTINGS
@given(issue=issues, part=parts)
def test_every_message_fits_and_nothing_is_lost(issue: Issue, part: Part) -> None:
    messages = dr.render(issue, part)
    for m in messages:
        assert dr.check_message(m.payload) == []
        assert dr.live(m.payload) == []
        assert FakeDingTalk().pings(m.payload) == []
        FakeDingTalk().check_payload(m.payload)  # the double's shape and size rules accept it
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


@pytest.mark.parametrize("masthead", ["@" * 70, "a" * 63 + "@all", "日报@所有人"])
def test_the_title_is_defused_and_within_64(masthead: str) -> None:
    issue = Issue(date=load_golden_issue().date, masthead=masthead, headline=Item(
        title="t", paragraphs=("p",)))  # fmt: skip
    for m in dr.render(issue):
        assert dr.check_message(m.payload) == []
