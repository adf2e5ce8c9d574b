"""The web archive in a real browser: headless Chromium (Debian's package, through Playwright)
loads the bundled archive's site over HTTP; no console errors, every link resolves, search
finds a word of one brief. Screenshots at phone and desktop widths go to var/screenshots/."""

from __future__ import annotations

import datetime as dt
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from digest_core.archive import Archive
from digest_core.loading import load_issue_data
from digest_core.models import Issue
from digest_core.publishing.embargo import Embargo
from digest_core.site.build import SiteConfig, build_site, write_site
from digest_core.site.links import issue_path
from digest_core.site.live import published_issues
from digest_core.site.published import FixedClock
from digest_core.site.search import _documents
from tests.samples import SAMPLE_ARCHIVE
from tests.site.browser import CHROMIUM_ARGS, chromium, served

playwright_api = pytest.importorskip("playwright.sync_api")

#: one worker runs them all (make test: --dist loadgroup), so one Chromium starts
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screenshots"
ZONE = ZoneInfo("Asia/Shanghai")
#: after the bundled archive's last post time
NOW = dt.datetime(2026, 11, 30, 8, 0, tzinfo=ZONE)
RULE = Embargo(zone=ZONE, post_time=dt.time(8, 0), clock=FixedClock(NOW))
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
#: a word of exactly one brief of the bundled archive (checked below)
WORD = "交错切分"


def documents(issues: Sequence[Issue]) -> list[list[str]]:
    """One document per lede and per item, newest issue first, as the search index holds
    them: ``[path, date, where, title, text]`` where ``text`` is every searchable piece, one
    per line."""
    docs: list[list[str]] = []
    for issue in sorted(issues, key=lambda i: i.date, reverse=True):
        page, date = issue_path(issue.date), issue.date.isoformat()
        for mark, where, title, text in _documents(issue):
            docs.append([f"{page}#{mark}", date, where, title, text])
    return docs


@pytest.fixture(scope="module")
def site() -> dict[str, bytes]:
    archive = Archive(SAMPLE_ARCHIVE, index=False)
    return build_site(published_issues(archive, RULE), SiteConfig(rule=RULE))


@pytest.fixture(scope="module")
def root(site: dict[str, bytes]) -> Iterator[str]:
    with served(lambda: site) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Chromium for the module, with a fresh profile."""
    path = chromium()
    if path is None:
        pytest.fail("no chromium: apt-get install chromium (.ci/run does)")
    with playwright_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=DESKTOP,
        )
        try:
            yield context
        finally:
            context.close()


class Watched:
    """A page whose console errors, uncaught exceptions and failed requests are recorded."""

    def __init__(self, context: Any) -> None:
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))
        self.page.on(
            "response",
            lambda r: self.errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
        )

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    w = Watched(browser)
    yield w
    w.close()


def _links(page: Any) -> list[str]:
    hrefs: list[str] = page.eval_on_selector_all(
        "a[href], link[href]", "els => els.map(e => e.href)"
    )
    return hrefs


def _check_links(page: Any, root: str, checked: dict[str, str]) -> None:
    """Every link of ``page`` resolves: ours answer 200 (and a #fragment names an element of
    the target page); links out of the site are well-formed http(s) URLs (not fetched: the
    tests run without internet)."""
    for href in _links(page):
        if href in checked:
            continue
        url, _, fragment = href.partition("#")
        if not url.startswith(root):
            parts = urllib.parse.urlsplit(href)
            assert parts.scheme in ("http", "https") and parts.hostname, href
            checked[href] = "external"
            continue
        response = page.request.get(url)
        assert response.status == 200, f"{href} answered {response.status}"
        if fragment:
            body = response.text()
            assert f'id="{fragment}"' in body, f"{href}: no element with id {fragment!r}"
        checked[href] = "ok"


def _searched(page: Any) -> None:
    """Wait until the search page has answered the query it shows."""
    page.wait_for_function(
        "() => /found/.test(document.getElementById('status').textContent)", timeout=10_000
    )


def test_the_word_is_in_exactly_one_brief(site: dict[str, bytes]) -> None:
    archive = Archive(SAMPLE_ARCHIVE, index=False)
    docs = documents(published_issues(archive, RULE))
    assert [d[0] for d in docs if WORD in d[4]] == ["2026/11/30/#brief-1"]


def test_pages_load_without_errors_and_every_link_resolves(watched: Watched, root: str) -> None:
    page = watched.page
    checked: dict[str, str] = {}
    for path in ("", "2026/11/27/", "classic/", "search/?q=模型"):
        page.goto(root + path)
        if path.startswith("search/"):
            _searched(page)
            assert page.locator("#results li").count() > 0
        _check_links(page, root, checked)
    assert watched.errors == []
    ours = [h for h, v in checked.items() if v == "ok"]
    # the index links every issue; the issue page its briefs' permalinks
    assert {root + f"2026/11/{d}/" for d in range(26, 31)} <= set(ours)
    assert root + "2026/11/27/#brief-3" in ours
    assert root + "feed.xml" in ours


def test_search_finds_a_word_of_one_brief_and_its_link_opens_it(
    watched: Watched, root: str
) -> None:
    page = watched.page
    page.goto(root + "search/")
    page.wait_for_selector("body[data-search-ready]")
    page.fill("#q", WORD)
    page.press("#q", "Enter")
    _searched(page)
    results = page.locator("#results li")
    assert results.count() == 1
    assert WORD in results.first.locator("mark").inner_text()
    link = results.first.locator("a")
    assert link.get_attribute("href") == "../2026/11/30/#brief-1"
    assert "q=" in page.url  # the query is in the address, so a search can be shared
    link.click()
    page.wait_for_url(root + "2026/11/30/#brief-1")
    target = page.locator("article:target")
    assert target.get_attribute("id") == "brief-1"
    assert WORD in target.inner_text()
    page.goto(root + "search/?q=" + urllib.parse.quote("没有这个词"))
    _searched(page)
    assert page.locator("#results li").count() == 0
    assert "nothing found" in page.locator("#status").inner_text()
    assert watched.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots_at_phone_and_desktop_widths(browser: Any, root: str, scheme: str) -> None:
    """Screenshots for review (var/screenshots/); the page must not scroll sideways on a
    phone, and dark mode must really be dark."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    try:
        page.emulate_media(color_scheme=scheme)
        for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
            page.set_viewport_size(size)
            for label, path in (
                ("index", ""),
                ("issue", "2026/11/27/"),
                ("permalink", "2026/11/27/#brief-3"),
                ("search", "search/?q=" + urllib.parse.quote(WORD)),
            ):
                page.goto(root + path)
                if label == "search":
                    _searched(page)
                page.screenshot(path=str(SHOTS / f"{label}-{name}-{scheme}.png"))
                overflow = page.evaluate(
                    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
                )
                assert overflow <= 0, f"{label} scrolls sideways at {size['width']} px"
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        dark = background == "rgb(13, 17, 23)"
        assert dark == (scheme == "dark"), background
    finally:
        page.close()


# --- issue 20, item 1: the site opened from disk ------------------------------------------


@pytest.fixture(scope="module")
def on_disk(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The bundled archive's site built for files, written to a folder: its file:// URL."""
    out = tmp_path_factory.mktemp("public")
    archive = Archive(SAMPLE_ARCHIVE, index=False)
    config = SiteConfig(rule=RULE, for_files=True)
    write_site(build_site(published_issues(archive, RULE), config), out)
    return out.as_uri() + "/"


def test_the_site_opened_from_disk_links_pages_and_searches(watched: Watched, on_disk: str) -> None:
    page = watched.page
    page.goto(on_disk + "index.html")
    for href in _links(page):  # every link of ours names a file that is there
        if href.startswith("file:"):
            path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(href).path))
            assert path.is_file(), f"{href}: not a file"
    page.click("text=" + documents_title(page))
    page.wait_for_url(on_disk + "2026/11/30/index.html")
    page.goto(on_disk + "search/index.html")
    page.wait_for_selector("body[data-search-ready]", timeout=10_000)
    page.fill("#q", WORD)
    page.press("#q", "Enter")
    _searched(page)
    results = page.locator("#results li")
    assert results.count() == 1
    link = results.first.locator("a")
    assert link.get_attribute("href") == "../2026/11/30/index.html#brief-1"
    link.click()
    page.wait_for_url(on_disk + "2026/11/30/index.html#brief-1")
    assert page.locator("article:target").get_attribute("id") == "brief-1"
    assert watched.errors == []


def documents_title(page: Any) -> str:
    """The newest issue's headline, as the index page lists it first."""
    text: str = page.locator("main li a").first.inner_text()
    return text.split(" ", 1)[1]


@pytest.fixture(scope="module")
def two_years() -> Iterator[tuple[str, list[Any]]]:
    """A site of 420 issues over two years (the bundled texts in turn), served; its documents."""
    texts = [p.read_bytes() for p in sorted(SAMPLE_ARCHIVE.glob("*.txt"))]
    shown = []
    for n in range(420):
        day = NOW.date() - dt.timedelta(days=n)
        data = texts[n % len(texts)]
        shown.append(load_issue_data(data, path=f"{day}.txt", suffix=".txt", date=day))
    built = build_site(shown, SiteConfig(rule=RULE))
    with served(lambda: built) as url:
        yield url, documents(shown)


@pytest.mark.parametrize("word", ["模型", "的", "x", "推理服务", "量子纠缠"])
def test_search_pages_through_days_and_years_as_the_documents_say(
    watched: Watched, two_years: tuple[str, list[Any]], word: str
) -> None:
    # what the page shows, page after page ("more"), is every document holding the word,
    # newest first, in reading order: the same as checking each document in Python
    root, docs = two_years
    expected = [f"{d[1]} · {d[2]}" for d in docs if word in d[4].lower()][:90]
    page = watched.page
    page.goto(root + "search/?q=" + urllib.parse.quote(word))
    shown: list[str] = []
    pages = 0
    while True:  # a page: at most 30 hits, from at most 5 days' files
        pages += 1
        page.wait_for_function(
            "n => Number(document.body.getAttribute('data-search-pages')) >= n",
            arg=pages,
            timeout=20_000,
        )
        shown = page.locator("#results li .meta").all_inner_texts()
        if len(shown) >= len(expected) or page.locator("#more").is_hidden():
            break
        page.click("#more")
    assert shown[:90] == expected
    assert watched.errors == []
