"""Build the web archive: every page, the search index and the feed, as files in memory.

:func:`build_site` is pure (issues in, ``{path: bytes}`` out); :func:`write_site` puts the
files in a folder. Only published issues are shown (:mod:`digest_core.site.published`): the
filter is applied here, so no caller can forget it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from digest_core.models import QUESTION_MARKER, Issue
from digest_core.site.feed import FEED_ISSUES, build_feed
from digest_core.site.links import issue_path
from digest_core.site.published import PublishRule
from digest_core.site.search import SearchIndex, as_scripts

log = logging.getLogger(__name__)

#: The static files every site carries, from this package's ``static`` folder.
STATIC_FILES = ("style.css", "search.js", "favicon.svg")
#: Written beside the pages: what the last build wrote, so the next one removes what is gone.
MANIFEST = ".digest-site.json"
#: The site's title when the archive has no issue to take a masthead from.
DEFAULT_TITLE = "AI 技术日报"
_WEEKDAYS = "一二三四五六日"


@dataclass(frozen=True)
class SiteConfig:
    """What a build needs besides the issues.

    ``rule`` decides which issues are public (now) and when each was published (the feed's
    times). ``base_url`` (ending with ``/``) makes canonical links and the feed's links
    absolute; without it every link is relative. ``for_files``: the site also works opened
    from disk (``file://``): links name ``…/index.html`` instead of the folder, and the search
    index is a set of scripts instead of JSON fetched by the page (:func:`as_scripts`); served,
    it works the same.
    """

    rule: PublishRule
    base_url: str | None = None
    for_files: bool = False
    #: the path (from the site root) a subscription form on every page posts its address to;
    #: None: no form (a static build has no server to post to)
    subscribe: str | None = None


@dataclass(frozen=True)
class _Entry:
    issue: Issue
    path: str

    @property
    def date(self) -> dt.date:
        return self.issue.date

    @property
    def short_date(self) -> str:
        return f"{self.date.month}月{self.date.day}日 周{_WEEKDAYS[self.date.weekday()]}"


def public_issues(issues: Iterable[Issue], rule: PublishRule) -> list[Issue]:
    """The issues ``rule`` says may be shown now, oldest first (one per date)."""
    by_date = {i.date: i for i in issues if rule.visible(i.date)}
    return [by_date[d] for d in sorted(by_date)]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("digest_core.site", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals["question_marker"] = QUESTION_MARKER
    return env


def long_date(date: dt.date) -> str:
    """``2026年11月27日 星期五``."""
    return f"{date.year}年{date.month}月{date.day}日 星期{_WEEKDAYS[date.weekday()]}"


def build_site(issues: Iterable[Issue], config: SiteConfig) -> dict[str, bytes]:
    """Every file of the site for the public ones among ``issues``, by path relative to the
    site root (``index.html``, ``2026/11/27/index.html``, ``classic/index.html``,
    ``search/index.html`` and its index ``search/…``, ``feed.xml``, ``static/…``).

    Issue pages are ``YYYY/MM/DD/index.html`` with the anchors of
    :func:`digest_core.site.links.anchor`; links between pages are relative, so the site works
    under any path prefix. All issue text is escaped by the templates (autoescape).
    """
    return SiteBuilder(config).build(issues)


class SiteBuilder:
    """Builds the site again and again as the issues change, redoing only what changed.

    Each page is rendered from a key of everything it shows (an issue page: its issue's
    revision and its neighbours' dates; the index: every issue's revision; the feed: the
    newest issues' revisions and publishing times) and kept with it: a build renders only the
    pages whose key moved (a new day: its page, the page before it, the index, the classics
    and the feed) and the search index redoes only the changed days and years
    (:class:`~digest_core.site.search.SearchIndex`). The files are the same bytes as
    :func:`build_site` makes from nothing. Not thread-safe (:class:`LiveSite` holds a lock).
    """

    def __init__(self, config: SiteConfig) -> None:
        self.config = config
        self._env = _environment()
        self._pages: dict[str, tuple[object, bytes]] = {}
        self._kept: dict[str, tuple[object, bytes]] = {}  # the last build's, during a build
        self._search = SearchIndex()
        #: the lines of the lists of issues and classics, by (macro, page, revision)
        self._items: dict[tuple[str, str, str], Markup] = {}
        self._kept_items: dict[tuple[str, str, str], Markup] = {}
        self._used_items: dict[tuple[str, str, str], Markup] = {}
        #: pages rendered by the last build (the rest were kept)
        self.rendered = 0

    def build(self, issues: Iterable[Issue]) -> dict[str, bytes]:
        """Every file of the site for the public ones among ``issues`` (see :func:`build_site`)."""
        config = self.config
        shown = public_issues(issues, config.rule)
        title = shown[-1].masthead if shown else DEFAULT_TITLE
        entries = [_Entry(i, issue_path(i.date)) for i in shown]
        self._kept, self.rendered = self._pages, 0
        self._kept_items, self._used_items = self._items, {}
        self._pages = {}
        revisions = tuple((e.date, e.issue.revision) for e in entries)
        self._page("index.html", (title, revisions), "index.html.j2", "", "", title,
                   months=_months(entries), item=self._item("issue_item", ""))  # fmt: skip
        for n, entry in enumerate(entries):
            older = entries[n - 1] if n > 0 else None
            newer = entries[n + 1] if n + 1 < len(entries) else None
            around = (None if older is None else older.date, None if newer is None else newer.date)
            self._page(entry.path + "index.html", (title, entry.issue.revision, around),
                       "issue.html.j2", "../../../", entry.path, title, issue=entry.issue,
                       long_date=long_date(entry.date), lang=_lang(entry.issue), older=older,
                       newer=newer)  # fmt: skip
        classics = [e for e in reversed(entries) if e.issue.classic is not None]
        listed = tuple((e.date, e.issue.revision) for e in classics)
        self._page("classic/index.html", (title, listed), "classic.html.j2", "../", "classic/",
                   title, entries=classics, item=self._item("classic_item", "../"))  # fmt: skip
        self._page("search/index.html", title, "search.html.j2", "../", "search/", title,
                   index_format="js" if config.for_files else "json")  # fmt: skip
        files = {path: data for path, (_, data) in self._pages.items()}
        index_files = self._search.files(shown)
        files.update(as_scripts(index_files) if config.for_files else index_files)
        files["feed.xml"] = self._feed(shown, title)
        static = resources.files("digest_core.site") / "static"
        for name in STATIC_FILES:
            files[f"static/{name}"] = (static / name).read_bytes()
        self._kept = {}
        self._items, self._kept_items = self._used_items, {}
        log.debug("site: %d issues, %d files, %d rendered", len(shown), len(files), self.rendered)
        return files

    def _page(
        self, path: str, key: object, template: str, root: str, canonical: str, title: str,
        **values: Any,
    ) -> None:  # fmt: skip
        """The page at ``path``: kept from the last build when ``key`` is the same, else
        rendered."""
        old = self._kept.get(path)
        if old is not None and old[0] == key:
            self._pages[path] = old
            return
        config = self.config
        index = "index.html" if config.for_files else ""  # what a link to a folder ends with
        values.setdefault("lang", "zh-CN")
        html = self._env.get_template(template).render(
            site_title=title,
            root=root,
            canonical=config.base_url + canonical if config.base_url else None,
            index=index,
            subscribe=config.subscribe,
            **values,
        )
        self._pages[path] = (key, html.encode("utf-8"))
        self.rendered += 1

    def _item(self, macro: str, root: str) -> Callable[[_Entry], Markup]:
        """What a list page calls for each line: the line of ``macro`` for an entry,
        rendered once per revision (a new day renders one line, not ten years of them)."""
        render = getattr(self._env.get_template("lists.html.j2").module, macro)
        index = "index.html" if self.config.for_files else ""

        def item(entry: _Entry) -> Markup:
            key = (macro, entry.path, entry.issue.revision)
            html = self._kept_items.get(key)
            if html is None:
                html = Markup(str(render(entry, root, index)))
            self._used_items[key] = html
            return html

        return item

    def _feed(self, shown: Sequence[Issue], title: str) -> bytes:
        """``feed.xml``: kept while its newest issues and their publishing times are."""
        config = self.config
        newest = shown[-FEED_ISSUES:]
        key = (title, tuple((i.date, i.revision, config.rule.publish_time(i.date)) for i in newest))
        old = self._kept.get("feed.xml")
        if old is not None and old[0] == key:
            self._pages["feed.xml"] = old
            return old[1]
        body = self._env.get_template("item.html.j2").module.issue_body  # type: ignore[attr-defined]

        def content(issue: Issue) -> str:
            page_url = (config.base_url or "") + issue_path(issue.date)
            return str(body(issue, page_url))

        feed = build_feed(
            shown, title=title, base_url=config.base_url, published=config.rule.publish_time,
            content=content,
        )  # fmt: skip
        self._pages["feed.xml"] = (key, feed)
        self.rendered += 1
        return feed


def _lang(issue: Issue) -> str:
    """``zh-CN``, or ``en`` for an issue whose masthead and headline hold no Chinese."""
    text = issue.masthead + issue.headline.title
    return "zh-CN" if any("\u3400" <= c <= "\u9fff" for c in text) else "en"


def _months(entries: Sequence[_Entry]) -> list[dict[str, Any]]:
    """The entries by month, newest month and issue first."""
    months: dict[tuple[int, int], list[_Entry]] = {}
    for entry in reversed(entries):
        months.setdefault((entry.date.year, entry.date.month), []).append(entry)
    return [
        {"id": f"{y:04d}-{m:02d}", "label": f"{y}年{m}月", "entries": items}
        for (y, m), items in months.items()
    ]


def write_site(files: dict[str, bytes], out: Path) -> tuple[int, int]:
    """Write ``files`` under ``out`` (created if missing); returns (written, removed).

    A file whose content is unchanged is not rewritten; others are replaced atomically (a
    reader of the folder never sees half a page). Files the previous build wrote (listed in
    :data:`MANIFEST`) that this one does not are removed; nothing else in ``out`` is touched.

    Raises:
        OSError: ``out`` cannot be created or written.
    """
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / MANIFEST
    try:
        before = set(json.loads(manifest.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        before = set()
    written = 0
    for rel, data in sorted(files.items()):
        target = out / rel
        try:
            if target.read_bytes() == data:
                continue
        except OSError:
            pass
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(target, data)
        written += 1
    removed = 0
    for rel in sorted(before - files.keys()):
        target = out / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            continue  # a tampered manifest never removes anything outside the folder
        try:
            target.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    _atomic_write(manifest, json.dumps(sorted(files), indent=0).encode("utf-8"))
    return written, removed


def _atomic_write(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
