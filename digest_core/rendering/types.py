"""Rendering types shared by the package and its renderer modules (no renderer imports here)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol

from digest_core.models import Issue, Item, Section
from digest_core.site.links import anchor, issue_url


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The exact bytes posted for a JSON ``body``: compact UTF-8 JSON. Renderers of bodies with
    a byte limit measure with this, and the adapters send it, so what fits here fits on the wire."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class Part(StrEnum):
    """What part of an issue to render."""

    ALL = "all"
    HEADLINE = "headline"
    BRIEFS = "briefs"
    BRIEF = "brief"  # one brief: pass brief=N (from 1)
    CLASSIC = "classic"
    TOC = "toc"


@dataclass(frozen=True)
class RenderOptions:
    """Presentation switches; the defaults are what a channel post looks like."""

    #: Telegram inline keyboard / Discord buttons (重点 / 简讯 / 经典回顾) on the last message.
    buttons: bool = False
    #: Discord: embeds (True) or the plain-markdown fallback (False).
    embeds: bool = True
    #: Telegram: show a link preview for the headline's source (other messages never preview).
    link_preview: bool = True
    #: The web archive's address (``[site] base_url``, ending with ``/``): the first line then
    #: carries a "全文 / web" link to the issue's page (to the item, for one part; see
    #: :func:`web_url`). None: no link.
    site_url: str | None = None
    #: Where each source link of a story goes instead (``[analytics] track_links``: the bot's
    #: counting redirect): applied to the issue before any renderer sees it
    #: (:func:`with_links`), so every renderer emits the mapped URLs. None: the originals.
    links: LinkMap | None = None


class LinkMap(Protocol):
    """What a post's source links become: ``(issue date, story, link number from 1, url)``
    -> the URL to show (the story is the item's id on its page: ``headline``, ``brief-3``,
    ``classic``)."""

    def __call__(self, date: dt.date, story: str, number: int, url: str) -> str: ...


def with_links(issue: Issue, links: LinkMap) -> Issue:
    """``issue`` with every story's source links mapped by ``links`` (the same revision: the
    ledger and corrections still name the file's)."""

    def mapped(item: Item, story: str) -> Item:
        if not item.links:
            return item
        new = tuple(links(issue.date, story, n, url) for n, url in enumerate(item.links, 1))
        return item.model_copy(update={"links": new})

    briefs = tuple(
        mapped(b, anchor(Section.BRIEFS, n)) for n, b in enumerate(issue.briefs, start=1)
    )
    changed = issue.model_copy(
        update={
            "headline": mapped(issue.headline, anchor(Section.HEADLINE)),
            "briefs": briefs,
            "classic": None if issue.classic is None else mapped(issue.classic, "classic"),
        }
    )
    changed.__dict__["revision"] = issue.revision  # (a cached_property: the file's revision)
    return changed


@dataclass(frozen=True)
class Message:
    """One message ready to send."""

    payload: dict[str, Any] = field(hash=False)

    @property
    def digest(self) -> str:
        """32 hex digits naming the payload's content (key order does not matter): two
        messages with equal digests look the same; the ledger keeps it per part."""
        canonical = json.dumps(self.payload, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


#: Prefix of button callback data / custom ids; the rest names the issue and section, so
#: buttons on old posts keep working after restarts.
BUTTON_PREFIX = "dg"
BUTTON_SECTIONS: tuple[Section, ...] = (Section.HEADLINE, Section.BRIEFS, Section.CLASSIC)


def button_data(date: dt.date, section: Section) -> str:
    """``dg:2026-10-27:headline`` — at most 64 bytes, as Telegram's callback_data must be."""
    return f"{BUTTON_PREFIX}:{date.isoformat()}:{section.value}"


def parse_button_data(data: str) -> tuple[dt.date, Section] | None:
    """The inverse of :func:`button_data`; ``None`` for anything that is not ours or malformed."""
    parts = data.split(":")
    if len(parts) != 3 or parts[0] != BUTTON_PREFIX:
        return None
    try:
        return dt.date.fromisoformat(parts[1]), Section(parts[2])
    except ValueError:
        return None


class TextLimits:
    """A platform's text and size limits as class attributes, in the style of Apprise's
    ``body_maxlen`` and ``title_maxlen``: each renderer module has a ``Limits`` subclass with
    the platform's facts (and their sources), and renders every message within them. 0: the
    platform sets no such limit."""

    #: a message's text (content, markdown), counted in :attr:`unit`
    body_maxlen: ClassVar[int] = 0
    #: a message's title
    title_maxlen: ClassVar[int] = 0
    #: the whole request body, in bytes of its JSON (:func:`encode_body`)
    request_maxlen: ClassVar[int] = 0
    #: what :attr:`body_maxlen` counts: "utf-16" code units, "chars" (code points) or "bytes"
    #: (UTF-8)
    unit: ClassVar[str] = "chars"


class Renderer(Protocol):
    """A renderer: what a platform declares to turn issues and service texts into its payloads.

    The renderer modules here (one per platform: ``telegram``, ``discord``, ``feishu``,
    ``dingtalk``, ``wecom``, ``email``, and ``plain``; each with its platform's
    :class:`TextLimits` as ``Limits``) are renderers; so may be any object or module a
    platform brings.
    """

    def render(
        self, issue: Issue, part: Part, *, brief: int | None, options: RenderOptions
    ) -> list[Message]:
        """``part`` of ``issue`` as messages in send order, each within the platform's limits."""
        ...

    def preview(self, message: Message) -> str:
        """A readable text view of one payload."""
        ...

    def notice(self, text: str, *, mentions: bool = False) -> list[Message]:
        """A short service text as escaped messages, split at line ends to fit, pinging no
        one; ``mentions`` keeps the bot's own deliberate @mentions where the platform mutes
        them otherwise."""
        ...


#: The section a part's web link points at (ALL and TOC: the page itself).
_PART_SECTIONS = {
    Part.HEADLINE: Section.HEADLINE,
    Part.BRIEFS: Section.BRIEFS,
    Part.BRIEF: Section.BRIEFS,
    Part.CLASSIC: Section.CLASSIC,
}


def web_url(options: RenderOptions, issue: Issue, part: Part, brief: int | None) -> str | None:
    """The page of ``part`` of ``issue`` in the web archive (``…/2026/11/27/#brief-3``), or
    None when ``options.site_url`` is unset."""
    if options.site_url is None:
        return None
    section = _PART_SECTIONS.get(part)
    return issue_url(options.site_url, issue.date, section, brief if part is Part.BRIEF else None)


def checked(
    platform: str,
    issue: Issue,
    part: Part,
    messages: Sequence[Message],
    check: Callable[[dict[str, Any]], list[str]],
) -> list[Message]:
    """``messages``, ``part`` of ``issue`` as ``platform``'s renderer made them, once ``check``
    finds no problem in any: a renderer bug must fail here (AssertionError), never reach the
    platform. Logged at debug level on that renderer module's logger."""
    for n, message in enumerate(messages):
        problems = check(message.payload)
        if problems:
            raise AssertionError(f"{platform}: message {n} of {part}: {problems}")
    logging.getLogger(f"{__package__}.{platform}").debug(
        "%s: %s of %s in %d message(s)", platform, part, issue.date, len(messages)
    )
    return list(messages)
