"""dingtalk renderer: what only DingTalk has (the shared markdown-robot tests are in
tests/bots/test_markdown_robots.py)."""

from __future__ import annotations

import pytest

from digest_core.models import Issue, Item
from digest_core.rendering import dingtalk as dr
from tests.bots.workchat_helpers import load_golden_issue


@pytest.mark.parametrize("masthead", ["@" * 70, "a" * 63 + "@all", "日报@所有人"])
def test_the_title_is_defused_and_within_64(masthead: str) -> None:
    issue = Issue(date=load_golden_issue().date, masthead=masthead, headline=Item(
        title="t", paragraphs=("p",)))  # fmt: skip
    for m in dr.render(issue):
        assert dr.check_message(m.payload) == []
