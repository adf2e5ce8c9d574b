"""Permalinks of the web archive: where an issue's page and each of its items live."""

from __future__ import annotations

import datetime as dt
import logging

from digest_core.models import Section

log = logging.getLogger(__name__)

#: The text of the link posts carry to an issue's page.
WEB_LINK_LABEL = "全文 / web"


def issue_path(date: dt.date) -> str:
    """The page of the issue of ``date``, relative to the site root: ``2026/11/27/``."""
    return f"{date.year:04d}/{date.month:02d}/{date.day:02d}/"


def anchor(section: Section | None, number: int | None = None) -> str:
    """The id of an item on its issue page: ``headline``, ``brief-3``, ``classic``; the
    briefs' section is ``briefs`` (``number`` None) and the lede ``lede`` (``section`` None)."""
    if section is None:
        return "lede"
    if section is Section.BRIEFS:
        return "briefs" if number is None else f"brief-{number}"
    return section.value


def issue_url(
    base_url: str, date: dt.date, section: Section | None = None, number: int | None = None
) -> str:
    """The absolute permalink of an issue (or of one item, with ``section``), under
    ``base_url`` (which ends with ``/``): ``https://x.example/2026/11/27/#brief-3``."""
    url = base_url + issue_path(date)
    if section is not None:
        url += "#" + anchor(section, number)
    return url
