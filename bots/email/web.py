"""Readers' pages on the bot's HTTP server: subscribe (double opt-in), confirm, unsubscribe.

- ``GET /email/subscribe``: a form; ``POST`` (``address``) mails a signed, expiring
  confirmation link (:mod:`bots.email.signup`, as the chats' ``/email ADDRESS``). The answer
  is the same whether the address is new, subscribed already or refused, and requests for one
  address (or from one client) are limited, so the form tells nothing about who reads.
- ``GET /email/confirm?t=``: a page with one button; its ``POST`` subscribes. (Link scanners
  fetch GETs; only a person presses.)
- ``GET /email/unsubscribe?t=``: a page with one button; ``POST`` (RFC 8058 one-click, body
  ``List-Unsubscribe=One-Click``, or the button) unsubscribes at once, with no login.
- ``GET /email/preferences?t=``: the reader's delivery time, zone, format and follows; its
  ``POST`` stores them (:mod:`bots.email.preferences`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web

from bots import http
from bots.email import preferences, signup
from bots.email.pages import INVALID, button, page

if TYPE_CHECKING:
    from bots.email.adapter import EmailAdapter

log = logging.getLogger(__name__)
T = TypeVar("T")

SENT = (
    "如果地址有效，确认信已发出，请查收。 / "
    "If the address is valid, a confirmation mail is on its way."
)
_installed = False


async def _form(request: web.Request) -> web.Response:
    return page(
        "订阅 / Subscribe",
        '<form method="post"><label>Email <input type="email" name="address" required>'
        '</label> <select name="format"><option value="full">完整 / full</option>'
        '<option value="compact">精简 / compact</option>'
        '<option value="headline">只看重点 / headline</option></select> '
        '<button type="submit">订阅 / Subscribe</button></form>',
    )


def routes(app: web.Application, probe: http.Probe) -> None:
    """Add the readers' routes (installed when the email platform is configured); they answer
    503 until its adapter has started. Subscriptions go through the core's own ``/subscribe``
    and ``/unsubscribe`` commands on the adapter's Port, as a chat's would."""
    from bots.email.adapter import EmailAdapter

    def running() -> EmailAdapter:
        for started in probe.started:
            if isinstance(started, EmailAdapter) and started.port is not None:
                return started
        raise web.HTTPServiceUnavailable(text="not ready; try again in a minute")

    async def subscribe(request: web.Request) -> web.Response:
        data = await request.post()
        address = signup.checked(str(data.get("address", ""))[:320])
        if address is not None:
            await running().request_signup(
                address, fmt=str(data.get("format", "")), requester=f"web:{request.remote or ''}"
            )
        return page("订阅 / Subscribe", f"<p>{SENT}</p>")

    async def confirm(adapter: EmailAdapter, confirmed: tuple[str, str]) -> web.Response:
        address, fmt = confirmed
        rid = await adapter.book.add(address, at=adapter.clock.now())
        await adapter.subscription(rid, on=True, fmt=fmt)
        log.info("reader %s confirmed an email subscription", rid)
        return page("已订阅 / Subscribed", "<p>谢谢！下一期起发到你的邮箱。</p>")

    async def unsubscribe(adapter: EmailAdapter, rid: str) -> web.Response:
        await adapter.subscription(rid, on=False, via="link")
        return page("已退订 / Unsubscribed", "<p>你不会再收到本日报。</p>")

    app.router.add_get("/email/subscribe", _form)
    app.router.add_post("/email/subscribe", subscribe)
    _link(
        app,
        "/email/confirm",
        running,
        lambda adapter, token: adapter.tokens.confirmed(token),
        ("<p>链接已过期或无效。</p>", "确认订阅 / Confirm"),
        confirm,
    )
    _link(
        app,
        "/email/unsubscribe",
        running,
        lambda adapter, token: adapter.tokens.unsubscribed(token),
        ("<p>链接无效。</p>", "退订 / Unsubscribe"),
        unsubscribe,
    )
    preferences.routes(app, running)


def _link(
    app: web.Application,
    path: str,
    running: Callable[[], EmailAdapter],
    read: Callable[[EmailAdapter, str], T | None],
    texts: tuple[str, str],
    act: Callable[[EmailAdapter, T], Awaitable[web.Response]],
) -> None:
    """The routes of a mailed link ``path?t=TOKEN``: its ``GET`` a page with one button (link
    scanners fetch GETs; only a person presses), its ``POST`` what the token says (``act``).
    A token ``read`` finds nothing in gets the page saying so (``texts``: that page's text,
    then the button's label, which is also the page's title)."""
    gone, label = texts

    async def show(request: web.Request) -> web.Response:
        if read(running(), request.query.get("t", "")) is None:
            return page(INVALID, gone, status=400)
        return page(label, button(request.path_qs, label))

    async def press(request: web.Request) -> web.Response:
        adapter = running()
        value = read(adapter, request.query.get("t", ""))
        if value is None:
            return page(INVALID, gone, status=400)
        return await act(adapter, value)

    app.router.add_get(path, show)
    app.router.add_post(path, press)


def install() -> None:
    """Register :func:`routes` with the HTTP endpoint (once)."""
    global _installed
    if not _installed:
        http.add_routes(routes)
        _installed = True
