"""The web archive's build: the embargo, escaping, the feed, the search index, writing a folder,
serving it over HTTP and the CLI."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from zoneinfo import ZoneInfo

import feedparser
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bots.site_http import lookup
from digest_core.archive import Archive
from digest_core.models import Issue, Item
from digest_core.publishing.embargo import Embargo
from digest_core.site.build import MANIFEST, SiteBuilder, SiteConfig, build_site, write_site
from digest_core.site.feed import FEED_ISSUES
from digest_core.site.live import LiveSite
from digest_core.site.published import FixedClock
from digest_core.site.search import LIST_DAYS, SHARD_BYTES, SearchIndex, encode_days, shard
from digest_core.testing import ManualClock, decode_days, make_issue
from tests import forkserver
from tests.samples import SAMPLE_ARCHIVE
from tests.site.browser import site_app

ROOT = Path(__file__).resolve().parents[2]
ZONE = ZoneInfo("Asia/Shanghai")
EIGHT = dt.time(8, 0)
DAY = dt.date(2026, 11, 30)
ATOM = "{http://www.w3.org/2005/Atom}"


def config(now: dt.datetime, base_url: str | None = "https://digest.example/") -> SiteConfig:
    return SiteConfig(rule=rule_at(now), base_url=base_url)


def rule_at(now: dt.datetime) -> Embargo:
    return Embargo(zone=ZONE, post_time=EIGHT, clock=FixedClock(now))


def at(date: dt.date, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime.combine(date, dt.time(hour, minute), tzinfo=ZONE)


def issues(n: int, last: dt.date = DAY) -> list[Issue]:
    return [make_issue(last - dt.timedelta(days=k), briefs=3) for k in range(n)]


# --- the embargo ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "shown"),
    [
        (at(DAY, 7, 59), False),  # a minute before the post time, in the digest's zone
        # instants, whatever their zone: 07:59 and 08:00 in Shanghai, midnight UTC
        (dt.datetime(2026, 11, 29, 23, 59, tzinfo=dt.UTC), False),
        (dt.datetime(2026, 11, 30, 0, 0, tzinfo=dt.UTC), True),
        (at(DAY, 8, 0), True),
    ],
)
def test_an_issue_appears_nowhere_before_its_post_time(now: dt.datetime, shown: bool) -> None:
    files = build_site([*issues(3), make_issue(DAY + dt.timedelta(days=1))], config(now))
    page = "2026/11/30/index.html"
    assert (page in files) is shown
    assert "2026/12/01/index.html" not in files  # tomorrow's issue, whatever the time
    mentions = [name for name, data in files.items() if b"2026/11/30/" in data]
    if shown:
        assert {"index.html", "feed.xml", "classic/index.html"} <= set(mentions)
        assert "search/days/2026-11-30.json" in files
    else:
        assert mentions == []
        assert not any(b"2026-11-30" in data for data in files.values())
        assert not any("2026-11-30" in name or "2026/11/30" in name for name in files)


def test_the_live_site_serves_an_issue_from_its_post_time_on() -> None:
    root = SAMPLE_ARCHIVE
    clock = ManualClock(at(DAY, 7, 59), autoadvance=False)
    rule = Embargo(zone=ZONE, post_time=EIGHT, clock=clock)
    live = LiveSite(Archive(root), rule=rule, clock=clock, check_seconds=30)
    assert lookup(live.files(), "2026/11/30/") == (404, "")
    assert lookup(live.files(), "2026/11/29/") == (200, "2026/11/29/index.html")
    clock.advance(60)  # 08:00
    assert lookup(live.files(), "2026/11/30/") == (200, "2026/11/30/index.html")
    assert live.builds == 2
    clock.advance(10)
    live.files()
    assert live.builds == 2  # nothing changed: no rebuild


# --- pages ---------------------------------------------------------------------------------


def test_issue_text_is_escaped_in_pages_search_and_feed() -> None:
    evil = "<script>alert(1)</script> & <b>"
    issue = Issue(
        date=DAY,
        lede=evil,
        headline=Item(title=evil, paragraphs=(evil,), links=("https://example.org/a?x=1&y=2",)),
    )
    files = build_site([issue], config(at(DAY, 9)))
    page = files["2026/11/30/index.html"].decode()
    assert "<script>alert" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in page
    assert 'href="https://example.org/a?x=1&amp;y=2"' in page
    assert "<script>alert" not in files["index.html"].decode()
    content = ET.fromstring(files["feed.xml"]).find(f"{ATOM}entry/{ATOM}content")
    assert content is not None and content.text is not None
    assert "<script>alert" not in content.text and "&lt;script&gt;alert" in content.text


def test_an_issue_page_has_an_anchor_per_item_and_links_to_its_neighbours() -> None:
    files = build_site(issues(3), config(at(DAY, 9)))
    page = files["2026/11/29/index.html"].decode()
    for anchor in ("lede", "headline", "briefs", "brief-1", "brief-2", "brief-3", "classic"):
        assert f'id="{anchor}"' in page
    assert 'href="#brief-2"' in page
    assert 'href="../../../2026/11/30/"' in page and 'href="../../../2026/11/28/"' in page
    assert '<link rel="canonical" href="https://digest.example/2026/11/29/">' in page
    index = files["index.html"].decode()
    assert index.index("2026/11/30/") < index.index("2026/11/28/")  # newest first


def test_the_index_groups_issues_by_month() -> None:
    files = build_site(issues(3, last=dt.date(2026, 12, 1)), config(at(dt.date(2026, 12, 2), 9)))
    index = files["index.html"].decode()
    assert index.index("2026年12月") < index.index("2026年11月")
    assert 'id="2026-12"' in index and 'id="2026-11"' in index


# --- the feed ------------------------------------------------------------------------------


def test_the_feed_holds_the_newest_30_issues_and_validates() -> None:
    files = build_site(issues(35), config(at(DAY, 9)))
    feed = feedparser.parse(files["feed.xml"])
    assert not feed.bozo, feed.get("bozo_exception")
    assert feed.version == "atom10"
    assert len(feed.entries) == FEED_ISSUES
    assert feed.entries[0].link == "https://digest.example/2026/11/30/"
    assert feed.entries[-1].link == "https://digest.example/2026/11/01/"
    for entry in feed.entries:
        assert entry.id.startswith("urn:uuid:")
        assert entry.updated_parsed is not None and entry.published_parsed is not None
        assert entry.content[0].type == "text/html"
        assert "简讯3" in entry.content[0].value  # the whole issue, not a summary
    assert feed.feed.updated == "2026-11-30T08:00:00+08:00"


def test_feed_ids_and_times_are_stable_across_rebuilds() -> None:
    first = build_site(issues(5), config(at(DAY, 9)))["feed.xml"]
    again = build_site(issues(5), config(at(DAY, 23)))["feed.xml"]
    assert first == again  # the same archive: the same bytes, whenever it is built
    tomorrow = DAY + dt.timedelta(days=1)
    later = feedparser.parse(
        build_site(issues(6, last=tomorrow), config(at(tomorrow, 9)))["feed.xml"]
    )
    before = {e.link: (e.id, e.updated) for e in feedparser.parse(first).entries}
    after = {e.link: (e.id, e.updated) for e in later.entries}
    assert all(after[link] == value for link, value in before.items())


def test_a_feed_without_base_url_has_relative_links_and_still_validates() -> None:
    feed = feedparser.parse(build_site(issues(2), config(at(DAY, 9), None))["feed.xml"])
    assert not feed.bozo
    assert [e.link for e in feed.entries] == ["2026/11/30/", "2026/11/29/"]


# --- the search index ----------------------------------------------------------------------


def search_files(issues: list[Issue]) -> dict[str, bytes]:
    """The search index of ``issues``, built from nothing."""
    return SearchIndex().files(issues)


def test_the_search_index_answers_by_pairs_and_single_characters() -> None:
    files = search_files(issues(2))
    meta = json.loads(files["search/meta.json"])
    assert meta["v"] == 3 and meta["years"] == [[2026, 1]]
    day = json.loads(files["search/days/2026-11-30.json"])
    anchors = [d[0] for d in day["d"]]
    assert anchors[:2] == ["lede", "headline"] and "brief-2" in anchors and "classic" in anchors
    assert day["m"] == "AI 技术日报"
    text = day["d"][anchors.index("brief-2")][2]
    assert "讯2" in text.lower()

    def years(gram: str) -> list[int]:
        part = json.loads(files[f"search/grams/{shard(gram, meta['shards'])}.json"])
        found: list[int] = part.get(gram, [])
        return found

    def days(gram: str) -> list[int]:
        part = json.loads(files[f"search/grams/2026/{shard(gram, 1)}.json"])
        return decode_days(part[gram]) if gram in part else []

    nov_30 = dt.date(2026, 11, 30).timetuple().tm_yday - 1
    assert years("讯2") == [26] and years("2") == [26] and years("丁丁") == []
    assert nov_30 in days("讯2") and nov_30 in days("2") and days("丁丁") == []


def test_postings_are_gaps_or_bitmaps_and_decode_to_their_days() -> None:
    for wanted in ([0], [3, 4, 44], list(range(0, 366, 2)), [365], list(range(366))):
        encoded = encode_days(wanted)
        assert isinstance(encoded, list) == (len(wanted) <= LIST_DAYS)
        assert decode_days(json.loads(json.dumps(encoded))) == wanted


@pytest.mark.slow  # over 0.25 s: left out of make check
def test_a_big_archive_has_its_index_in_years_and_small_shards() -> None:
    many = [make_issue(DAY - dt.timedelta(days=k), briefs=8) for k in range(400)]
    files = search_files(many)
    meta = json.loads(files["search/meta.json"])
    assert [y for y, _ in meta["years"]] == [2026, 2025]
    for year, shards in meta["years"]:
        names = [n for n in files if n.startswith(f"search/grams/{year}/")]
        assert len(names) == shards
    lists = [n for n in files if n.count("/") == 2 and n.startswith("search/grams/")]
    assert len(lists) == meta["shards"]
    shards = [n for n in files if n.startswith("search/grams/")]
    assert max(len(files[n]) for n in shards) < 4 * SHARD_BYTES
    assert len([n for n in files if n.startswith("search/days/")]) == 400


def test_an_index_rebuilt_by_parts_is_the_index_built_from_nothing() -> None:
    index = SearchIndex()
    history = [make_issue(DAY - dt.timedelta(days=k), briefs=3) for k in range(40, 0, -1)]
    shown: list[Issue] = []
    for issue in history[:30]:  # a day at a time
        shown.append(issue)
        assert index.files(shown) == search_files(shown)
    corrected = make_issue(shown[5].date, briefs=5)  # a correction of an old day
    shown[5] = corrected
    assert index.files(shown) == search_files(shown)
    del shown[3]  # a day taken down
    assert index.files(shown) == search_files(shown)
    assert index.files(history) == search_files(history)  # many at once, a new year too
    assert index.files(history[:2]) == search_files(history[:2])


@pytest.mark.parametrize("for_files", [False, True])
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_a_site_rebuilt_by_parts_is_the_site_built_from_nothing(for_files: bool) -> None:
    settings = SiteConfig(rule=rule_at(at(DAY, 9)), base_url="https://digest.example/",
                          for_files=for_files)  # fmt: skip
    builder = SiteBuilder(settings)
    shown = issues(12, DAY - dt.timedelta(days=3))
    assert builder.build(shown) == build_site(shown, settings)
    assert builder.build(shown) == build_site(shown, settings)
    assert builder.rendered == 0  # nothing changed: nothing rendered
    for k in (2, 1, 0):  # a new day at a time
        shown = [*shown, make_issue(DAY - dt.timedelta(days=k), briefs=3)]
        assert builder.build(shown) == build_site(shown, settings)
        # its page, the page before it (its "newer" link), the index, the classics, the feed
        assert builder.rendered == 5
    shown[4] = make_issue(shown[4].date, briefs=6)  # a correction of an old day
    assert builder.build(shown) == build_site(shown, settings)
    del shown[7]  # a day taken down
    assert builder.build(shown) == build_site(shown, settings)
    tomorrow = [*shown, make_issue(DAY + dt.timedelta(days=1))]  # not public yet
    assert builder.build(tomorrow) == build_site(shown, settings)


# --- writing a folder ----------------------------------------------------------------------


def test_write_site_replaces_changed_files_and_removes_only_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "site"
    first = build_site(issues(3), config(at(DAY, 9)))
    assert write_site(first, out) == (len(first), 0)
    (out / "mine.txt").write_text("not the site's")
    assert write_site(first, out) == (0, 0)  # nothing changed: nothing rewritten
    second = build_site(issues(2), config(at(DAY, 9)))  # 2026-11-28 is gone from the archive
    written, removed = write_site(second, out)
    assert removed == 2 and not (out / "2026/11/28/index.html").exists()
    assert not (out / "search/days/2026-11-28.json").exists()
    assert written > 0 and (out / "mine.txt").exists()
    assert sorted(json.loads((out / MANIFEST).read_text())) == sorted(second)


# --- HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", (200, "index.html")),
        ("2026/11/30/", (200, "2026/11/30/index.html")),
        ("2026/11/30", (301, "2026/11/30/")),
        ("2026/11/30/index.html", (200, "2026/11/30/index.html")),
        ("2026/11/30/../../../feed.xml", (404, "")),
        ("2026//11/30/", (404, "")),
        ("/etc/passwd", (404, "")),
        ("nothing/", (404, "")),
    ],
)
def test_lookup(path: str, expected: tuple[int, str]) -> None:
    files = build_site(issues(1), config(at(DAY, 9)))
    assert lookup(files, path) == expected


async def test_the_site_app_serves_pages_mounted_under_a_prefix() -> None:
    from aiohttp import web

    files = build_site(issues(2), config(at(DAY, 9)))
    app = web.Application()
    app.add_subapp("/site/", site_app(lambda: files))
    async with TestClient(TestServer(app)) as client:
        page = await client.get("/site/2026/11/30/")
        assert page.status == 200
        assert page.headers["Content-Type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert "重点新闻" in await page.text()
        moved = await client.get("/site/2026/11/30", allow_redirects=False)
        assert (moved.status, moved.headers["Location"]) == (301, "/site/2026/11/30/")
        feed = await client.get("/site/feed.xml")
        assert feed.headers["Content-Type"].startswith("application/atom+xml")
        assert (await client.get("/site/2026/11/01/")).status == 404
        assert (await client.head("/site/")).status == 200


# --- the CLI -------------------------------------------------------------------------------


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "bots.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.slow
def test_cli_builds_the_bundled_archive(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "digest-bot.toml", tmp_path / "config" / "digest-bot.toml")
    done = _cli(tmp_path, "site", "build", "out", "--now", "2026-11-30T07:59+08:00")
    assert done.returncode == 0, done.stderr
    assert "4 issues; 1 not published yet (hidden)" in done.stdout
    assert (tmp_path / "out/2026/11/29/index.html").exists()
    assert not (tmp_path / "out/2026/11/30").exists()
    bad = _cli(tmp_path, "site", "build", "out", "--base-url", "ftp://x")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "digest-bot: --base-url: expected the site's http(s) address without a query, like "
        "https://digest.example.org/ (got 'ftp://x')"
    ]


@pytest.mark.slow
def test_cli_builds_a_site_for_disk_and_server_by_default(tmp_path: Path) -> None:
    """Issue 20, items 1 and 10: ``site build`` links pages by file and ships the search index
    as scripts (opened from disk it works; tests/site/test_browser.py opens it), says how to
    open it, and adds no unasked note; ``--for-server`` keeps folder links and JSON."""
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    done = _cli(tmp_path, "site", "build", "public", "--now", "2026-11-30T09:00+08:00")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert f"open {(tmp_path / 'public' / 'index.html').as_uri()}" in done.stdout
    index = (tmp_path / "public/index.html").read_text(encoding="utf-8")
    assert 'href="2026/11/30/index.html"' in index and 'href="search/index.html"' in index
    meta = (tmp_path / "public/search/meta.js").read_text(encoding="utf-8")
    assert meta.startswith('digestSearch.add("meta.json",{"v":3,')
    assert not (tmp_path / "public/search/meta.json").exists()
    served = _cli(tmp_path, "site", "build", "served", "--for-server")
    assert served.returncode == 0, served.stderr
    assert 'href="2026/11/30/"' in (tmp_path / "served/index.html").read_text(encoding="utf-8")
    assert (tmp_path / "served/search/meta.json").exists()


# --- settings ------------------------------------------------------------------------------


def test_base_url_is_checked_and_ends_with_a_slash(tmp_path: Path) -> None:
    from bots.registry import load_settings
    from digest_core.errors import ConfigError

    cfg = tmp_path / "bot.toml"
    cfg.write_text('[site]\nbase_url = "https://digest.example/ai"\n', encoding="utf-8")
    assert load_settings(cfg).site.base_url == "https://digest.example/ai/"
    cfg.write_text('[site]\nbase_url = "digest.example"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert info.value.key == "site.base_url"
    assert load_settings(None).site.base_url is None


def test_a_post_time_skipped_by_a_dst_change_moves_forward() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    spring = dt.date(2026, 3, 29)  # 02:00 -> 03:00
    rule = Embargo(zone=berlin, post_time=dt.time(2, 30), clock=FixedClock(at(DAY, 9)))
    assert rule.publish_time(spring) == dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)
    assert rule.publish_time(spring).utcoffset() == dt.timedelta(hours=2)


async def test_the_site_beside_other_routes_at_the_root() -> None:
    from aiohttp import web

    from bots.site_http import add_site_routes

    files = build_site(issues(1), config(at(DAY, 9)))
    app = web.Application()

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/healthz", healthz)
    add_site_routes(app, lambda: files)
    async with TestClient(TestServer(app)) as client:
        assert await (await client.get("/healthz")).text() == "ok"
        assert (await client.get("/2026/11/30/")).status == 200
        assert (await client.get("/")).status == 200


@pytest.mark.slow
def test_cli_serves_the_site_until_terminated(tmp_path: Path) -> None:
    import signal
    import socket
    import time
    import urllib.request

    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bad = _cli(tmp_path, "site", "serve", "--listen", "nowhere")
    assert bad.returncode == 1 and "HOST:PORT" in bad.stderr
    server = forkserver.Popen(
        [sys.executable, "-m", "bots.cli", "site", "serve", "--listen", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/2026/11/27/") as answer:
                    assert "KV 缓存" in answer.read().decode()
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "the server did not answer in 20 s"
                time.sleep(0.1)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    assert server.returncode in (0, -signal.SIGTERM)


def test_every_relative_link_of_every_page_resolves() -> None:
    """All pages of a site of many issues: each href/src inside the site names a file of the
    build (a folder's index.html) and each #fragment an id of that page."""
    import posixpath
    import re

    files = build_site(issues(40), config(at(DAY, 9)))
    pages = {name: data.decode() for name, data in files.items() if name.endswith(".html")}
    assert len(pages) == 43
    checked = 0
    for name, html in pages.items():
        folder = posixpath.dirname(name)
        for ref in re.findall(r'(?:href|src)="([^"]*)"', html):
            if ref.startswith(("https://", "http://")):
                continue
            path, _, fragment = ref.partition("#")
            target = posixpath.normpath(posixpath.join(folder, path)) if path else name
            if path.endswith("/") or path == "":
                target = name if not path else posixpath.join(target, "index.html")
            target = target.removeprefix("./")
            assert target in files, f"{name}: {ref} -> {target}"
            if fragment:
                assert f'id="{fragment}"' in pages[target], f"{name}: {ref}"
            checked += 1
    assert checked > 10 * len(pages)


def test_only_the_search_page_has_a_script_and_nothing_runs_inline() -> None:
    import re

    files = build_site(issues(3), config(at(DAY, 9)))
    pages = {n: d.decode() for n, d in files.items() if n.endswith(".html")}
    with_scripts = sorted(n for n, html in pages.items() if "<script" in html)
    assert with_scripts == ["search/index.html"]
    assert re.findall(r"<script[^>]*>", pages["search/index.html"]) == [
        '<script src="../static/search.js" defer>'
    ]
    for name, html in pages.items():
        assert not re.search(r"\son[a-z]+=|javascript:|style=", html), name
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
