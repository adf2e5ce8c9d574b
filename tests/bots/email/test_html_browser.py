"""The HTML part of a mail in headless Chromium (Debian's, through Playwright), loaded from
exactly the bytes a relay receives: it loads nothing (no request leaves the page), does not
scroll sideways at phone width, is dark in dark mode, and its screenshots at phone width, light
and dark, go to var/screenshots/ (mail-phone-light.png, mail-phone-dark.png)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest

from bots.email import mime
from digest_core.archive import Archive
from digest_core.rendering import RenderOptions
from digest_core.rendering import email as email_render
from tests.samples import SAMPLE_ARCHIVE
from tests.site.browser import CHROMIUM_ARGS, chromium

playwright_api = pytest.importorskip("playwright.sync_api")
#: one worker runs every browser test (make test: --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

ROOT = Path(__file__).resolve().parents[3]
SHOTS = ROOT / "var" / "screenshots"
PHONE = {"width": 390, "height": 844}


def html_part() -> str:
    issue = Archive(SAMPLE_ARCHIVE, index=False).on(dt.date(2026, 11, 27))
    [message] = email_render.render(issue, options=RenderOptions(site_url="https://d.example/"))
    envelope = mime.build(
        message,
        sender="AI 技术日报 <digest@example.org>",
        reply_to=None,
        recipient="reader@example.net",
        rid="r" + "0" * 24,
        list_id="<digest.example.org>",
        unsubscribe_url="https://d.example/email/unsubscribe?t=x",
        unsubscribe_mailto="digest@example.org",
        msgid="<m@example.org>",
        now=dt.datetime(2026, 11, 27, 8, 0, tzinfo=dt.UTC),
    )
    part = BytesParser(policy=policy.default).parsebytes(envelope.data).get_body(("html",))
    assert part is not None
    return str(part.get_content())


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Chromium at phone width for the module's pages, with a fresh profile."""
    path = chromium()
    if path is None:
        pytest.fail("no chromium: apt-get install chromium (.ci/run does)")
    with playwright_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")),
            executable_path=path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=PHONE,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_html_part_on_a_phone(tmp_path: Path, scheme: str, phone: Any) -> None:
    page_file = tmp_path / "mail.html"
    page_file.write_text(html_part(), encoding="utf-8")
    SHOTS.mkdir(parents=True, exist_ok=True)
    requests: list[str] = []
    page = phone.new_page()
    try:
        page.on("request", lambda r: requests.append(r.url))
        page.emulate_media(color_scheme=scheme)
        page.goto(page_file.as_uri())
        page.screenshot(path=str(SHOTS / f"mail-phone-{scheme}.png"), full_page=True)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        links = page.evaluate("[...document.querySelectorAll('a[href^=http]')].length")
    finally:
        page.close()
    assert requests == [page_file.as_uri()]  # nothing remote: fonts, scripts, images
    assert overflow <= 0, "the mail scrolls sideways on a phone"
    assert (background == "rgb(13, 17, 23)") == (scheme == "dark"), background
    assert links > 5  # the issue's links are links
