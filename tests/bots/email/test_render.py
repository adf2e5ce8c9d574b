"""The mail renderer's formats: the whole issue, the headline alone, the compact table of
contents (the briefs' titles linked to their places on the issue's page)."""

from __future__ import annotations

import datetime as dt
import logging
import re

import pytest

from digest_core.rendering import Part, RenderOptions
from digest_core.rendering import email as email_render
from digest_core.testing import make_issue

SITE = RenderOptions(site_url="https://d.example/")


def test_each_format_shows_what_it_says_in_both_parts() -> None:
    issue = make_issue(dt.date(2026, 10, 27))
    [full] = email_render.render(issue, Part.ALL, options=SITE)
    [headline] = email_render.render(issue, Part.HEADLINE, options=SITE)
    [compact] = email_render.render(issue, Part.TOC, options=SITE)
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


def test_subjects_fit_one_header_line_and_a_clipped_html_part_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The subject within Limits.title_maxlen (78 less ``Subject: ``, RFC 5322 2.1.1), a
    notice's too; an HTML part past Gmail's clipping size is sent but named in the log."""
    issue = make_issue(dt.date(2026, 12, 31))
    long = issue.model_copy(
        update={"headline": issue.headline.model_copy(update={"title": "长" * 200})}
    )
    [message] = email_render.render(long, options=SITE)
    assert len(message.payload["subject"]) == email_render.Limits.title_maxlen == 69
    assert (
        message.payload["subject"].startswith("12月31日 · 长")
        and message.payload["subject"][-1] == "…"
    )
    [notice] = email_render.notice("更" * 200 + "\n正文")
    assert len(notice.payload["subject"]) == email_render.Limits.title_maxlen
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    big = make_issue(dt.date(2026, 12, 31), briefs=60)
    big = big.model_copy(update={"briefs": tuple(
        b.model_copy(update={"paragraphs": ("字" * 2000,)}) for b in big.briefs
    )})  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="digest_core.rendering.email"):
        [clipped] = email_render.render(big, options=SITE)
    size = len(clipped.payload["html"].encode("utf-8"))
    assert size > email_render.Limits.body_maxlen
    assert [r.getMessage() for r in caplog.records] == [
        f"email: the HTML part of all of 2026-12-31 is {size} bytes, over 102000: Gmail shows "
        'it clipped (readers follow "View entire message" or the issue\'s page)'
    ]
