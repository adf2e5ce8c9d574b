"""Helpers of the browser tests: the site served on loopback, one headless Chromium."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aiohttp import web

from bots.site_http import Files, add_site_routes

#: Debian's chromium package (the wrapper script); browser downloads are impossible here
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def site_app(files: Files) -> web.Application:
    """An application serving the site ``files()`` returns at its root (mount it with
    ``app.add_subapp(prefix, site_app(...))``: the site's links are relative)."""
    app = web.Application()
    add_site_routes(app, files)
    return app


def chromium() -> str | None:
    """The path of the system Chromium, or None."""
    for path in CHROMIUM_CANDIDATES:
        if Path(path).exists():
            return path
    return shutil.which("chromium")


@contextmanager
def served(files: Callable[[], dict[str, bytes]]) -> Iterator[str]:
    """Serve ``files`` with :func:`site_app` on 127.0.0.1 in a thread; yields the root URL."""
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound here and handed over: no race for the port
    port = sock.getsockname()[1]
    runner = web.AppRunner(site_app(files))
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.SockSite(runner, sock).start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="site-server", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the site server did not start")
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
