"""The mail renderer's formats: the whole issue, the headline alone, the compact table of
contents (the briefs' titles linked to their places on the issue's page)."""

from __future__ import annotations

import datetime as dt
import re

from digest_core.rendering import Part, RenderOptions, mail
from digest_core.testing import make_issue

SITE = RenderOptions(site_url="https://d.example/")


def test_each_format_shows_what_it_says_in_both_parts() -> None:
    issue = make_issue(dt.date(2026, 10, 27))
    [full] = mail.render(issue, Part.ALL, options=SITE)
    [headline] = mail.render(issue, Part.HEADLINE, options=SITE)
    [compact] = mail.render(issue, Part.TOC, options=SITE)
    assert "简讯1：第一段。" in full.payload["html"] and "简讯1：第一段。" in full.payload["text"]
    for short in (headline, compact):
        assert "重点新闻：第一段。" in short.payload["html"]
        assert "简讯1：第一段。" not in short.payload["html"]
        assert "简讯1：第一段。" not in short.payload["text"]
    assert re.search(r'href="https://d\.example/2026/10/27/#brief-1"[^>]*>简讯1</a>',
                     compact.payload["html"])  # fmt: skip
    assert "简讯1" not in headline.payload["html"]
    assert {m.payload["subject"] for m in (full, headline, compact)} == {"10月27日 · 重点新闻"}
    assert full.digest != headline.digest != compact.digest  # distinct ledger variants
