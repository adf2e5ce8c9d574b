"""DingTalk renderer: an Issue as custom-robot ``markdown`` messages, escaped, within size.

https://open.dingtalk.com/document/orgapp/custom-robot-access (message types: markdown has a
``title``, shown in the notification and the chat list, and a ``text``).
"""

from __future__ import annotations

import logging
from typing import Any

from digest_core.models import Issue
from digest_core.rendering.robots.markdown import ZWSP, stray_markup, visible
from digest_core.rendering.robots.texts import notice_texts, render_texts, utf8_len
from digest_core.rendering.types import (
    Message,
    Part,
    RenderOptions,
    TextLimits,
    encode_body,
    web_url,
)

log = logging.getLogger(__name__)


class Limits(TextLimits):
    """DingTalk documents no size limit for a custom robot's markdown. Its chat-message API
    caps markdown at 5000 and a title at 64 (error 34016, https://open.dingtalk.com/document/
    orgapp/server-api-error-codes-1), and developers report errcode 460101 "message too long,
    exceed 20000 bytes" from the robot — neither verified for the robot. We stay under both
    readings."""

    #: the markdown text of a message, in UTF-8 bytes (so also in characters)
    body_maxlen = 5_000
    unit = "bytes"
    #: the title, in characters
    title_maxlen = 64
    #: the whole request body, in bytes (the 460101 reading)
    request_maxlen = 20_000


TEXT_LIMIT = Limits.body_maxlen
TITLE_LIMIT = Limits.title_maxlen
BODY_LIMIT = Limits.request_maxlen


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` as DingTalk ``markdown`` payloads, in send order.

    The layout is :func:`~digest_core.rendering.robots.texts.render_texts`'s; the title is
    masthead · date.
    ``at`` is ``{"isAtAll": false}`` and names nobody, and every "@" in the text is defused,
    so a post never pings. Of ``options`` only ``site_url`` counts (a "全文 / web" link
    after the masthead).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    title = _title(f"{issue.masthead} · {issue.date.isoformat()}")
    web = web_url(options or RenderOptions(), issue, part, brief)
    texts = render_texts(issue, part, brief, limit=TEXT_LIMIT, measure=utf8_len, web=web)
    messages = [Message(_payload(title, t)) for t in texts]
    for n, m in enumerate(messages):
        problems = check_message(m.payload)
        if problems:
            raise AssertionError(f"dingtalk: message {n} of {part}: {problems}")
    log.debug("dingtalk: %s of %s in %d message(s)", part, issue.date, len(messages))
    return messages


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as markdown messages, escaped, split at line ends."""
    return [
        Message(_payload("digest-bot", t))
        for t in notice_texts(text, limit=TEXT_LIMIT, measure=utf8_len)
    ]


def preview(message: Message) -> str:
    """The title, then the text as a reader sees it (links as ``text <url>``)."""
    md = message.payload["markdown"]
    title = str(md["title"]).replace("@" + ZWSP, "@")
    return title + "\n" + visible(md["text"], links=True)


def check_message(payload: dict[str, Any]) -> list[str]:
    """Every way ``payload`` breaks the limits above or our rules (empty when fine)."""
    problems: list[str] = []
    md = payload["markdown"]
    if utf8_len(md["text"]) > TEXT_LIMIT:
        problems.append(f"text is {utf8_len(md['text'])} > {TEXT_LIMIT} bytes")
    if len(md["title"]) > TITLE_LIMIT:
        problems.append(f"title is {len(md['title'])} > {TITLE_LIMIT} characters")
    if len(encode_body(payload)) > BODY_LIMIT:
        problems.append(f"body is over {BODY_LIMIT} bytes")
    if payload.get("at") != {"isAtAll": False}:
        problems.append(f"at is {payload.get('at')!r}")
    if "@" in md["title"].replace("@" + ZWSP, ""):
        problems.append("live @ in the title")
    return problems


def live(payload: dict[str, Any]) -> list[str]:
    """Markup or mentions in the text that do not come from the renderer (tests)."""
    return stray_markup(payload["markdown"]["text"])


def _title(text: str) -> str:
    """``text`` with every "@" defused, cut to TITLE_LIMIT characters (never between an "@"
    and its zero-width space)."""
    raw = text[:TITLE_LIMIT]
    while len(raw.replace("@", "@" + ZWSP)) > TITLE_LIMIT:
        raw = raw[:-1]
    return raw.replace("@", "@" + ZWSP)


def _payload(title: str, text: str) -> dict[str, Any]:
    return {
        "msgtype": "markdown",
        "markdown": {"title": title, "text": text},
        "at": {"isAtAll": False},
    }
