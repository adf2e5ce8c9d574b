"""The email renderer: one issue as one message of a subject, a plain-text part and an HTML part.

The payload is ``{"subject": str, "text": str, "html": str}``, the same for every reader: what
differs per reader (the unsubscribe and preferences links) is :data:`UNSUBSCRIBE_MARKER` and
:data:`PREFERENCES_MARKER` in both parts, which the sending adapter replaces: the first with the
reader's unsubscribe URL, the second with :func:`preferences_text` / :func:`preferences_html`
of the reader's preferences URL (or "" where the bot serves no pages). Both stand at the end of
each part, so the adapter encodes what comes before them once for every reader.

The text part is the core's plain renderer's messages joined; the HTML part is the web
archive's issue body (``site/templates/item.html.j2``) in ``mail.html.j2``, its styles inlined
with ``css-inline`` (kept in ``<style>`` too, for the dark scheme's media query), loading
nothing remote: no fonts, scripts or images.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from digest_core.models import QUESTION_MARKER, Issue
from digest_core.rendering import plain
from digest_core.rendering.types import Message, Part, RenderOptions, TextLimits
from digest_core.site.links import WEB_LINK_LABEL, issue_url

log = logging.getLogger(__name__)


class Limits(TextLimits):
    """Mail's limits of what this module renders (the adapter's ``bots/email/mime.py`` writes
    the bytes within the line limits)."""

    #: The HTML part, in bytes of UTF-8: Gmail shows a message whose HTML passes about 102 KB
    #: cut off behind "[Message clipped] View entire message" (no Google document states the
    #: figure; the mail testers measure it, e.g.
    #: https://www.emailonacid.com/blog/article/email-development/gmail-clipping/). Mail itself
    #: sets no length; an issue past this is still sent whole, with a warning in the log.
    body_maxlen = 102_000
    unit = "bytes"
    #: The subject, in characters: one header line is at most 998 characters and SHOULD be at
    #: most 78 (RFC 5322 section 2.1.1); 78 less ``Subject: `` (9) is 69, so an ASCII subject
    #: is never folded, and the longest of ours (``12月31日 · `` and a headline cut at
    #: :data:`SUBJECT_HEADLINE`) is exactly 69.
    title_maxlen = 69
    #: A line of the message, in characters without its CRLF (RFC 5322 section 2.1.1; RFC 5321
    #: section 4.5.3.1.6: 1000 with the CRLF): the adapter sends the parts base64-encoded, in
    #: lines of :attr:`encoded_line_maxlen`, so no text line reaches the wire as it is.
    line_maxlen = 998
    #: A base64 body line (RFC 2045 section 6.8: "no more than 76 characters")
    encoded_line_maxlen = 76


#: the longest date before a subject's headline: ``12月31日 · ``
_SUBJECT_DATE = 9
#: Stands for the reader's own unsubscribe URL in both parts; the adapter replaces it. Made of
#: characters no escaping changes, and no issue text can hold it (it is not a web link).
UNSUBSCRIBE_MARKER = "urn:x-digest:unsubscribe"
#: Stands for the reader's preferences link, label and all (see :func:`preferences_text`):
#: made like :data:`UNSUBSCRIBE_MARKER`.
PREFERENCES_MARKER = "urn:x-digest:preferences"
#: The subject's longest headline, in characters (the subject within Limits.title_maxlen).
SUBJECT_HEADLINE = Limits.title_maxlen - _SUBJECT_DATE
FOOTER = "你收到这封信是因为订阅了本日报。 / You get this because you subscribed."
UNSUBSCRIBE_LABEL = "退订 / Unsubscribe"
PREFERENCES_LABEL = "设置 / Preferences"
#: what css-inline puts on every link of ``mail.html.j2`` (its ``a`` rule)
_LINK_STYLE = "color: #0b5cad;"
#: the plain-text part's last lines: the reader's two links
TEXT_FOOTER = f"--\n{FOOTER}\n{UNSUBSCRIBE_LABEL}: {UNSUBSCRIBE_MARKER}{PREFERENCES_MARKER}\n"
_WEEKDAYS = "一二三四五六日"
#: what may never reach the HTML part: anything loaded from elsewhere
_REMOTE = re.compile(r"<(script|link|img|iframe)\b|@import|url\(", re.IGNORECASE)


def subject(issue: Issue) -> str:
    """``11月27日 · <headline>``: the date and the headline (cut at SUBJECT_HEADLINE with …)."""
    title = issue.headline.title
    if len(title) > SUBJECT_HEADLINE:
        title = title[: SUBJECT_HEADLINE - 1] + "…"
    return f"{issue.date.month}月{issue.date.day}日 · {title}"


def long_date(issue: Issue) -> str:
    d = issue.date
    return f"{d.year}年{d.month}月{d.day}日 星期{_WEEKDAYS[d.weekday()]}"


@functools.cache
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("digest_core.site", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals["question_marker"] = QUESTION_MARKER
    return env.get_template("mail.html.j2")


@functools.cache
def _inliner() -> Any:
    import css_inline

    # the <style> stays: the dark scheme is a media query, which no inline style can hold
    return css_inline.CSSInliner(keep_style_tags=True, load_remote_stylesheets=False)


def html_part(issue: Issue, *, site_url: str | None, part: Part = Part.ALL) -> str:
    """The HTML part of ``issue``: the archive's markup with inlined styles. ``part``: the
    whole issue (ALL, and the parts a mail is not made of), the headline alone (HEADLINE), or
    the headline and the briefs' titles linked to the issue's page (TOC: the compact format).

    Raises:
        AssertionError: the result would load something remote (a renderer bug).
    """
    page = issue_url(site_url, issue.date) if site_url else ""
    titles: list[str] = []
    shown = issue
    if part in (Part.HEADLINE, Part.TOC):
        shown = issue.model_copy(update={"briefs": (), "classic": None})
        if part is Part.TOC:
            titles = [b.title for b in issue.briefs]
    html = _template().render(
        issue=shown,
        titles=titles,
        subject=subject(issue),
        long_date=long_date(issue),
        lang=_lang(issue),
        page=page,
        web_label=WEB_LINK_LABEL,
        footer=FOOTER,
        unsubscribe_label=UNSUBSCRIBE_LABEL,
        unsubscribe_marker=UNSUBSCRIBE_MARKER,
        preferences_marker=PREFERENCES_MARKER,
    )
    inlined = str(_inliner().inline(html))
    if _REMOTE.search(inlined):
        raise AssertionError("the HTML part would load something remote")
    return inlined


def text_part(issue: Issue, part: Part, *, brief: int | None, options: RenderOptions) -> str:
    """The plain-text part: the plain renderer's messages in one text, and the footer."""
    messages = plain.render(issue, part, brief=brief, options=options)
    texts = [str(m.payload["text"]) for m in messages]
    return "\n\n".join(texts) + "\n\n" + TEXT_FOOTER


def preferences_text(url: str) -> str:
    """What :data:`PREFERENCES_MARKER` becomes in the text part: a line with ``url``."""
    return f"\n{PREFERENCES_LABEL}: {url}"


def preferences_html(url: str) -> str:
    """What :data:`PREFERENCES_MARKER` becomes in the HTML part: a link to ``url`` (an
    attribute's text: escaped by the caller) beside the unsubscribe link, its colour inlined
    as the inliner does the others' (``mail.html.j2``'s ``a``; its dark scheme overrides it)."""
    return f' · <a href="{url}" style="{_LINK_STYLE}">{PREFERENCES_LABEL}</a>'


def render(
    issue: Issue,
    part: Part = Part.ALL,
    *,
    brief: int | None = None,
    options: RenderOptions | None = None,
) -> list[Message]:
    """``part`` of ``issue`` as one message ``{"subject", "text", "html"}``.

    Both parts show ``part``: the whole issue, the headline (a reader's "headline" format) or
    the compact table of contents (see :func:`html_part`).
    Of ``options`` only ``site_url`` counts (the issue's page linked in both parts).

    Raises:
        ValueError: ``part`` is BRIEF and ``brief`` is None.
        IndexError: ``part`` is BRIEF and the issue has no brief number ``brief``.
    """
    part = Part(part)
    options = options or RenderOptions()
    payload = {
        "subject": subject(issue),
        "text": text_part(issue, part, brief=brief, options=options),
        "html": html_part(issue, site_url=options.site_url, part=part),
    }
    size = len(payload["html"].encode("utf-8"))
    log.debug("email: %s of %s rendered (%d bytes of HTML)", part, issue.date, size)
    if size > Limits.body_maxlen:
        log.warning(
            "email: the HTML part of %s of %s is %d bytes, over %d: Gmail shows it clipped "
            '(readers follow "View entire message" or the issue\'s page)',
            part,
            issue.date,
            size,
            Limits.body_maxlen,
        )
    return [Message(payload)]


def preview(message: Message) -> str:
    """The subject and the text part."""
    return f"Subject: {message.payload['subject']}\n\n{message.payload['text']}"


def notice(text: str, *, mentions: bool = False, footer: bool = True) -> list[Message]:
    """A service text (a follow message, a correction notice) as one text-only message whose
    subject is its first line; with ``footer`` (a text to a reader), the reader's unsubscribe
    and preferences links after it (a confirmation request, to an address not subscribed
    yet, has none)."""
    first = text.strip().splitlines()[0] if text.strip() else "通知 / Notice"
    if len(first) > Limits.title_maxlen:
        first = first[: Limits.title_maxlen - 1] + "…"
    body = f"{text.rstrip()}\n\n{TEXT_FOOTER}" if footer else text
    return [Message({"subject": first, "text": body, "html": ""})]


def _lang(issue: Issue) -> str:
    """``zh-CN``, or ``en`` for an issue whose masthead and headline hold no Chinese."""
    text = issue.masthead + issue.headline.title
    return "zh-CN" if any("\u3400" <= c <= "\u9fff" for c in text) else "en"
