"""Feishu renderer: golden post payloads, 20 KB limit, nothing lost, no <at> pings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from digest_core.models import Issue, Item
from digest_core.rendering import Part
from digest_core.rendering import feishu as fr
from digest_core.rendering.types import encode_body
from tests.bots.workchat_helpers import (
    DECORATION,
    GOLDEN,
    SETTINGS,
    feishu_stream,
    load_golden_issue,
)
from tests.fakes.feishu_api import FakeFeishu
from tests.rendering.test_discord import assert_covers, assert_golden, issue_pieces
from tests.rendering.test_discord_properties import issues, lines, parts


def test_golden_issue() -> None:
    messages = fr.render(load_golden_issue())
    payloads = json.dumps([m.payload for m in messages], ensure_ascii=False, indent=1)
    assert_golden(GOLDEN / "feishu" / "2026-11-30-all.json", payloads + "\n")
    previews = "\n\n====\n\n".join(fr.preview(m) for m in messages)
    assert_golden(GOLDEN / "feishu" / "2026-11-30-all.preview.txt", previews + "\n")


@pytest.mark.parametrize("part", list(Part))
def test_every_part_of_the_bundled_issue(part: Part) -> None:
    issue = load_golden_issue()
    messages = fr.render(issue, part, brief=1 if part is Part.BRIEF else None)
    assert messages and all(fr.check_message(m.payload) == [] for m in messages)
    assert_covers(feishu_stream(messages), issue_pieces(issue, part, 1), DECORATION)


def test_at_tags_in_issue_text_are_defused() -> None:
    item = Item(title='<at user_id="all">所有人</at> 看这里', paragraphs=("<AT id=all> @all",))
    issue = Issue(date=load_golden_issue().date, headline=item)
    messages = fr.render(issue)
    assert all(fr.check_message(m.payload) == [] for m in messages)
    assert FakeFeishu().pings(messages[0].payload) == []
    assert '<at user_id="all">所有人</at> 看这里' in fr.preview(messages[0])


def test_a_long_issue_splits_within_20kb() -> None:
    paragraph = "很长的段落，" * 1300 + "结束。"
    item = Item(title="长", paragraphs=(paragraph, paragraph))
    issue = Issue(date=load_golden_issue().date, headline=item, briefs=(item, item))
    messages = fr.render(issue)
    assert len(messages) > 1
    for m in messages:
        assert len(encode_body(m.payload)) + fr.Limits.sign_overhead <= fr.Limits.request_maxlen
    assert_covers(feishu_stream(messages), issue_pieces(issue, Part.ALL), DECORATION)


def test_the_limit_check_catches_an_oversize_payload() -> None:
    message = fr.render(load_golden_issue())[0]
    message.payload["content"]["post"]["zh_cn"]["content"] *= 40
    assert fr.check_message(message.payload)


@SETTINGS
@given(issue=issues, part=parts)
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_every_message_fits_and_nothing_is_lost(issue: Issue, part: Part) -> None:
    messages = fr.render(issue, part)
    for m in messages:
        assert fr.check_message(m.payload) == []
        assert FakeFeishu().pings(m.payload) == []
        FakeFeishu().check_payload(m.payload)  # the double's shape rules accept it
    assert_covers(feishu_stream(messages), issue_pieces(issue, part), DECORATION)


@SETTINGS
@given(lines)
def test_defuse_round_trips_and_leaves_no_at_tag(text: str) -> None:
    defused = fr.defuse(text)
    assert fr.restore(defused) == text
    assert "<at" not in defused.lower()


def test_the_web_link_is_the_first_line() -> None:
    from digest_core.rendering import RenderOptions

    issue = load_golden_issue()
    options = RenderOptions(site_url="https://digest.example/")
    linked = fr.render(issue, Part.BRIEF, brief=2, options=options)
    lines = linked[0].payload["content"]["post"][fr.LANGUAGE]["content"]
    web = {"tag": "a", "text": "全文 / web", "href": "https://digest.example/2026/11/30/#brief-2"}
    assert lines[0] == [web]
    plain = fr.render(issue, Part.BRIEF, brief=2)
    assert lines[1:] == plain[0].payload["content"]["post"][fr.LANGUAGE]["content"]
