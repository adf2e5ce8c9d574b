"""The readers' pages' shell: one small HTML page with strict headers (nothing loaded from
elsewhere, no framing, no referrer, never cached), and a one-button form."""

from __future__ import annotations

import html

from aiohttp import web

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
#: a link that is forged, expired, or no longer any reader's
INVALID = "链接无效 / Invalid link"


def page(title: str, body: str, *, status: int = 200) -> web.Response:
    """``body`` (HTML, escaped by the caller) under ``title`` (escaped here)."""
    text = (
        '<!doctype html><html lang="zh-CN"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{html.escape(title)}</title></head>"
        '<body style="font-family:sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem">'
        f"<h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return web.Response(
        text=text, status=status, content_type="text/html", charset="utf-8", headers=HEADERS
    )


def button(action: str, label: str) -> str:
    return (
        f'<form method="post" action="{html.escape(action)}">'
        f'<button type="submit">{html.escape(label)}</button></form>'
    )
