"""DingTalk renderer: an Issue as custom-robot ``markdown`` messages, escaped, within size.

https://open.dingtalk.com/document/orgapp/custom-robot-access (message types: markdown has a
``title``, shown in the notification and the chat list, and a ``text``).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import Any

from digest_core.models import Issue, Section
from digest_core.rendering.robots.markdown import ZWSP, stray_markup, visible
from digest_core.rendering.robots.texts import notice_texts, render_texts, utf8_len
from digest_core.rendering.types import (
    BUTTON_SECTIONS,
    Message,
    Part,
    RenderOptions,
    TextLimits,
    checked,
    encode_body,
    web_url,
)


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
    #: the most buttons an ActionCard of the app robot's send API takes (sampleActionCard2…5)
    actions_per_card = 5


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
    so a post never pings. ``options.site_url`` adds a "全文 / web" link after the masthead;
    ``options.buttons`` makes the last message an ActionCard with a button per section
    (:func:`action_card`: pressing one sends the section's command to the app robot).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    title = _title(f"{issue.masthead} · {issue.date.isoformat()}")
    web = web_url(options or RenderOptions(), issue, part, brief)
    texts = render_texts(issue, part, brief, limit=Limits.body_maxlen, measure=utf8_len, web=web)
    messages = [Message(_payload(title, t)) for t in texts]
    if (options or RenderOptions()).buttons:
        messages[-1] = action_card(messages[-1], section_actions(issue))
    return checked("dingtalk", issue, part, messages, check_message)


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as markdown messages, escaped, split at line ends."""
    return [
        Message(_payload("digest-bot", t))
        for t in notice_texts(text, limit=Limits.body_maxlen, measure=utf8_len)
    ]


def preview(message: Message) -> str:
    """The title, then the text as a reader sees it (links as ``text <url>``), then an
    ActionCard's buttons as ``[label]``."""
    md = message.payload.get("markdown") or message.payload["actionCard"]
    title = str(md["title"]).replace("@" + ZWSP, "@")
    buttons = [f"[{b['title']}]" for b in md.get("btns", [])]
    return (
        title
        + "\n"
        + visible(md["text"], links=True)
        + ("\n" + " ".join(buttons) if buttons else "")
    )


#: the link that makes the DingTalk client send ``content`` in the chat as the reader
#: (the 消息链接 ``dtmd://dingtalkclient/sendMessage``; as developers use it in robots'
#: markdown and ActionCards, not on DingTalk's own pages)
SEND_MESSAGE_LINK = "dtmd://dingtalkclient/sendMessage?content="


def section_actions(issue: Issue) -> list[tuple[str, str]]:
    """(label, command) of a button per section ``issue`` has: ``/classic 2026-11-27``."""
    present = {section for section, _ in issue.items()}
    return [
        (s.label, f"/{s.value} {issue.date.isoformat()}")
        for s in BUTTON_SECTIONS
        if s in present and s in (Section.HEADLINE, Section.BRIEFS, Section.CLASSIC)
    ]


def action_card(message: Message, buttons: Sequence[tuple[str, str]]) -> Message:
    """``message`` (markdown) as an ActionCard whose buttons send their commands (at most
    :attr:`Limits.actions_per_card`; none: the message unchanged)."""
    buttons = list(buttons)[: Limits.actions_per_card]
    if not buttons or "markdown" not in message.payload:
        return message
    md = message.payload["markdown"]
    btns = [
        {
            "title": _title(label),
            "actionURL": SEND_MESSAGE_LINK + urllib.parse.quote(command, safe=""),
        }
        for label, command in buttons
    ]
    card = {"title": md["title"], "text": md["text"], "btnOrientation": "1", "btns": btns}
    return Message({"msgtype": "actionCard", "actionCard": card, "at": {"isAtAll": False}})


def as_markdown(message: Message) -> Message:
    """An ActionCard back as plain markdown (where its buttons could not work)."""
    card = message.payload.get("actionCard")
    if card is None:
        return message
    return Message(_payload(card["title"], card["text"]))


def check_message(payload: dict[str, Any]) -> list[str]:
    """Every way ``payload`` breaks the limits above or our rules (empty when fine)."""
    problems: list[str] = []
    md = payload.get("markdown") or payload["actionCard"]
    if utf8_len(md["text"]) > Limits.body_maxlen:
        problems.append(f"text is {utf8_len(md['text'])} > {Limits.body_maxlen} bytes")
    if len(md["title"]) > Limits.title_maxlen:
        problems.append(f"title is {len(md['title'])} > {Limits.title_maxlen} characters")
    if len(encode_body(payload)) > Limits.request_maxlen:
        problems.append(f"body is over {Limits.request_maxlen} bytes")
    if payload.get("at") != {"isAtAll": False}:
        problems.append(f"at is {payload.get('at')!r}")
    if "@" in md["title"].replace("@" + ZWSP, ""):
        problems.append("live @ in the title")
    return problems


def live(payload: dict[str, Any]) -> list[str]:
    """Markup or mentions in the text that do not come from the renderer (tests)."""
    return stray_markup((payload.get("markdown") or payload["actionCard"])["text"])


def _title(text: str) -> str:
    """``text`` with every "@" defused, cut to :attr:`Limits.title_maxlen` characters (never
    between an "@" and its zero-width space)."""
    raw = text[: Limits.title_maxlen]
    while len(raw.replace("@", "@" + ZWSP)) > Limits.title_maxlen:
        raw = raw[:-1]
    return raw.replace("@", "@" + ZWSP)


def _payload(title: str, text: str) -> dict[str, Any]:
    return {
        "msgtype": "markdown",
        "markdown": {"title": title, "text": text},
        "at": {"isAtAll": False},
    }
