"""Test helpers shared by the Feishu, DingTalk and WeCom tests: reader streams, fixtures."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from pathlib import Path

from hypothesis import HealthCheck, settings

from digest_core.models import Issue
from digest_core.rendering import Message
from digest_core.rendering import feishu as feishu_render
from digest_core.rendering.robots.markdown import visible
from digest_core.rendering.robots.texts import LONG_SOURCE_LABEL, PARAGRAPH
from digest_core.testing import ManualClock
from tests.quick import examples
from tests.samples import SAMPLE_ARCHIVE

ROOT = Path(__file__).parent.parent.parent
ARCHIVE = SAMPLE_ARCHIVE
GOLDEN = ROOT / "tests" / "golden"
#: the bundled issue the golden files and end-to-end tests use
GOLDEN_DATE = dt.date(2026, 11, 30)
#: a fixed "now" shared by an adapter's clock and a double's clock
NOW = dt.datetime(2026, 11, 30, 0, 5, tzinfo=dt.UTC)

#: the property tests' budget: three renderers share the suite's time
SETTINGS = settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

#: What the work-chat renderers add around issue text, as a reader sees it (no whitespace).
DECORATION = (
    r"【(?:重点|简讯|经典回顾)】",
    r"\d+\.",
    r"·",
    r"\d{4}-\d{2}-\d{2}",
    r"本期重点：",
    r"带着一个问题读：",
    r"»",
    r"来源\d+",
    re.escape(LONG_SOURCE_LABEL.replace(" ", "")).replace(re.escape("{n}"), r"\d+"),
    r"本期没有(?:简讯|经典回顾)。",
)
_LONG = re.compile(re.escape(LONG_SOURCE_LABEL).replace(re.escape("{n}"), r"\d+"))


def load_golden_issue() -> Issue:
    from digest_core.loading import load_issue

    return load_issue(ARCHIVE / f"{GOLDEN_DATE.isoformat()}.txt")


def clock() -> ManualClock:
    return ManualClock(NOW, autoadvance=False)


def markdown_stream(texts: Iterable[str], issue: Issue) -> str:
    """What a reader sees of markdown messages, links and long-source addresses left out."""
    urls = [u for _, item in issue.items() for u in item.links]
    out: list[str] = []
    address: str | None = None  # a long source's address so far (it may span messages)
    for text in texts:
        for block in text.split(PARAGRAPH):
            seen = visible(block)
            if address is not None and any(u.startswith(address + seen) for u in urls):
                address += seen
                continue
            address = "" if _LONG.fullmatch(seen) else None
            out.append(seen)
    return "\n".join(out)


def feishu_stream(messages: Iterable[Message]) -> str:
    """What a reader sees of Feishu posts: the first title, then every line's text."""
    out: list[str] = []
    for n, m in enumerate(messages):
        post = m.payload["content"]["post"][feishu_render.LANGUAGE]
        if n == 0:
            out.append(feishu_render.restore(post["title"]))
        for line in post["content"]:
            out.append("".join(feishu_render.restore(e["text"]) for e in line))
    return "\n".join(out)
