"""docs/format.md stays true: its examples load, and they are the same issue in three forms."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from digest_core.errors import IssueFormatError
from digest_core.loading import load_structured, parse_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "format.md"
DAY = dt.date(2026, 12, 2)


def blocks(kind: str) -> list[str]:
    """The fenced code blocks of the doc whose info string is ``kind``."""
    found: list[str] = []
    current: list[str] | None = None
    info = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```") and current is None:
            current, info = [], line[3:].strip()
        elif line.startswith("```") and current is not None:
            if info == kind:
                found.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return found


def test_the_text_example_loads_with_the_linkless_brief_and_the_question() -> None:
    [text] = [b for b in blocks("") if b.startswith("AI 技术日报")]
    issue = parse_text(text, date=DAY)
    assert len(issue.briefs) == 2 and issue.briefs[1].links == ()
    assert issue.classic is not None and issue.classic.question == "推理时为什么不再丢弃？"


def test_the_json_and_yaml_examples_are_the_same_issue() -> None:
    [as_json] = blocks("json")
    [as_yaml] = blocks("yaml")
    from_json = load_structured(as_json, date=DAY, suffix=".json")
    assert load_structured(as_yaml, date=DAY, suffix=".yaml") == from_json
    assert from_json.classic is not None and from_json.classic.question


@pytest.mark.parametrize(
    ("line", "fragment"), [("简讯：", "did you mean 简讯?"), ("简 讯", "did you mean 简讯?")]
)
def test_what_the_doc_says_is_an_error_is_one(line: str, fragment: str) -> None:
    [text] = [b for b in blocks("") if b.startswith("AI 技术日报")]
    with pytest.raises(IssueFormatError, match=re.escape(fragment)):
        parse_text(text.replace("\n简讯\n", f"\n{line}\n"), date=DAY)


def test_sections_may_come_in_any_order() -> None:
    [text] = [b for b in blocks("") if b.startswith("AI 技术日报")]
    head, rest = text.split("重点\n", 1)
    headline, others = rest.split("简讯\n", 1)
    reordered = f"{head}简讯\n{others.rstrip()}\n\n重点\n{headline}"
    assert parse_text(reordered, date=DAY) == parse_text(text, date=DAY)
