"""Feishu/Lark renderer: an Issue as custom-bot ``post`` (rich text) messages within 20 KB, and
as the app bot's interactive cards (:func:`render_card`, :data:`CARDS`).

A ``post`` is lines of elements; ``text`` elements are shown literally (no markdown, no
HTML), ``a`` elements are links. https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot
(消息类型: 富文本 post). So issue text needs no escaping, except that a ``<at user_id="all">``
tag in it (which Feishu's ``text`` messages turn into a ping of everyone) is defused with a
zero-width space after its "<", and no ``at`` element is ever produced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from digest_core.models import Issue
from digest_core.rendering.plain import Entry, lede_text, number_prefix, part_units
from digest_core.rendering.split import chunk_lines, chunk_text, flow
from digest_core.rendering.types import (
    BUTTON_SECTIONS,
    Message,
    Part,
    RenderOptions,
    TextLimits,
    button_data,
    checked,
    encode_body,
    web_url,
)
from digest_core.site.links import WEB_LINK_LABEL


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
    is split at sentences. Each payload, signed, is within :attr:`Limits.request_maxlen`
    bytes. Of ``options`` only ``site_url`` counts: a first line "全文 / web" links to the web
    archive (a webhook has no buttons).

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
    units += part_units(issue, part, brief, item=_item, toc=_toc_entry, nothing=_text_lines)
    groups = flow(
        units, lambda lines: len(encode_body(_payload(title, lines))) <= Limits.body_maxlen
    )
    payloads = [_payload(title, lines) for lines in groups] or [_payload(title, [])]
    return checked("feishu", issue, part, [Message(p) for p in payloads], check_message)


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text (an alert, a status) as post messages, defused, split at line ends."""
    chunks = chunk_lines(text, Limits.line_maxlen, lambda s: json_len(defuse(s)))
    units = [[[_text(c)]] for c in chunks]
    groups = flow(units, lambda lines: len(encode_body(_payload("", lines))) <= Limits.body_maxlen)
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
    over :attr:`Limits.request_maxlen`, a tag other than text/a, an ``<at`` tag or an @all in
    the text."""
    problems: list[str] = []
    size = len(encode_body(payload)) + Limits.sign_overhead
    if size > Limits.request_maxlen:
        problems.append(f"signed body is {size} > {Limits.request_maxlen} bytes")
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
    return [[_text(p)] for p in chunk_text(text, Limits.line_maxlen, lambda s: json_len(defuse(s)))]


def _label(entry: Entry) -> Line:
    return [_text(f"【{entry.section.label}】")]


def _item(entry: Entry, label: bool) -> list[Line]:
    item = entry.item
    lines = [_label(entry)] if label else []
    title = number_prefix(entry) + item.title
    linked = item.url is not None and json_len(defuse(title)) <= Limits.line_maxlen
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


def _toc_entry(entry: Entry, label: bool) -> list[Line]:
    unit = [_label(entry)] if label else []
    return unit + _text_lines(number_prefix(entry) + entry.item.title)


# ---------------------------------------------------------------- interactive cards
#
# The app bot's messages: interactive cards (``msg_type`` "interactive", card JSON 1.0,
# https://open.feishu.cn/document/ukTMukTMukTM/uEjNwUjLxYDM14SM2ATN). Issue text goes only into
# ``plain_text`` elements, which Feishu shows literally (no markdown, no mentions), so it needs
# no escaping beyond :func:`defuse`; the one ``lark_md`` element per item holds only our
# labels and percent-quoted source URLs. Buttons carry an object value ``{"data": …}`` (the
# SDKs take only object values, "仅支持对象类型的卡片回传参数"), the same data as Telegram's
# callback data (``dg:DATE:section``, ``rd:…``, confirmations).


class CardLimits(TextLimits):
    """An app bot's interactive card: "the maximum size of the card and rich text message body
    is 30 KB", the request body (code 230025 of the im-v1 message pages' error table, as on
    https://open.larksuite.com/document/uAjLw4CM/ukTMukTMukTM/reference/im-v1/message/update;
    read as 30,000 bytes), which Feishu may count larger than sent ("if the message contains
    a large number of styles, the actual length … will be greater"), and a custom bot's 20 KB
    ("请求体的数据大小不能超过 20 KB", https://open.larkoffice.com/document/ukTMukTMukTM/
    ucTM5YjL3ETO24yNxkjN.md; :class:`Limits`). A card is measured as the send
    API's body, where the card is a JSON string inside JSON (its quotes escaped), which is
    larger than the webhook's, so one budget fits both."""

    #: the request body of the send API holding the card, in bytes (the stricter 20 KB)
    request_maxlen = 20_000
    unit = "bytes"
    #: what the body adds besides the card: receive_id (≤ 64), uuid (≤ 50), keys; reserved
    envelope_overhead = 300
    #: kept free in every card for the buttons an adapter adds to the last one
    button_reserve = 1_500
    #: elements per card: our ceiling (Feishu's documentation names none for card JSON 1.0)
    elements_max = 40
    #: a plain_text element's text, in bytes of JSON (long items become several)
    element_maxlen = 4_000
    #: buttons per action row (our choice: four fit a phone's width)
    row_max = 4
    #: the longest button data we make (Feishu documents no limit for a button's value; ours,
    #: so a confirmation's data stays as short as Telegram's would not have to be)
    button_data_maxlen = 200


CARD_TEMPLATE = "blue"
LINK_SEPARATOR = " · "


def card_body_size(card: dict[str, Any]) -> int:
    """Bytes of the send API's body for ``card`` (receive_id and uuid at their longest)."""
    content = json.dumps(card, ensure_ascii=False, separators=(",", ":"))
    body = {"receive_id": "x" * 64, "msg_type": "interactive", "content": content, "uuid": "u" * 50}
    return len(encode_body(body))


def _quote_url(url: str) -> str:
    """``url`` safe inside ``[label](url)``: parentheses, spaces and brackets percent-quoted."""
    return url.translate({ord("("): "%28", ord(")"): "%29", ord(" "): "%20",
                          ord("["): "%5B", ord("]"): "%5D"})  # fmt: skip


def _plain(text: str) -> dict[str, Any]:
    return {"tag": "div", "text": {"tag": "plain_text", "content": defuse(text)}}


def _links(links: Sequence[str]) -> dict[str, Any]:
    md = LINK_SEPARATOR.join(
        f"[{SOURCE_LABEL.format(n=n)}]({_quote_url(url)})" for n, url in enumerate(links, 1)
    )
    return {"tag": "div", "text": {"tag": "lark_md", "content": md}}


def _plain_blocks(text: str) -> list[dict[str, Any]]:
    return [_plain(c) for c in chunk_text(text, CardLimits.element_maxlen, json_len)]


def _card_item(entry: Entry, label: bool) -> list[dict[str, Any]]:
    item = entry.item
    out = [_plain(f"【{entry.section.label}】")] if label else []
    lines = [number_prefix(entry) + item.title, *item.paragraphs]
    if item.question:
        lines.append(QUESTION_PREFIX + item.question)
    out += _plain_blocks("\n".join(lines))
    if item.links:
        out.append(_links(item.links))
    return out


def _card(title: str, elements: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "config": {"wide_screen_mode": True},
        "header": {"title": {"tag": "plain_text", "content": title}, "template": CARD_TEMPLATE},
        "elements": list(elements),
    }


def _card_fits(title: str) -> Any:
    budget = CardLimits.request_maxlen - CardLimits.envelope_overhead - CardLimits.button_reserve

    def fits(units: Sequence[dict[str, Any]]) -> bool:
        return (
            len(units) <= CardLimits.elements_max and card_body_size(_card(title, units)) <= budget
        )

    return fits


def _cards(title: str, units: list[list[dict[str, Any]]]) -> list[Message]:
    groups = flow(units, _card_fits(title))
    cards = [_card(title, group) for group in groups] or [_card(title, [])]
    messages = [Message({"msg_type": "interactive", "card": c}) for c in cards]
    for n, m in enumerate(messages):
        problems = check_card(m.payload)
        if problems:  # a renderer bug must fail here, never reach Feishu
            raise AssertionError(f"feishu card {n}: {problems}")
    return messages


def render_card(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """``part`` of ``issue`` as interactive cards, in send order: titled masthead · date, the
    lede, 【section】 labels, each item's title, paragraphs and question as plain text, its
    sources as 来源 n links. With ``options.buttons`` the last card has a button per section
    the issue has (``dg:DATE:section``, as Telegram's); ``site_url`` adds a "全文 / web" link.

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    options = options or RenderOptions()
    title = defuse(f"{issue.masthead} · {issue.date.isoformat()}")
    units: list[list[dict[str, Any]]] = []
    web = web_url(options, issue, part, brief)
    if web is not None:
        md = f"[{WEB_LINK_LABEL}]({_quote_url(web)})"
        units.append([{"tag": "div", "text": {"tag": "lark_md", "content": md}}])
    if issue.lede and part in (Part.ALL, Part.TOC):
        units.append(_plain_blocks(lede_text(issue.lede)))
    body = part_units(
        issue, part, brief, item=_card_item, toc=_card_toc_entry, nothing=_plain_blocks
    )
    if part is Part.TOC:  # a card's table of contents is one unit: cut only where it must be
        body = [[element for entry in body for element in entry]]
    units += body
    messages = _cards(title, units)
    if options.buttons:
        messages[-1] = with_buttons(messages[-1], [section_buttons(issue)])
    return messages


def _card_toc_entry(entry: Entry, label: bool) -> list[dict[str, Any]]:
    lines = [f"【{entry.section.label}】"] if label else []
    return [_plain(line) for line in [*lines, number_prefix(entry) + entry.item.title]]


def section_buttons(issue: Issue) -> list[tuple[str, str]]:
    """(label, data) of a button per section ``issue`` has (``dg:DATE:section``)."""
    present = {section for section, _ in issue.items()}
    return [(s.label, button_data(issue.date, s)) for s in BUTTON_SECTIONS if s in present]


def with_buttons(message: Message, rows: Sequence[Sequence[tuple[str, str]]]) -> Message:
    """``message`` (a card) with ``rows`` of (label, data) buttons at its end, each row an
    action element of at most :attr:`CardLimits.row_max` buttons (longer rows wrap)."""
    payload = json.loads(json.dumps(message.payload))
    elements = payload["card"]["elements"]
    for row in rows:
        for start in range(0, len(row), CardLimits.row_max):
            actions = [
                {"tag": "button", "text": {"tag": "plain_text", "content": defuse(label)},
                 "type": "default", "value": {"data": data}}
                for label, data in row[start : start + CardLimits.row_max]
            ]  # fmt: skip
            elements.append({"tag": "action", "actions": actions})
    problems = check_card(payload, buttons=True)
    if problems:
        raise ValueError(f"feishu card with buttons: {problems}")
    return Message(payload)


def card_notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as cards of plain text (split at line ends), defused."""
    chunks = chunk_lines(text, CardLimits.element_maxlen, lambda s: json_len(defuse(s)))
    return _cards("AI 技术日报", [[_plain(c)] for c in chunks])


def card_preview(message: Message) -> str:
    """The title, then each element as shown: text, links as ``label <url>``, buttons as
    ``[label]``."""
    card = message.payload["card"]
    out = [restore(card["header"]["title"]["content"])]
    for element in card["elements"]:
        if element["tag"] == "div":
            content = element["text"]["content"]
            if element["text"]["tag"] == "lark_md":
                content = re.sub(r"\[([^\]]*)\]\(([^)]*)\)", r"\1 <\2>", content)
            out.append(restore(content))
        elif element["tag"] == "action":
            out.append(" ".join(f"[{restore(a['text']['content'])}]" for a in element["actions"]))
    return "\n".join(out)


def check_card(payload: dict[str, Any], *, buttons: bool = False) -> list[str]:
    """Every way the card ``payload`` breaks the limits above or our rules (empty when fine):
    the send API's body over :attr:`CardLimits.request_maxlen` (less the button reserve while
    ``buttons`` is false), too many elements, a live ``<at`` tag, issue text in markdown."""
    problems: list[str] = []
    card = payload["card"]
    limit = CardLimits.request_maxlen - CardLimits.envelope_overhead
    if not buttons:
        limit -= CardLimits.button_reserve
    size = card_body_size(card)
    if size > limit:
        problems.append(f"card body is {size} > {limit} bytes")
    elements = card["elements"]
    if len(elements) > CardLimits.elements_max + (8 if buttons else 0):
        problems.append(f"{len(elements)} elements")
    for element in elements:
        text = element.get("text", {})
        if re.search(r"<at", text.get("content", ""), re.IGNORECASE):
            problems.append(f"live <at tag in {text['content'][:40]!r}")
        if text.get("tag") == "lark_md" and not re.fullmatch(
            r"(\[[^\]\[]*\]\([^\s()]+\)( · )?)+", text["content"]
        ):
            problems.append(f"markdown holds more than links: {text['content'][:60]!r}")
    return problems


class Cards:
    """The app bot's renderer (the :class:`~digest_core.rendering.types.Renderer` its
    adapter declares as ``flavor``): interactive cards."""

    Limits = CardLimits

    def render(
        self,
        issue: Issue,
        part: Part = Part.ALL,
        *,
        brief: int | None = None,
        options: RenderOptions | None = None,
    ) -> list[Message]:
        return render_card(issue, part, brief=brief, options=options)

    def preview(self, message: Message) -> str:
        return card_preview(message) if "card" in message.payload else preview(message)

    def notice(self, text: str, *, mentions: bool = False) -> list[Message]:
        return card_notice(text, mentions=mentions)


#: the app bot's renderer
CARDS = Cards()
