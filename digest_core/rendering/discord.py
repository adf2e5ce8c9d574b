"""Discord renderer: an Issue as create-message payloads, with embeds or as plain markdown."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from digest_core.models import Issue, Section
from digest_core.rendering.markdown import (
    code_span,
    defang,
    escape,
    link,
    pingable,
    safe_url,
    visible,
)
from digest_core.rendering.plain import (
    Block,
    Entry,
    lede_text,
    number_prefix,
    pack_blocks,
    part_units,
    select,
)
from digest_core.rendering.split import (
    chunk_lines,
    flow,
    hard_cut,
    pack,
    split_sentences,
    utf16_len,
)
from digest_core.rendering.types import (
    BUTTON_SECTIONS,
    Message,
    Part,
    RenderOptions,
    TextLimits,
    button_data,
    web_url,
)
from digest_core.site.links import WEB_LINK_LABEL

log = logging.getLogger(__name__)


class Limits(TextLimits):
    """Discord's limits, which discord.py checks none of (Discord answers 400, code 50035):
    https://discord.com/developers/docs/resources/message#create-message and
    https://discord.com/developers/docs/resources/message#embed-object-embed-limits (in
    "characters", counted here in UTF-16 code units: never fewer than code points)."""

    body_maxlen = 2000  # message content
    unit = "utf-16"
    title_maxlen = 256  # an embed's title
    embeds_per_message = 10
    embed_total_maxlen = 6000  # title + description + field names/values + footer + author
    embed_description_maxlen = 4096
    embed_footer_maxlen = 2048
    embed_author_maxlen = 256
    embed_fields = 25
    embed_field_name_maxlen = 256
    embed_field_value_maxlen = 1024
    action_rows_per_message = 5
    buttons_per_row = 5
    button_label_maxlen = 80
    custom_id_maxlen = 100
    #: an autocomplete answer's choices, and a choice's name (application command option
    #: choices: https://discord.com/developers/docs/interactions/application-commands)
    choices = 25
    choice_name_maxlen = 100
    #: a thread's name: 1-100 characters (discord-api-spec, CreateForumThreadRequest.name)
    thread_name_maxlen = 100
    #: a forum post carries at most 5 tags, a tag's name at most 20 characters
    #: (https://discord.com/developers/docs/resources/channel#forum-tag-object)
    forum_tags = 5
    forum_tag_name_maxlen = 20
    #: a service text is split at this many characters, so that escaping (at most doubling
    #: them) keeps a message within body_maxlen
    notice_maxlen = 950


# Component types and style, as discord.ComponentType.action_row / .button and
# discord.ButtonStyle.secondary (grey) number them.
COMPONENT_ACTION_ROW = 1
COMPONENT_BUTTON = 2
BUTTON_STYLE_SECONDARY = 2
# Discord documents its limits in "characters"; counting UTF-16 code units (as JavaScript does)
# is never less than counting code points, so a payload that fits here fits there.
measure = utf16_len

#: Embed colour per section (the left bar), as discord.Colour values.
SECTION_COLOURS: dict[Section, int] = {
    Section.HEADLINE: 0xE8590C,  # orange
    Section.BRIEFS: 0x1C7ED6,  # blue
    Section.CLASSIC: 0x7048E8,  # violet
}
#: What ends a truncated embed title (the full title then opens the description).
ELLIPSIS = "…"
#: A longer masthead is cut in footers, so title + description + footer always fit in 6000.
FOOTER_MASTHEAD_CHARS = 100
#: Footer suffix of the second and later embeds of one item.
CONTINUED = "（续）"
#: Before the reading question, which is set apart as a block quote.
QUESTION_PREFIX = "> 带着一个问题读："
#: Masked-link text of an item's second and later source links.
SOURCE_LABEL = "来源 {n}"
#: Introduces a source whose masked link cannot fit a message or description: its address
#: follows as inline code, cut over as many lines as it needs (see :func:`_source_blocks`).
LONG_SOURCE_LABEL = "来源 {n}（链接太长，地址如下）："
#: Every message pings nobody, whatever its text (discord.AllowedMentions.none()).
ALLOWED_MENTIONS: dict[str, list[str]] = {"parse": []}

Json = dict[str, Any]


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """Render ``part`` of ``issue`` as Discord create-message payloads, in send order.

    With ``options.embeds`` (the default) the first message's content holds the masthead, date
    and (for the whole issue) the lede; each item is one embed (title linked to its first
    source, paragraphs, the reading question as a quote, further sources as 来源 2 … links,
    a colour and a footer per section), or several when its text passes the description limit.
    Items are packed in order, whole where they fit, into as few messages as Discord's limits
    allow. Without embeds, and for ``Part.TOC``, messages are content only (see
    :func:`_markdown_unit`). All issue text is escaped (:mod:`.markdown`) and every payload
    carries ``allowed_mentions: {"parse": []}``. With ``options.buttons`` the last message has
    one row of buttons for the issue's sections, their custom ids from
    :func:`~digest_core.rendering.button_data`. With ``options.site_url`` the first line
    ends with a "全文 / web" masked link to the part's place in the web archive.

    A source link whose masked form cannot fit (a very long URL) is written as
    ``来源 n（链接太长，地址如下）：`` and its address as inline code over as many lines as needed.

    Every returned payload passes :func:`check_message`; render raises AssertionError if one
    does not (a renderer bug).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    options = options or RenderOptions()
    entries = [] if part is Part.TOC else select(issue, part, brief)
    web = web_url(options, issue, part, brief)
    if options.embeds and entries:
        payloads = _embed_messages(issue, part, entries, web)
    else:
        units = [
            _header(issue, part, web),
            *part_units(issue, part, brief, item=_markdown_unit, toc=_toc_unit, nothing=_notice),
        ]
        payloads = [{"content": c} for c in pack_blocks(units, Limits.body_maxlen, measure)]
    for payload in payloads:
        payload["allowed_mentions"] = dict(ALLOWED_MENTIONS)
    if options.buttons:
        payloads[-1]["components"] = [_buttons(issue)]
    for n, payload in enumerate(payloads):
        # a renderer bug must fail loudly here, never reach Discord as a 400
        problems = check_message(payload)
        if problems:
            raise AssertionError(f"discord: message {n} of {part} breaks a limit: {problems}")
    log.debug("discord: %s of %s in %d message(s)", part, issue.date, len(payloads))
    return [Message(p) for p in payloads]


def preview(message: Message) -> str:
    """A readable view of one payload: content, each embed, then the buttons as ``[label]``."""
    payload = message.payload
    out: list[str] = []
    if payload.get("content"):
        out.append(visible(payload["content"], links=True))
    for embed in payload.get("embeds", []):
        lines = ["┌──"]
        if "title" in embed:
            lines.append(visible(embed["title"]))
        if "url" in embed:
            lines.append(f"<{embed['url']}>")
        if "description" in embed:
            lines.append(visible(embed["description"], links=True))
        if "footer" in embed:
            lines.append(f"— {embed['footer']['text']}")
        out.append("\n│ ".join("\n".join(lines).split("\n")))
    labels = [
        f"[{button['label']}]"
        for row in payload.get("components", [])
        for button in row.get("components", [])
    ]
    if labels:
        out.append(" ".join(labels))
    return "\n".join(out)


def embed_chars(embed: Mapping[str, Any]) -> int:
    """The characters an embed counts towards a message's 6000: title, description, field
    names and values, footer text and author name."""
    texts = [embed.get("title", ""), embed.get("description", "")]
    texts.append(embed.get("footer", {}).get("text", ""))
    texts.append(embed.get("author", {}).get("name", ""))
    for f in embed.get("fields", []):
        texts += [f.get("name", ""), f.get("value", "")]
    return sum(measure(t) for t in texts)


def check_message(payload: Mapping[str, Any]) -> list[str]:
    """Every way ``payload`` breaks a Discord limit or our own rules (empty when it is fine).

    Discord's: content ≤ 2000; at least one of content, embeds, components; ≤ 10 embeds; title ≤
    256, description ≤ 4096, footer ≤ 2048, author ≤ 256, ≤ 25 fields of name ≤ 256 / value ≤
    1024, ≤ 6000 summed over all embeds; an embed url is http(s); ≤ 5 action rows of ≤ 5 buttons,
    label ≤ 80, custom_id 1–100 and unique. Ours: allowed_mentions is ``{"parse": []}`` and no
    text has a mention Discord would render.
    """
    problems: list[str] = []

    def over(what: str, text: Any, limit: int) -> None:
        if not isinstance(text, str):
            problems.append(f"{what} is not a string")
        elif measure(text) > limit:
            problems.append(f"{what} is {measure(text)} > {limit} characters")

    def mentions(what: str, text: str) -> None:
        for found in pingable(text):
            problems.append(f"{what} has a live mention {found!r}")

    content = payload.get("content", "")
    over("content", content, Limits.body_maxlen)
    if isinstance(content, str):
        mentions("content", content)
    embeds = payload.get("embeds", [])
    components = payload.get("components", [])
    if not (isinstance(content, str) and content.strip()) and not embeds and not components:
        problems.append("message is empty")
    if len(embeds) > Limits.embeds_per_message:
        problems.append(f"{len(embeds)} embeds > {Limits.embeds_per_message}")
    for i, embed in enumerate(embeds):
        at = f"embed {i}"
        if "title" in embed:
            over(f"{at} title", embed["title"], Limits.title_maxlen)
            mentions(f"{at} title", str(embed["title"]))
        if "description" in embed:
            over(f"{at} description", embed["description"], Limits.embed_description_maxlen)
            mentions(f"{at} description", str(embed["description"]))
        if "footer" in embed:
            over(f"{at} footer", embed["footer"].get("text"), Limits.embed_footer_maxlen)
        if "author" in embed:
            over(f"{at} author", embed["author"].get("name"), Limits.embed_author_maxlen)
        fields = embed.get("fields", [])
        if len(fields) > Limits.embed_fields:
            problems.append(f"{at} has {len(fields)} fields > {Limits.embed_fields}")
        for j, f in enumerate(fields):
            over(f"{at} field {j} name", f.get("name"), Limits.embed_field_name_maxlen)
            over(f"{at} field {j} value", f.get("value"), Limits.embed_field_value_maxlen)
            mentions(f"{at} field {j} value", str(f.get("value")))
        url = embed.get("url")
        if url is not None and not str(url).startswith(("http://", "https://")):
            problems.append(f"{at} url {url!r} is not http(s)")
        if not any(embed.get(k) for k in ("title", "description", "fields")):
            problems.append(f"{at} is empty")
    total = sum(embed_chars(e) for e in embeds)
    if total > Limits.embed_total_maxlen:
        problems.append(f"embeds total {total} > {Limits.embed_total_maxlen} characters")
    if len(components) > Limits.action_rows_per_message:
        problems.append(f"{len(components)} action rows > {Limits.action_rows_per_message}")
    ids: list[str] = []
    for i, row in enumerate(components):
        buttons = row.get("components", [])
        if (
            row.get("type") != COMPONENT_ACTION_ROW
            or not 1 <= len(buttons) <= Limits.buttons_per_row
        ):
            problems.append(
                f"row {i} is not an action row of 1–{Limits.buttons_per_row} components"
            )
        for button in buttons:
            over(f"row {i} button label", button.get("label"), Limits.button_label_maxlen)
            custom_id = button.get("custom_id", "")
            if not 1 <= len(custom_id) <= Limits.custom_id_maxlen:
                problems.append(
                    f"custom_id {custom_id!r} is not 1–{Limits.custom_id_maxlen} characters"
                )
            ids.append(custom_id)
    if len(set(ids)) != len(ids):
        problems.append("custom_ids are not unique")
    if payload.get("allowed_mentions") != ALLOWED_MENTIONS:
        problems.append(f"allowed_mentions is not {ALLOWED_MENTIONS}")
    return problems


# --- escaped, limit-sized pieces of text -----------------------------------------------------


def escaped_chunks(text: str, limit: int) -> list[str]:
    """``text`` escaped, in pieces of at most ``limit`` split at sentences when it must be.

    ``"".join(read(p, markup=False, links=False) for p in result) == text``.
    """
    esc = escape(text)
    if measure(esc) <= limit:
        return [esc]
    sizes: dict[str, int] = {}  # each sentence (or character) is escaped once to size it

    def escaped_size(piece: str) -> int:
        size = sizes.get(piece)
        if size is None:
            size = sizes[piece] = measure(escape(piece))
        return size

    pieces: list[str] = []
    for sentence in split_sentences(text):
        if escaped_size(sentence) <= limit:
            pieces.append(sentence)
        else:
            pieces += hard_cut(sentence, limit, escaped_size)
    out: list[str] = []
    for group in pack(pieces, limit, escaped_size):
        chunk = "".join(group)
        esc = escape(chunk)
        if measure(esc) <= limit:
            out.append(esc)
        else:  # escaping is not quite additive (a URL cut in two, "1." at a line start)
            out += escaped_chunks(chunk, limit - max(1, measure(esc) - limit))
    return out


def _md_blocks(
    sep: str, text: str, limit: int, *, prefix: str = "", later: str = "", bold: bool = False
) -> list[Block]:
    """``prefix`` + escaped ``text`` (bold if asked) as blocks within ``limit``; pieces after
    the first start with ``later``. Bold text too long for one block is bold in every piece."""
    esc = escape(text)
    if bold and measure(f"**{prefix}{esc}**") <= limit:
        return [(sep, f"**{prefix}{esc}**")]
    mark = "**" if bold else ""
    room = limit - max(measure(prefix), measure(later)) - 2 * len(mark)
    # the common case (it fits whole) without escaping the text a second time
    pieces = [esc] if measure(esc) <= room else escaped_chunks(text, room)
    return [
        (sep if i == 0 else "\n", f"{mark}{later if i else prefix}{p}{mark}")
        for i, p in enumerate(pieces)
    ]


def _title_blocks(
    sep: str, title: str, url: str | None, limit: int, *, prefix: str = "", bold: bool = True
) -> list[Block]:
    """A title as a masked link to ``url`` (``**[title](<url>)**``); when that cannot fit,
    the title as text and source 1 on its own line (see :func:`_source_blocks`)."""
    line = prefix + link(title, url)
    if bold:
        line = f"**{line}**"
    if measure(line) <= limit:
        return [(sep, line)]
    blocks = _md_blocks(sep, title, limit, prefix=prefix)
    if url:
        blocks += _source_blocks("\n", [(1, url)], limit)
    return blocks


def _masked_source(n: int, url: str) -> str:
    return f"[{SOURCE_LABEL.format(n=n)}](<{safe_url(url)}>)"


def _long_source(sep: str, n: int, url: str, limit: int) -> list[Block]:
    """Source ``n`` as text: a label line, then :func:`safe_url` of ``url`` as inline code cut
    into lines within ``limit``, of even length (nothing links to a part of the address)."""
    address = safe_url(url)
    room = limit - 2  # the backticks
    lines = -(-measure(address) // room)
    pieces = hard_cut(address, max(2, -(-measure(address) // lines)), measure)
    return [(sep, LONG_SOURCE_LABEL.format(n=n))] + [("\n", code_span(p)) for p in pieces]


def _source_blocks(sep: str, sources: Sequence[tuple[int, str]], limit: int) -> list[Block]:
    """Numbered sources as ``[来源 2](<url>) · [来源 3](<url>)`` lines within ``limit``, each
    line a block; one whose masked link alone passes ``limit`` as :func:`_long_source`."""
    blocks: list[Block] = []
    run: list[str] = []

    def flush() -> None:
        blocks.extend((sep, " · ".join(line)) for line in pack(run, limit, measure, sep=3))
        run.clear()

    for n, url in sources:
        masked = _masked_source(n, url)
        if measure(masked) <= limit:
            run.append(masked)
        else:
            flush()
            blocks += _long_source(sep, n, url, limit)
    flush()
    return blocks


def _later_sources(sep: str, links: Sequence[str], limit: int) -> list[Block]:
    """An item's links 2… (the first is the title's) as :func:`_source_blocks`."""
    return _source_blocks(sep, list(enumerate(links, start=1))[1:], limit)


def _header(issue: Issue, part: Part, web: str | None = None) -> list[Block]:
    """Masthead · date (· the web link), and the lede for the whole issue and the TOC."""
    blocks = _md_blocks("", issue.masthead, Limits.body_maxlen - 14, bold=True)
    last_sep, last = blocks[-1]
    blocks[-1] = (last_sep, f"{last} · {issue.date.isoformat()}")
    if web is not None:
        blocks.append((" · ", f"[{WEB_LINK_LABEL}](<{safe_url(web)}>)"))
    if issue.lede and part in (Part.ALL, Part.TOC):
        blocks += _md_blocks("\n", lede_text(issue.lede), Limits.body_maxlen)
    return blocks


# --- embeds ----------------------------------------------------------------------------------


def _embed_messages(
    issue: Issue, part: Part, entries: Sequence[Entry], web: str | None
) -> list[Json]:
    """Content-only messages for an oversized header, then items packed as embeds."""
    contents = pack_blocks([_header(issue, part, web)], Limits.body_maxlen, measure)
    units = [_item_embeds(issue, entry) for entry in entries]
    # flow asks about growing groups of the same embeds: size each one once (by identity, as
    # the embeds are dicts and all alive until this returns)
    sizes = {id(e): embed_chars(e) for unit in units for e in unit}

    def fits(group: list[Json]) -> bool:
        return (
            len(group) <= Limits.embeds_per_message
            and sum(sizes[id(e)] for e in group) <= Limits.embed_total_maxlen
        )

    groups = flow(units, fits)
    payloads: list[Json] = [{"content": c} for c in contents[:-1]]
    payloads.append({"content": contents[-1], "embeds": groups[0]})
    payloads += [{"embeds": group} for group in groups[1:]]
    return payloads


def _footer(issue: Issue, entry: Entry, *, continued: bool) -> str:
    label = entry.section.label
    if entry.number is not None:
        label += f" {entry.number}/{len(issue.briefs)}"
    if continued:
        label += CONTINUED
    masthead = issue.masthead
    if len(masthead) > FOOTER_MASTHEAD_CHARS:  # the full masthead is in the first content
        masthead = masthead[:FOOTER_MASTHEAD_CHARS] + ELLIPSIS
    return f"{label} · {defang(masthead)} · {issue.date.isoformat()}"


def _truncated_title(title: str) -> str:
    """The longest escaped prefix of ``title`` that fits the title limit with an ellipsis."""
    lo, hi = 0, len(title)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(escape(title[:mid].rstrip()) + ELLIPSIS) <= Limits.title_maxlen:
            lo = mid
        else:
            hi = mid - 1
    return escape(title[:lo].rstrip()) + ELLIPSIS


def _item_embeds(issue: Issue, entry: Entry) -> list[Json]:
    """One item as one embed, or several when the description would pass its limit.

    A title longer than the title limit is cut with "…" and given in full, in bold, at the top
    of the description (in bold pieces when it passes the description limit too, so the
    description still opens with the full title). Continuation embeds have no title and
    "（续）" in the footer.
    """
    item = entry.item
    limit = Limits.embed_description_maxlen
    title = escape(item.title)
    blocks: list[Block] = []
    if measure(title) > Limits.title_maxlen:
        title = _truncated_title(item.title)
        blocks += _md_blocks("\n\n", item.title, limit, bold=True)
    for paragraph in item.paragraphs:
        blocks += _md_blocks("\n\n", paragraph, limit)
    if item.question:
        blocks += _md_blocks("\n\n", item.question, limit, prefix=QUESTION_PREFIX, later="> ")
    blocks += _later_sources("\n\n", item.links, limit)
    descriptions = pack_blocks([blocks], limit, measure)
    colour = SECTION_COLOURS[entry.section]
    embeds: list[Json] = []
    for i, description in enumerate(descriptions):
        embed: Json = {}
        if i == 0:
            embed["title"] = title
            if item.url:
                embed["url"] = item.url
        embed["description"] = description
        embed["color"] = colour
        embed["footer"] = {"text": _footer(issue, entry, continued=i > 0)}
        embeds.append(embed)
    return embeds


# --- content-only messages -------------------------------------------------------------------


def _notice(text: str) -> list[Block]:
    return [("\n\n", text)]


def _markdown_unit(entry: Entry, label: bool) -> list[Block]:
    """The plain-markdown fallback: one unit per item.

    Layout: a bold 【section】 label before a section's first item (``label``); the title as a
    bold masked link ``**[title](<url>)**`` to its first source (briefs numbered
    ``**2. […](<…>)**``; the angle brackets stop link previews); the paragraphs; the question
    as a ``> `` quote; further sources as 来源 2 … links. Messages break between items, then
    between blocks, then at sentences (:func:`~digest_core.rendering.split.flow`).
    """
    limit = Limits.body_maxlen
    item = entry.item
    blocks: list[Block] = [("\n\n", f"**【{entry.section.label}】**")] if label else []
    sep = "\n" if blocks else "\n\n"
    blocks += _title_blocks(sep, item.title, item.url, limit, prefix=number_prefix(entry))
    for paragraph in item.paragraphs:
        blocks += _md_blocks("\n", paragraph, limit)
    if item.question:
        blocks += _md_blocks("\n", item.question, limit, prefix=QUESTION_PREFIX, later="> ")
    blocks += _later_sources("\n", item.links, limit)
    return blocks


def _toc_unit(entry: Entry, label: bool) -> list[Block]:
    """The table of contents: one line per item, each title linked to its first source (a
    headline's or classic's after its label, a brief's under its section's)."""
    header = f"**【{entry.section.label}】**"
    item = entry.item
    if entry.number is None:
        return _title_blocks(
            "\n\n", item.title, item.url, Limits.body_maxlen, prefix=header + " ", bold=False
        )
    unit: list[Block] = [("\n\n", header)] if label else []
    return unit + _title_blocks(
        "\n", item.title, item.url, Limits.body_maxlen, prefix=f"{entry.number}. ", bold=False
    )


def _buttons(issue: Issue) -> Json:
    """One action row: a grey button per section the issue has."""
    present = {section for section, _ in issue.items()}
    return {
        "type": COMPONENT_ACTION_ROW,
        "components": [
            {
                "type": COMPONENT_BUTTON,
                "style": BUTTON_STYLE_SECONDARY,
                "label": section.label,
                "custom_id": button_data(issue.date, section),
            }
            for section in BUTTON_SECTIONS
            if section in present
        ],
    }


def notice(text: str, *, mentions: bool = False) -> list[Message]:
    """A service text as escaped markdown that pings no one (``mentions`` has no effect:
    ``allowed_mentions`` is always empty)."""
    return [
        Message({"content": escape(chunk), "allowed_mentions": dict(ALLOWED_MENTIONS)})
        for chunk in chunk_lines(text, Limits.notice_maxlen, len)
    ]


def corrected(message: Message, note: str) -> Message:
    """``message`` with ``note`` (a correction mark) as a last line of small text in its
    content; the message as it is when that would break a limit."""
    content = str(message.payload.get("content") or "")
    line = f"-# {escape(note)}"
    payload = {**message.payload, "content": f"{content}\n{line}" if content else line}
    if check_message(payload):
        log.info("discord: no room for the correction mark in a message; edited without it")
        return message
    return Message(payload)
