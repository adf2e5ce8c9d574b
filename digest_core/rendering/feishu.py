"""Feishu/Lark renderer: an Issue as custom-bot ``post`` (rich text) messages within 20 KB.

A ``post`` is lines of elements; ``text`` elements are shown literally (no markdown, no
HTML), ``a`` elements are links. https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot
(消息类型: 富文本 post). So issue text needs no escaping, except that a ``<at user_id="all">``
tag in it (which Feishu's ``text`` messages turn into a ping of everyone) is defused with a
zero-width space after its "<", and no ``at`` element is ever produced.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from digest_core.models import Issue, Section
from digest_core.rendering.plain import Entry, lede_text, nothing_notice, select
from digest_core.rendering.split import chunk_lines, chunk_text, flow
from digest_core.rendering.types import (
    Message,
    Part,
    RenderOptions,
    TextLimits,
    encode_body,
    web_url,
)
from digest_core.site.links import WEB_LINK_LABEL

log = logging.getLogger(__name__)


class Limits(TextLimits):
    """A custom bot's limits (https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot)."""

    #: "发送消息时，请求体的数据大小不能超过 20 KB" — read as 20,000 bytes (the stricter
    #: reading of "KB"; 注意事项)
    request_maxlen = 20_000
    unit = "bytes"
    #: what a signed request adds to the payload: ``"timestamp":"1700000000","sign":"<44>",``
    #: is 65 bytes; reserved generously
    sign_overhead = 100
    #: the payload (without timestamp and sign) of every message is at most this many bytes
    body_maxlen = request_maxlen - sign_overhead
    #: a text element is at most this many bytes of JSON (long paragraphs become several
    #: lines), so any one line fits a message with room for the title
    line_maxlen = 4_000


BODY_LIMIT = Limits.request_maxlen
SIGN_OVERHEAD = Limits.sign_overhead
PAYLOAD_LIMIT = Limits.body_maxlen
LINE_LIMIT = Limits.line_maxlen
LANGUAGE = "zh_cn"
QUESTION_PREFIX = "» 带着一个问题读："
SOURCE_LABEL = "来源 {n}"
ZWSP = "\u200b"
_AT_TAG = re.compile(r"<(?=\u200b|at)", re.IGNORECASE)

Element = dict[str, str]
Line = list[Element]


def defuse(text: str) -> str:
    """``text`` with a zero-width space after every ``<`` that starts ``at`` (or a zero-width
    space), so no ``<at …>`` tag survives; :func:`restore` inverts it."""
    return _AT_TAG.sub("<" + ZWSP, text)


def restore(text: str) -> str:
    """The inverse of :func:`defuse`."""
    return text.replace("<" + ZWSP, "<")


def json_len(text: str) -> int:
    """Bytes ``text`` takes inside a JSON string as we encode it (per character, so the
    length of a concatenation is the sum)."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` as Feishu custom-bot ``post`` payloads, in send order.

    Every message is titled masthead · date; lines: the lede, 【section】 labels, each item's
    title linked to its first source, its paragraphs, the reading question after "» ", further
    sources as 来源 n links. Items are packed in order, whole where they fit; a long paragraph
    is split at sentences. Each payload, signed, is within :data:`BODY_LIMIT` bytes. Of
    ``options`` only ``site_url`` counts: a first line "全文 / web" links to the web archive
    (a webhook has no buttons).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    title = defuse(f"{issue.masthead} · {issue.date.isoformat()}")
    units: list[list[Line]] = []
    web = web_url(options or RenderOptions(), issue, part, brief)
    if web is not None:
        units.append([[{"tag": "a", "text": WEB_LINK_LABEL, "href": web}]])
    if issue.lede and part in (Part.ALL, Part.TOC):
        units.append(_text_lines(lede_text(issue.lede)))
    if part is Part.TOC:
        units.extend(_toc(issue))
    else:
        entries = select(issue, part, brief)
        notice = nothing_notice(part)
        if not entries and notice:
            units.append(_text_lines(notice))
        previous: Section | None = None
        for entry in entries:
            units.append(_item(entry, label=entry.section is not previous))
            previous = entry.section
    groups = flow(units, lambda lines: len(encode_body(_payload(title, lines))) <= PAYLOAD_LIMIT)
    payloads = [_payload(title, lines) for lines in groups] or [_payload(title, [])]
    for n, payload in enumerate(payloads):
        problems = check_message(payload)
        if problems:  # a renderer bug must fail here, never reach Feishu
            raise AssertionError(f"feishu: message {n} of {part}: {problems}")
    log.debug("feishu: %s of %s in %d message(s)", part, issue.date, len(payloads))
    return [Message(p) for p in payloads]


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text (an alert, a status) as post messages, defused, split at line ends."""
    chunks = chunk_lines(text, LINE_LIMIT, lambda s: json_len(defuse(s)))
    units = [[[_text(c)]] for c in chunks]
    groups = flow(units, lambda lines: len(encode_body(_payload("", lines))) <= PAYLOAD_LIMIT)
    return [Message(_payload("", lines)) for lines in groups]


def preview(message: Message) -> str:
    """The title, then each line: text as shown, links as ``text <href>``."""
    post = message.payload["content"]["post"][LANGUAGE]
    out = [restore(post.get("title", ""))]
    for line in post["content"]:
        out.append(
            "".join(
                restore(e["text"]) + (f" <{e['href']}>" if e["tag"] == "a" else "") for e in line
            )
        )
    return "\n".join(out)


def check_message(payload: dict[str, Any]) -> list[str]:
    """Every way ``payload`` breaks Feishu's limits or our rules (empty when fine): signed body
    over BODY_LIMIT, a tag other than text/a, an ``<at`` tag or an @all in the text."""
    problems: list[str] = []
    size = len(encode_body(payload)) + SIGN_OVERHEAD
    if size > BODY_LIMIT:
        problems.append(f"signed body is {size} > {BODY_LIMIT} bytes")
    post = payload["content"]["post"][LANGUAGE]
    for line in post["content"]:
        for element in line:
            if element["tag"] not in ("text", "a"):
                problems.append(f"element tag {element['tag']!r}")
            if re.search(r"<at", element.get("text", ""), re.IGNORECASE):
                problems.append(f"live <at tag in {element['text'][:40]!r}")
    return problems


def _payload(title: str, lines: Sequence[Line]) -> dict[str, Any]:
    return {
        "msg_type": "post",
        "content": {"post": {LANGUAGE: {"title": title, "content": list(lines)}}},
    }


def _text(text: str) -> Element:
    return {"tag": "text", "text": defuse(text)}


def _text_lines(text: str) -> list[Line]:
    return [[_text(p)] for p in chunk_text(text, LINE_LIMIT, lambda s: json_len(defuse(s)))]


def _item(entry: Entry, *, label: bool) -> list[Line]:
    item = entry.item
    lines: list[Line] = []
    if label:
        lines.append([_text(f"【{entry.section.label}】")])
    title = (f"{entry.number}. " if entry.number is not None else "") + item.title
    linked = item.url is not None and json_len(defuse(title)) <= LINE_LIMIT
    if linked and item.url is not None:
        lines.append([{"tag": "a", "text": defuse(title), "href": item.url}])
    else:
        lines += _text_lines(title)
    for paragraph in item.paragraphs:
        lines += _text_lines(paragraph)
    if item.question:
        lines += _text_lines(QUESTION_PREFIX + item.question)
    for n, url in enumerate(item.links, start=1):
        if n > 1 or not linked:
            lines.append([{"tag": "a", "text": SOURCE_LABEL.format(n=n), "href": url}])
    return lines


def _toc(issue: Issue) -> list[list[Line]]:
    units: list[list[Line]] = []
    for entry in select(issue, Part.ALL):
        unit: list[Line] = []
        if entry.number in (None, 1):
            unit.append([_text(f"【{entry.section.label}】")])
        number = f"{entry.number}. " if entry.number is not None else ""
        unit += _text_lines(number + entry.item.title)
        units.append(unit)
    return units
