"""The renderers' output read back as a reader sees it, and Telegram's check of its HTML: the
inverses of their escapes, which only the tests need (a renderer never reads back what it wrote).
"""

from __future__ import annotations

from digest_core.rendering import markdown
from digest_core.rendering.html import Text, _check, _lex, parse
from digest_core.rendering.robots import markdown as robots_markdown
from digest_core.rendering.telegram import MENTION_BREAK


def check_html(html: str) -> None:
    """Validate ``html`` strictly against Telegram's HTML subset, as
    :func:`~digest_core.rendering.html.checked_visible_text` does.

    Every tag MUST be one of ``ALLOWED_TAGS`` with only its allowed attributes (``a`` needs a
    non-empty ``href``), tags MUST be properly nested and closed, links and quotes MUST NOT nest,
    and every ``<``, ``>``, ``&`` outside a tag MUST be escaped.

    Raises:
        HtmlError: what is wrong and where.
    """
    _check(_lex(html))


def visible_text(html: str) -> str:
    """The text a reader sees: tags stripped, entities decoded (what Telegram measures).

    Raises:
        HtmlError: ``html`` is lexically malformed (see :func:`~digest_core.rendering.html.parse`).
    """
    return "".join(ev.text for ev in parse(html) if isinstance(ev, Text))


def unmute_mentions(text: str) -> str:
    """The inverse of :func:`~digest_core.rendering.telegram.mute_mentions`: one
    ``MENTION_BREAK`` after each "@" removed."""
    return text.replace("@" + MENTION_BREAK, "@")


def unescape(text: str) -> str:
    """The inverse of Discord's :func:`~digest_core.rendering.markdown.escape` on its output:
    the original text."""
    return markdown.read(text, markup=False, links=False)


def robots_unescape(text: str) -> str:
    """The original text of the robots' :func:`~digest_core.rendering.robots.markdown.escape`."""
    return robots_markdown.visible(text, markup=False)
