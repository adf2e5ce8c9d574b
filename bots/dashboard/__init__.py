"""The editor's dashboard on the bot's HTTP endpoint (``[http] admin = true``): ``/admin/``.

Pages: **Today** (the next issue's readiness, publish time, each platform's preview, and the
chat commands' buttons: approve, hold, publish now, repost to all or one target, correct),
**Deliveries** (each platform's and target's parts of the day's latest delivery, live: the
page polls ``deliveries.json``; 429s and retries; a timeline of sends per second against
the platform's limit), **Audience**, **Stories** and the **audit log** (filtered by who, what
and day, paged). The core answers each page and runs each button as its chat command
(:class:`digest_core.service.dashboard.Dashboard`); this module is the web side: templates
(Jinja2, every text escaped), charts (:mod:`bots.dashboard.charts`), access
(:mod:`bots.dashboard.auth`). Nothing under ``/admin/`` but the login page and its style
sheet answers without a session; every POST needs the session's CSRF token.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from jinja2 import Environment, PackageLoader

from bots.dashboard.auth import (
    COOKIE,
    NAME,
    PATH,
    SESSION_KEY,
    Access,
    Session,
    TelegramLogin,
    headers,
    same_origin,
)
from digest_core.clock import zoned_text
from digest_core.errors import ConfigError

if TYPE_CHECKING:
    from bots.http import Probe, RouteInstaller
    from digest_core.service.dashboard import Dashboard
    from digest_core.settings import Settings

log = logging.getLogger(__name__)

_LOGIN_COOKIE = "digest_login"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: paths answered without a session
_OPEN = {
    PATH + "login",
    PATH + "login/telegram",
    PATH + "static/style.css",
    PATH + "static/favicon.svg",
}
_STATIC = {
    "style.css": "text/css",
    "deliveries.js": "text/javascript",
    "favicon.svg": "image/svg+xml",
}


def endpoint_routes(settings: Settings) -> list[RouteInstaller]:
    """What ``[http] admin = true`` adds to the endpoint (empty when off).

    Raises:
        ConfigError: no password (or an unreadable password file).
    """
    if not settings.http.admin:
        return []
    password = settings.http.resolved_admin_password()
    if password is None:
        raise ConfigError("[http] admin needs a password", key="http.admin_password")
    access = Access(password, hours=settings.http.session_hours)
    telegram = telegram_login(settings) if _wants_telegram_login(settings) else None

    def install(app: web.Application, probe: Probe) -> None:
        Pages(app, probe, access, telegram).install()
        log.info("serving the editor's dashboard at %s", PATH)

    return [install]


def _wants_telegram_login(settings: Settings) -> bool:
    """``[telegram] dashboard_login`` (False where the Telegram bot is not installed)."""
    try:
        section = settings.platform("telegram")
    except KeyError:
        return False
    return bool(getattr(section, "dashboard_login", False))


def telegram_login(settings: Settings) -> TelegramLogin:
    """``[telegram] dashboard_login``'s check, of ``[telegram]``'s token and admins.

    Raises:
        ConfigError: no Telegram bot, token or admins.
    """
    try:
        section = settings.platform("telegram")
    except KeyError:
        raise ConfigError(
            "[telegram] dashboard_login needs the Telegram bot", key="telegram"
        ) from None
    token = getattr(section, "resolved_token", lambda: None)()
    admins = frozenset(int(a) for a in getattr(section, "admins", ()))
    if token is None or not admins:
        raise ConfigError(
            "[telegram] dashboard_login needs [telegram] token and admins",
            key="telegram.admins",
        )
    return TelegramLogin(token.get_secret_value(), admins)


class Pages:
    """The dashboard's routes on one endpoint."""

    def __init__(
        self,
        app: web.Application,
        probe: Probe,
        access: Access,
        telegram: TelegramLogin | None = None,
    ) -> None:
        self.app = app
        self.probe = probe
        self.access = access
        self.telegram = telegram
        self.env = Environment(
            loader=PackageLoader("bots.dashboard", "files/templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["zoned"] = zoned_text

    @property
    def dashboard(self) -> Dashboard:
        return self.probe.service.dashboard

    def install(self) -> None:
        from bots.dashboard import views

        self.app.middlewares.append(self._guard)
        r = self.app.router
        r.add_get(PATH.rstrip("/"), self._home)
        r.add_get(PATH, self._home)
        r.add_get(PATH + "login", self._login_page)
        r.add_post(PATH + "login", self._login)
        r.add_get(PATH + "login/telegram", self._telegram_login)
        r.add_post(PATH + "logout", self._logout)
        r.add_get(PATH + "static/{name}", self._static)
        views.install(self)

    # ------------------------------------------------------------ access

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Under ``/admin/``: a session for everything but the login page; the session's CSRF
        token and a same-origin request for every POST."""
        path = request.path
        if not (path + "/").startswith(PATH) or path in _OPEN:
            return await handler(request)
        session = self.access.session(request.cookies.get(COOKIE))
        if session is None:
            if request.method in ("GET", "HEAD") and not path.endswith((".json", ".svg")):
                raise web.HTTPSeeOther(PATH + "login", headers=headers())
            raise web.HTTPUnauthorized(text="请先登录 / log in first\n", headers=headers())
        if request.method not in ("GET", "HEAD"):
            given = request.headers.get("X-CSRF-Token")
            if given is None and request.content_type == "application/x-www-form-urlencoded":
                given = str((await request.post()).get("csrf", "")) or None
            if not self.access.csrf_ok(session, given) or not same_origin(request):
                log.warning(
                    "dashboard: a %s %s without its CSRF token refused", request.method, path
                )
                raise web.HTTPForbidden(text="CSRF 校验失败 / bad CSRF token\n", headers=headers())
        request[SESSION_KEY] = session
        return await handler(request)

    async def _home(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(PATH + "today", headers=headers())

    async def _login_page(
        self, request: web.Request, *, problem: str = "", status: int = 200
    ) -> web.Response:
        token = secrets.token_urlsafe(18)
        bot = self._telegram_bot()
        response = await self.page(
            "login.html.j2", None, status=status, token=token, problem=problem,
            telegram_bot=bot, telegram_url=f"{request.url.origin()}{PATH}login/telegram",
            widget=bool(bot),
        )  # fmt: skip
        response.set_cookie(
            _LOGIN_COOKIE, token, path=PATH + "login", httponly=True, samesite="Strict",
            secure=request.secure, max_age=1800,
        )  # fmt: skip
        return response

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        client = request.remote or ""
        token = str(form.get("token", ""))
        if not token or token != request.cookies.get(_LOGIN_COOKIE) or not same_origin(request):
            raise web.HTTPForbidden(text="CSRF 校验失败 / bad CSRF token\n", headers=headers())
        if self.access.limited(client):
            return await self._login_page(
                request, problem="尝试太多次，请稍后再试 / too many tries: wait a few minutes",
                status=429,
            )  # fmt: skip
        name = str(form.get("name", "")).strip()
        if not NAME.fullmatch(name):
            return await self._login_page(
                request, problem="名字：字母、数字、._@- / name: letters, digits, ._@-", status=400
            )
        if not self.access.check(client, str(form.get("password", ""))[:1024]):
            return await self._login_page(request, problem="密码不对 / wrong password", status=401)
        log.info("dashboard: %s logged in from %s", name, client)
        response = self._session_for(request, name)
        response.del_cookie(_LOGIN_COOKIE, path=PATH + "login")
        raise response

    def _session_for(self, request: web.Request, name: str) -> web.HTTPSeeOther:
        """A new session named ``name``: the redirect to Today that sets its cookie."""
        _, cookie = self.access.new_session(name)
        response = web.HTTPSeeOther(PATH + "today", headers=headers())
        response.set_cookie(
            COOKIE, cookie, path=PATH, httponly=True, samesite="Strict", secure=request.secure,
            max_age=self.access.max_age,
        )  # fmt: skip
        return response

    def _telegram_bot(self) -> str:
        """The Telegram bot's username for the Login Widget ("" when it is off or not known
        yet: the bot has not started)."""
        if self.telegram is None:
            return ""
        adapter = self.probe.service.platforms.get("telegram")
        try:
            name = str(getattr(adapter, "username", "") or "")
        except RuntimeError:  # not logged in yet
            return ""
        return name if NAME.fullmatch(name) else ""

    async def _telegram_login(self, request: web.Request) -> web.StreamResponse:
        """Where Telegram's Login Widget sends an admin (``data-auth-url``): the signed fields
        as query values, checked (:class:`TelegramLogin`); a session named ``telegram.ID``."""
        client = request.remote or ""
        if self.telegram is None:
            raise web.HTTPNotFound(headers=headers())
        if self.access.limited(client):
            return await self._login_page(
                request, problem="尝试太多次，请稍后再试 / too many tries: wait a few minutes",
                status=429,
            )  # fmt: skip
        fields = {k: v[:512] for k, v in list(request.query.items())[:16]}
        admin = self.telegram.admin(fields)
        if admin is None:
            self.access.failed(client)
            return await self._login_page(
                request, problem="Telegram 登录无效 / the Telegram login did not check out",
                status=401,
            )  # fmt: skip
        name = f"telegram.{admin}"
        log.info("dashboard: %s logged in with Telegram from %s", name, client)
        raise self._session_for(request, name)

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        response = web.HTTPSeeOther(PATH + "login", headers=headers())
        response.del_cookie(COOKIE, path=PATH)
        raise response

    async def _static(self, request: web.Request) -> web.Response:
        from importlib.resources import files

        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound(headers=headers())
        body = (files("bots.dashboard") / "files" / "static" / name).read_bytes()
        return web.Response(
            body=body, content_type=_STATIC[name], charset="utf-8",
            headers={**headers(), "Cache-Control": "private, max-age=300"},
        )  # fmt: skip

    # ------------------------------------------------------------ answers

    async def page(
        self,
        template: str,
        session: Session | None,
        *,
        status: int = 200,
        widget: bool = False,
        **values: Any,
    ) -> web.Response:
        """A page from ``template`` (every value escaped by Jinja2), rendered in a worker
        thread: a page never holds the event loop while a post runs."""
        text = await asyncio.to_thread(
            self.env.get_template(template).render,
            session=session,
            zone=self.dashboard.zone,
            **values,
        )
        return web.Response(
            text=text, status=status, content_type="text/html", charset="utf-8",
            headers=headers(widget=widget),
        )  # fmt: skip

    @staticmethod
    async def svg(draw: Callable[..., bytes], *args: Any) -> web.Response:
        """The chart ``draw(*args)`` makes, drawn in a worker thread (pygal takes tens of ms)."""
        body = await asyncio.to_thread(draw, *args)
        return web.Response(body=body, content_type="image/svg+xml", headers=headers())
