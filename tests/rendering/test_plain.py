"""Plain-text renderer: golden texts, layout, splitting within 4000 characters."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given

from digest_core.models import Issue, Item
from digest_core.rendering import Message, Part, RenderOptions, plain
from tests.rendering.test_discord import (
    FIXTURES,
    GOLDEN,
    PARTS,
    assert_covers,
    assert_golden,
    issue_pieces,
    load_fixture,
)
from tests.rendering.test_discord_properties import SETTINGS, issues, parts

log = logging.getLogger(__name__)

PLAIN_DECORATION = (
    r"【(?:重点|简讯|经典回顾)】",
    r"\d+\.",
    r"·",
    r"\d{4}-\d{2}-\d{2}",
    r"本期重点：",
    r"»带着一个问题读：",
    r"本期没有(?:简讯|经典回顾)。",
)


def plain_pieces(issue: Issue, part: Part, brief: int | None = None) -> list[str]:
    """Like :func:`issue_pieces`, with each item's links after its text (plain shows them)."""
    if part is Part.TOC:
        return issue_pieces(issue, part, brief)
    pieces = issue_pieces(issue, part, brief)[: 2 if part is Part.ALL and issue.lede else 1]
    chosen: list[Item] = {
        Part.ALL: [item for _, item in issue.items()],
        Part.HEADLINE: [issue.headline],
        Part.BRIEFS: list(issue.briefs),
        Part.BRIEF: [issue.brief(brief)] if brief else [],
        Part.CLASSIC: [issue.classic] if issue.classic else [],
    }[part]
    for item in chosen:
        pieces += [*item.text_pieces(), *item.links]
    return pieces


def _text(messages: list[Message]) -> str:
    return "\n".join(m.payload["text"] for m in messages)


@pytest.mark.parametrize(("name", "part", "brief"), PARTS, ids=[p[0] for p in PARTS])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_golden_texts(fixture: str, name: str, part: Part, brief: int | None) -> None:
    issue = load_fixture(fixture)
    messages = plain.render(issue, part, brief=brief)
    assert all(len(m.payload["text"]) <= plain.Limits.body_maxlen for m in messages)
    assert all(set(m.payload) == {"text"} for m in messages)
    assert_covers(_text(messages), plain_pieces(issue, part, brief), PLAIN_DECORATION)
    golden = "\n\n===== next message =====\n\n".join(plain.preview(m) for m in messages) + "\n"
    assert_golden(GOLDEN / "plain" / f"{fixture}-{name}.txt", golden)


def test_layout_of_a_whole_issue() -> None:
    issue = load_fixture("english")
    (message,) = plain.render(issue)
    lines = message.payload["text"].split("\n")
    assert lines[0] == "AI Tech Daily · 2026-11-05"
    assert lines[1] == "本期重点：" + (issue.lede or "")
    assert "【重点】" in lines and "【简讯】" in lines and "【经典回顾】" in lines
    assert "1. Checkpoints written in the background" in lines
    assert "2. Evaluating claims, not citations" in lines
    for _, item in issue.items():
        assert all(url in lines for url in item.links), "each link on a line of its own"
    assert issue.classic is not None and issue.classic.question
    question = lines.index("» 带着一个问题读：" + issue.classic.question)
    assert lines[question - 1] == "", "the question is set apart by a blank line"


def test_plain_has_no_markup() -> None:
    text = _text(plain.render(load_fixture("special")))
    assert "\\" not in text.replace("反斜杠 \\ 也", "")  # the one backslash the issue has
    assert "\u200b" not in text
    assert "<@123456789012345678>" in text


def test_long_issue_splits_at_sentences_within_limit() -> None:
    issue = load_fixture("long")
    messages = plain.render(issue, Part.HEADLINE)
    assert len(messages) > 1
    for m in messages[:-1]:
        assert m.payload["text"].rstrip().endswith(("。", "？", "」"))


def test_options_do_not_matter() -> None:
    issue = load_fixture("english")
    assert plain.render(issue, options=RenderOptions(buttons=True, embeds=False)) == plain.render(
        issue
    )


def test_missing_classic_and_brief_errors() -> None:
    issue = load_fixture("english").model_copy(update={"classic": None})
    (message,) = plain.render(issue, Part.CLASSIC)
    assert message.payload["text"] == "AI Tech Daily · 2026-11-05\n\n本期没有经典回顾。"
    with pytest.raises(ValueError):
        plain.render(issue, Part.BRIEF)
    with pytest.raises(IndexError):
        plain.render(issue, Part.BRIEF, brief=5)


def test_toc_lists_titles_only() -> None:
    issue = load_fixture("english")
    (message,) = plain.render(issue, Part.TOC)
    text = message.payload["text"]
    assert all(item.title in text for _, item in issue.items())
    assert not any(p in text for _, item in issue.items() for p in item.paragraphs)


@SETTINGS
@given(issue=issues, part=parts)
def test_every_text_fits_and_nothing_is_lost(issue: Issue, part: Part) -> None:
    messages = plain.render(issue, part)
    assert messages
    assert all(0 < len(m.payload["text"]) <= plain.Limits.body_maxlen for m in messages)
    assert_covers(_text(messages), plain_pieces(issue, part), PLAIN_DECORATION)


@pytest.mark.parametrize(
    ("name", "part", "brief"), [("all", Part.ALL, None), ("brief2", Part.BRIEF, 2)]
)
def test_golden_texts_with_the_web_link(name: str, part: Part, brief: int | None) -> None:
    issue = load_fixture("special")
    options = RenderOptions(site_url="https://digest.example/")
    messages = plain.render(issue, part, brief=brief, options=options)
    golden = "\n\n===== next message =====\n\n".join(plain.preview(m) for m in messages) + "\n"
    assert_golden(GOLDEN / "plain" / f"special-{name}-web.txt", golden)
    anchor = "#brief-2" if brief else ""
    second = messages[0].payload["text"].split("\n")[1]
    assert second == f"全文 / web：https://digest.example/{issue.date:%Y/%m/%d}/{anchor}"
