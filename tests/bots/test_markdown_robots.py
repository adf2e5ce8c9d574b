"""The DingTalk and WeCom renderers (both markdown robots): golden payloads, the size limit,
nothing lost, escaping holds — one table of tests run for each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from digest_core.models import MAX_URL_CHARS, Issue, Item
from digest_core.rendering import Message, Part
from digest_core.rendering import dingtalk as dingtalk_render
from digest_core.rendering import wecom as wecom_render
from digest_core.rendering.robots.markdown import escape, live_markup, safe_url, visible
from tests.bots.workchat_helpers import (
    DECORATION,
    GOLDEN,
    SETTINGS,
    load_golden_issue,
    markdown_stream,
)
from tests.fakes.dingtalk_api import FakeDingTalk
from tests.fakes.wecom_api import FakeWeCom
from tests.rendering.inverses import robots_unescape
from tests.rendering.test_discord import assert_covers, assert_golden, issue_pieces
from tests.rendering.test_discord_properties import FRAGMENTS, issues, lines, parts


@dataclass(frozen=True)
class Robot:
    name: str
    render: ModuleType
    fake: Any  # the loopback double's class
    #: where the markdown text sits in the payload's "markdown" object
    text_key: str

    def texts(self, messages: list[Message]) -> list[str]:
        return [m.payload["markdown"][self.text_key] for m in messages]


ROBOTS = [
    Robot("dingtalk", dingtalk_render, FakeDingTalk, "text"),
    Robot("wecom", wecom_render, FakeWeCom, "content"),
]
each_robot = pytest.mark.parametrize("robot", ROBOTS, ids=[r.name for r in ROBOTS])


@each_robot
def test_golden_issue(robot: Robot) -> None:
    messages = robot.render.render(load_golden_issue())
    payloads = json.dumps([m.payload for m in messages], ensure_ascii=False, indent=1)
    assert_golden(GOLDEN / robot.name / "2026-11-30-all.json", payloads + "\n")
    previews = "\n\n====\n\n".join(robot.render.preview(m) for m in messages)
    assert_golden(GOLDEN / robot.name / "2026-11-30-all.preview.txt", previews + "\n")


@each_robot
@pytest.mark.parametrize("part", list(Part))
def test_every_part_of_the_bundled_issue(robot: Robot, part: Part) -> None:
    issue = load_golden_issue()
    messages = robot.render.render(issue, part, brief=1 if part is Part.BRIEF else None)
    assert messages and all(robot.render.check_message(m.payload) == [] for m in messages)
    assert_covers(
        markdown_stream(robot.texts(messages), issue), issue_pieces(issue, part, 1), DECORATION
    )


@each_robot
def test_markup_and_mentions_in_issue_text_stay_text(robot: Robot) -> None:
    title = "**粗体** [链接](https://evil.example) <@all> <font color=red>红</font> @所有人"
    item = Item(title=title, paragraphs=("# 标题", "1. 列表", "> 引用", "<@zhangsan> 看"))
    issue = Issue(date=load_golden_issue().date, headline=item)
    messages = robot.render.render(issue)
    for m in messages:
        assert robot.render.live(m.payload) == []
        assert robot.fake().pings(m.payload) == []
    shown = robot.render.preview(messages[0])
    assert title in shown and "<@zhangsan> 看" in shown and "1. 列表" in shown


@each_robot
def test_a_long_issue_splits_within_the_limit(robot: Robot) -> None:
    paragraph = "很长的段落，" * 1300 + "结束。"
    url = "https://example.org/" + "a" * (MAX_URL_CHARS - 20)
    item = Item(title="长" * 500, paragraphs=(paragraph, paragraph), links=(url, url))
    issue = Issue(date=load_golden_issue().date, headline=item, briefs=(item, item))
    messages = robot.render.render(issue)
    assert len(messages) > 3
    assert all(robot.render.check_message(m.payload) == [] for m in messages)
    assert_covers(
        markdown_stream(robot.texts(messages), issue), issue_pieces(issue, Part.ALL), DECORATION
    )


@each_robot
def test_the_limit_check_catches_an_oversize_payload(robot: Robot) -> None:
    message = robot.render.render(load_golden_issue())[0]
    message.payload["markdown"][robot.text_key] *= 10
    assert robot.render.check_message(message.payload)


@each_robot
@SETTINGS
@given(issue=issues, part=parts)
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_every_message_fits_and_nothing_is_lost(robot: Robot, issue: Issue, part: Part) -> None:
    messages = robot.render.render(issue, part)
    for m in messages:
        assert robot.render.check_message(m.payload) == []
        assert robot.render.live(m.payload) == []
        assert robot.fake().pings(m.payload) == []
        robot.fake().check_payload(m.payload)  # the double's shape and size rules accept it
    assert_covers(
        markdown_stream(robot.texts(messages), issue), issue_pieces(issue, part), DECORATION
    )


@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), lines), max_size=6).map("".join))
def test_escape_round_trips_and_leaves_no_markup(text: str) -> None:
    escaped = escape(text)
    assert robots_unescape(escaped) == text
    assert visible(escaped) == text
    assert live_markup(escaped) == []


@SETTINGS
@given(st.text())
def test_safe_urls_cannot_close_a_link(url: str) -> None:
    safe = safe_url(url)
    assert not set(safe) & set("()<>[] @\\")


@each_robot
def test_the_web_link_follows_the_masthead(robot: Robot) -> None:
    from digest_core.rendering import RenderOptions

    issue = load_golden_issue()
    options = RenderOptions(site_url="https://digest.example/")
    linked = robot.texts(robot.render.render(issue, Part.BRIEF, brief=2, options=options))
    plain = robot.texts(robot.render.render(issue, Part.BRIEF, brief=2))
    link = "[全文 / web](https://digest.example/2026/11/30/#brief-2)"
    head, rest = linked[0].split("\n\n", 1)
    assert rest.startswith(link + "\n\n")
    assert [head + "\n\n" + rest.removeprefix(link + "\n\n"), *linked[1:]] == plain
