"""Rendering: pure functions from an Issue (or a part of it) to platform payloads that already fit.

Every renderer (see :class:`Renderer`; the modules here are ones) exposes::

    render(issue, part=Part.ALL, *, brief=None, options=RenderOptions()) -> list[Message]
    preview(message) -> str          # a human-readable view of one payload

A ``Message.payload`` is the exact JSON body the platform API receives, minus the destination
(the adapter adds ``chat_id`` for Telegram's ``sendMessage``; Discord's channel is in the URL).
Messages are returned in send order; each one is within every platform limit.
"""

from __future__ import annotations

from typing import cast

from digest_core.models import Issue
from digest_core.rendering import plain
from digest_core.rendering.types import (
    BUTTON_PREFIX,
    BUTTON_SECTIONS,
    LinkMap,
    Message,
    Part,
    Renderer,
    RenderOptions,
    TextLimits,
    button_data,
    parse_button_data,
    with_links,
)

__all__ = [
    "BUTTON_PREFIX",
    "BUTTON_SECTIONS",
    "LinkMap",
    "Message",
    "Part",
    "RenderOptions",
    "Renderer",
    "TextLimits",
    "button_data",
    "notice",
    "parse_button_data",
    "plain_renderer",
    "preview",
    "render",
    "with_links",
]


def render(
    issue: Issue,
    flavor: Renderer,
    part: Part | str = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` with the renderer ``flavor`` (the one a platform declares).

    Raises:
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
        ValueError: ``part`` is BRIEF without ``brief``, or an unknown part.
    """
    options = options or RenderOptions()
    if options.links is not None:  # the counting redirects, in every renderer's output
        issue = with_links(issue, options.links)
    return flavor.render(issue, Part(part), brief=brief, options=options)


def preview(message: Message, flavor: Renderer) -> str:
    """A readable text view of one payload, for `digest-bot preview` and local output."""
    return flavor.preview(message)


def notice(text: str, flavor: Renderer, *, mentions: bool = False) -> list[Message]:
    """A short service text (help, an error, a status) as messages of ``flavor``, escaped,
    split at line ends to fit, never pinging anyone (see :meth:`Renderer.notice`)."""
    return flavor.notice(text, mentions=mentions)


def plain_renderer() -> Renderer:
    """The plain-text renderer (no markup), the default of requests that name none."""
    return cast(Renderer, plain)
