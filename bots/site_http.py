"""The web archive over HTTP: routes of an aiohttp application, the bot's endpoint
(``[http] site = true``) or one of its own (``digest-bot site serve``)."""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from digest_core.errors import ConfigError

if TYPE_CHECKING:
    from bots.http import Probe, RouteInstaller
    from digest_core.archive import Archive
    from digest_core.clock import Clock
    from digest_core.settings import Settings
    from digest_core.site.live import LiveSite
    from digest_core.site.published import PublishRule

log = logging.getLogger(__name__)

#: Content types by file suffix; anything else is served as bytes.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".xml": "application/atom+xml; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: Sent with every answer: pages run only the site's own script, never inside a frame.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
}

Files = Callable[[], dict[str, bytes]]


def lookup(files: dict[str, bytes], path: str) -> tuple[int, str]:
    """What a request for ``path`` (relative to the site root, no leading slash, unquoted)
    gets: ``(200, file)``, ``(301, path + "/")`` for a folder asked without its slash, or
    ``(404, "")``. ``..`` and empty segments never reach a file."""
    if path and (posixpath.normpath(path) != path.rstrip("/") or path.startswith("/")):
        return 404, ""
    name = path + "index.html" if path == "" or path.endswith("/") else path
    if name in files:
        return 200, name
    if f"{path}/index.html" in files:
        return 301, path + "/"
    return 404, ""


def add_site_routes(app: web.Application, files: Files, *, prefix: str = "/") -> None:
    """Serve the site ``files()`` returns under ``prefix`` (ending with ``/``) of ``app``, GET
    and HEAD only. ``files`` is called in a worker thread on every request
    (:meth:`~digest_core.site.live.LiveSite.files` rebuilds when the archive changed).

    The route catches every path under ``prefix``: routes added to ``app`` before it (e.g.
    ``/healthz`` beside a site at ``/``) still answer theirs; a path neither they nor the
    site has gets 404.
    """
    if not prefix.startswith("/") or not prefix.endswith("/"):
        raise ValueError(f"prefix must start and end with '/', not {prefix!r}")

    async def handle(request: web.Request) -> web.StreamResponse:
        current = await asyncio.to_thread(files)
        tail = request.match_info.get("tail", "")
        status, name = lookup(current, tail)
        if status == 301:
            raise web.HTTPMovedPermanently(location=request.path + "/", headers=SECURITY_HEADERS)
        if status == 404:
            return web.Response(
                status=404,
                text="没有这个页面 / not found\n",
                headers=SECURITY_HEADERS,
            )
        suffix = posixpath.splitext(name)[1]
        headers = {
            **SECURITY_HEADERS,
            "Content-Type": CONTENT_TYPES.get(suffix, "application/octet-stream"),
            "Cache-Control": "public, max-age=60",
        }
        return web.Response(body=current[name], headers=headers)

    app.router.add_get(prefix + "{tail:.*}", handle)  # HEAD too


def mount_site(
    app: web.Application,
    archive: Archive,
    *,
    rule: PublishRule,
    clock: Clock,
    base_url: str | None,
    prefix: str = "/",
    subscribe: str | None = None,
) -> LiveSite:
    """Serve the live web archive of ``archive`` (public by ``rule``) under ``prefix`` of
    ``app``: what ``[http] site = true`` adds to the bot's HTTP endpoint. Returns the site.

    Raises:
        ImportError: the ``site`` extra (Jinja2, feedgen) is not installed.
    """
    from digest_core.site.live import LiveSite

    live = LiveSite(archive, rule=rule, clock=clock, base_url=base_url, subscribe=subscribe)
    add_site_routes(app, live.files, prefix=prefix)
    return live


def endpoint_routes(settings: Settings) -> list[RouteInstaller]:
    """What ``[http] site = true`` adds to the bot's HTTP endpoint (:mod:`bots.http`): the
    live web archive of the service's archive at the root, each issue from its post time on
    (after the endpoint's own /healthz, /readyz and /metrics, which keep answering). Empty
    when ``[http] site`` is off.

    Raises:
        ConfigError: the ``site`` extra (Jinja2, feedgen) is not installed.
    """
    if not settings.http.site:
        return []
    try:
        import digest_core.site.live  # noqa: F401  # Jinja2 and feedgen, checked at start
    except ImportError as exc:
        raise ConfigError(
            "[http] site needs Jinja2 and feedgen: pip install 'digest-bot[site]'",
            key="http.site",
        ) from exc

    def install(app: web.Application, probe: Probe) -> None:
        service = probe.service
        mount_site(
            app,
            service.archive,
            # the service's own embargo: early publishes (audited, re-read) show at once
            rule=service.embargo,
            clock=service.clock,
            base_url=settings.site.base_url,
            # the email edition's form on every page, when the email platform runs here
            subscribe="email/subscribe" if "email" in service.platforms else None,
        )
        log.info("serving the web archive at the HTTP endpoint's root")

    return [install]
