"""The app bots' HTTP callback server (Feishu's event callback, DingTalk's robot callback): an
aiohttp server on ``listen`` whose ``path`` takes the platform's POSTs; TLS is the reverse
proxy's. A platform's server prepares itself in :meth:`CallbackServer._prepare` (its SDK
imported in a thread: that takes seconds) and answers a POST in
:meth:`CallbackServer._serve`.
"""

from __future__ import annotations

from typing import ClassVar

from aiohttp import web

from digest_core.port import ConfigError


class CallbackServer:
    """One app bot's HTTP callback (see the module doc)."""

    #: the platform's table, for the error naming ``<platform>.callback_listen``
    platform: ClassVar[str]

    def __init__(self, *, listen: tuple[str, int], path: str) -> None:
        self.listen, self.path = listen, path
        self._runner: web.AppRunner | None = None
        #: the port bound (``listen``'s, or the one given for port 0)
        self.port = 0

    async def start(self) -> None:
        """Prepare, then listen.

        Raises:
            ConfigError: the address cannot be bound.
        """
        await self._prepare()
        app = web.Application(client_max_size=1024 * 1024)
        app.router.add_post(self.path, self._serve)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        host, port = self.listen
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as exc:
            await self.stop()
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror}",
                key=f"{self.platform}.callback_listen",
            ) from None
        self.port = int(self._runner.addresses[0][1])

    async def _prepare(self) -> None:
        """What the server needs before it listens (the platform's SDK)."""

    async def _serve(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
