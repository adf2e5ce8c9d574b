"""The site of an archive as it is now: rebuilt when a published issue appears or changes."""

from __future__ import annotations

import datetime as dt
import logging
import threading

from digest_core.archive import Archive
from digest_core.clock import Clock
from digest_core.models import Issue
from digest_core.site.build import SiteBuilder, SiteConfig
from digest_core.site.published import PublishRule

log = logging.getLogger(__name__)

#: The archive is looked at again at most this often (seconds) by :meth:`LiveSite.files`.
CHECK_SECONDS = 5.0


def published_issues(archive: Archive, rule: PublishRule) -> list[Issue]:
    """Every issue of ``archive`` that ``rule`` says is public now, oldest first; a date whose
    file is broken with no good version is left out (the archive reports it)."""
    return [issue for issue in archive.issues() if rule.visible(issue.date)]


class LiveSite:
    """The files of the site of ``archive``, built again only when what is public changed
    (looked at every ``check_seconds`` of ``clock``'s monotonic time), and then only in the
    parts that changed (:class:`~digest_core.site.build.SiteBuilder`).

        Thread-safe; :meth:`files` does file I/O and may build: call it from a worker thread.
    """

    def __init__(
        self,
        archive: Archive,
        *,
        rule: PublishRule,
        clock: Clock,
        base_url: str | None = None,
        check_seconds: float = CHECK_SECONDS,
        subscribe: str | None = None,
    ) -> None:
        self.archive = archive
        self.rule = rule
        self.clock = clock
        self.base_url = base_url
        #: SiteConfig.subscribe: the subscription form's action on every page
        self.subscribe = subscribe
        self.check_seconds = check_seconds
        self._lock = threading.Lock()
        self._key: tuple[tuple[dt.date, str], ...] | None = None
        self._files: dict[str, bytes] = {}
        self._checked = -float("inf")
        self._builder: SiteBuilder | None = None
        self.builds = 0

    def files(self) -> dict[str, bytes]:
        """The site's files now (see :func:`~digest_core.site.build.build_site`)."""
        with self._lock:
            if self.clock.monotonic() - self._checked < self.check_seconds:
                return self._files
            issues = published_issues(self.archive, self.rule)
            key = tuple((i.date, i.revision) for i in issues)
            if key != self._key:
                if self._builder is None:
                    config = SiteConfig(
                        rule=self.rule, base_url=self.base_url, subscribe=self.subscribe
                    )
                    self._builder = SiteBuilder(config)  # keeps what it built: a new day
                self._files = self._builder.build(issues)  # renders a few pages, not all
                self._key = key
                self.builds += 1
                log.info(
                    "web archive built: %d published issues, %d pages rendered",
                    len(issues),
                    self._builder.rendered,
                )
            self._checked = self.clock.monotonic()
            return self._files
