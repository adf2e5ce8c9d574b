"""Rendering: pure functions from an Issue (or a part of it) to platform payloads that already fit.

Every renderer module (``telegram``, ``discord``, ``plain``) exposes::

    render(issue, part=Part.ALL, *, brief=None, options=RenderOptions()) -> list[Message]
    preview(message) -> str          # a human-readable view of one payload

A ``Message.payload`` is the exact JSON body the platform API receives, minus the destination
(the adapter adds ``chat_id`` for Telegram's ``sendMessage``; Discord's channel is in the URL).
Messages are returned in send order; each one is within every platform limit.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, cast

from digest_core.models import Issue, Section


class Flavor(StrEnum):
    """Which renderer a platform uses."""

    TELEGRAM = "telegram"
    DISCORD = "discord"
    PLAIN = "plain"


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


@dataclass(frozen=True)
class Message:
    """One message ready to send."""

    payload: dict[str, Any] = field(hash=False)


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


def render(
    issue: Issue,
    flavor: Flavor | str,
    part: Part | str = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` for ``flavor``.

    Raises:
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
        ValueError: ``part`` is BRIEF without ``brief``, or an unknown flavor/part.
    """
    return _renderer(flavor).render(
        issue, Part(part), brief=brief, options=options or RenderOptions()
    )


def preview(message: Message, flavor: Flavor | str) -> str:
    """A readable text view of one payload, for `digest-bot preview` and the console."""
    return _renderer(flavor).preview(message)


class _Renderer(Protocol):
    def render(
        self, issue: Issue, part: Part, *, brief: int | None, options: RenderOptions
    ) -> list[Message]: ...

    def preview(self, message: Message) -> str: ...


def _renderer(flavor: Flavor | str) -> _Renderer:
    from digest_core.rendering import discord, plain, telegram

    modules: dict[Flavor, _Renderer] = {
        Flavor.TELEGRAM: cast(_Renderer, telegram),
        Flavor.DISCORD: cast(_Renderer, discord),
        Flavor.PLAIN: cast(_Renderer, plain),
    }
    return modules[Flavor(flavor)]


def notice(text: str, flavor: Flavor | str, *, mentions: bool = False) -> list[Message]:
    """A short service text (help, an error, a status) as messages of ``flavor``, escaped,
    split at line ends to fit, never pinging anyone.

    Telegram ``@username`` mentions are muted unless ``mentions`` (for the bot's own texts
    that point at a username on purpose, never for text quoted from an issue).
    """
    from digest_core.rendering import html, markdown
    from digest_core.rendering.split import chunk_lines, utf16_len
    from digest_core.rendering.telegram import mute_mentions

    flavor = Flavor(flavor)
    if flavor is Flavor.TELEGRAM:
        # notices quote issue text (search hits): @username mentions are muted as in posts
        return [
            Message(
                {
                    "text": html.escape_text(chunk if mentions else mute_mentions(chunk)),
                    "parse_mode": "HTML",
                    "link_preview_options": {"is_disabled": True},
                }
            )
            for chunk in chunk_lines(text, NOTICE_LIMITS[flavor], utf16_len)
        ]
    if flavor is Flavor.DISCORD:
        return [
            Message({"content": markdown.escape(chunk), "allowed_mentions": {"parse": []}})
            for chunk in chunk_lines(text, NOTICE_LIMITS[flavor], len)
        ]
    return [Message({"text": chunk}) for chunk in chunk_lines(text, NOTICE_LIMITS[flavor], len)]


#: Notices are split below the platform limits so that escaping (which lengthens Discord
#: markdown, not Telegram's visible text) keeps them within: Telegram 4096 UTF-16 units of
#: visible text, Discord content 2000 characters after escaping (at most doubled).
NOTICE_LIMITS = {Flavor.TELEGRAM: 4000, Flavor.DISCORD: 950, Flavor.PLAIN: 4000}
