"""WeCom renderer: an Issue as group-robot ``markdown`` messages of at most 4096 bytes.

https://developer.work.weixin.qq.com/document/path/91770 (markdown类型: "markdown内容，最长不超过
4096个字节，必须是utf8编码"; ``<@userid>`` in the content mentions a member).
"""

from __future__ import annotations

from typing import Any

from digest_core.models import Issue
from digest_core.rendering.robots.markdown import stray_markup, visible
from digest_core.rendering.robots.texts import notice_texts, render_texts, utf8_len
from digest_core.rendering.types import Message, Part, RenderOptions, TextLimits, checked, web_url


class Limits(TextLimits):
    """A group robot's limits (https://developer.work.weixin.qq.com/document/path/91770)."""

    #: markdown.content, in UTF-8 bytes
    body_maxlen = 4096
    unit = "bytes"


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` as WeCom ``markdown`` payloads, in send order.

    The layout is :func:`~digest_core.rendering.robots.texts.render_texts`'s. Markdown messages
    take no
    ``mentioned_list``, and every "<" and "@" in the text is escaped/defused, so no
    ``<@userid>`` mention can come from issue text. Of ``options`` only ``site_url`` counts
    (a "全文 / web" link after the masthead).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    web = web_url(options or RenderOptions(), issue, part, brief)
    texts = render_texts(issue, part, brief, limit=Limits.body_maxlen, measure=utf8_len, web=web)
    return checked("wecom", issue, part, [Message(_payload(t)) for t in texts], check_message)


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as markdown messages, escaped, split at line ends."""
    return [
        Message(_payload(t)) for t in notice_texts(text, limit=Limits.body_maxlen, measure=utf8_len)
    ]


def preview(message: Message) -> str:
    """The content as a reader sees it (links as ``text <url>``)."""
    return visible(message.payload["markdown"]["content"], links=True)


def check_message(payload: dict[str, Any]) -> list[str]:
    """Every way ``payload`` breaks WeCom's limit or our rules (empty when fine)."""
    problems: list[str] = []
    content = payload["markdown"]["content"]
    if utf8_len(content) > Limits.body_maxlen:
        problems.append(f"content is {utf8_len(content)} > {Limits.body_maxlen} bytes")
    if set(payload) != {"msgtype", "markdown"} or set(payload["markdown"]) != {"content"}:
        problems.append(f"unexpected fields {sorted(payload)}")
    return problems


def live(payload: dict[str, Any]) -> list[str]:
    """Markup or mentions in the content that do not come from the renderer (tests)."""
    return stray_markup(payload["markdown"]["content"])


def _payload(content: str) -> dict[str, Any]:
    return {"msgtype": "markdown", "markdown": {"content": content}}
