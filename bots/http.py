"""The operator's HTTP endpoint (aiohttp): /healthz, /readyz, /metrics, and routes others add.

Off unless ``[http] listen = "HOST:PORT"``. ``digest-bot run`` starts it before the election,
so a standby answers too, and stops it last.

- ``GET /healthz``: 200 while the process's event loop answers.
- ``GET /readyz``: 200 when the ledger answers, the process leads or is a healthy standby,
  and every platform it runs is connected; else 503. The JSON body says which part failed
  (``waiting``: the platforms that could not be reached at start, why, and the next try).
- ``GET /metrics``: Prometheus text format (see :mod:`bots.metrics` for the names).

Adding routes (a static site, an admin page): write a function that takes the
``aiohttp.web.Application`` and the :class:`Probe` (service, leadership, metrics), adds its
routes, and register it at import time::

    from bots import http

    @http.add_routes
    def site(app: web.Application, probe: http.Probe) -> None:
        app.router.add_static("/site/", path)

Every registered function runs when the endpoint is built (each ``run``), before it starts
listening. Route paths must not clash with the three above; aiohttp refuses a duplicate.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from digest_core.errors import ConfigError
from digest_core.port import Tallied
from digest_core.service.leadership import Leadership, Role

if TYPE_CHECKING:
    from aiohttp import web

    from bots.metrics import PrometheusMetrics
    from digest_core.port import Adapter
    from digest_core.service.root import DigestService

log = logging.getLogger(__name__)

#: how long /readyz waits for the ledger before it calls it unreachable
LEDGER_TIMEOUT = 2.0

RouteInstaller = Callable[["web.Application", "Probe"], None]
_INSTALLERS: list[RouteInstaller] = []


def add_routes(installer: RouteInstaller) -> RouteInstaller:
    """Register ``installer`` to add routes to every endpoint built from now on (a decorator)."""
    _INSTALLERS.append(installer)
    return installer


@runtime_checkable
class Connected(Protocol):
    """An adapter that knows whether it is connected (logged in, receiving); an adapter
    without this counts as connected once started."""

    @property
    def connected(self) -> bool: ...


@dataclass
class Probe:
    """What the endpoint looks at: the running service, its leadership, the adapters started
    (a live list: the runtime appends to it), and the metrics (None: no /metrics)."""

    service: DigestService
    leadership: Leadership
    started: list[Adapter] = field(default_factory=list)
    metrics: PrometheusMetrics | None = None
    #: the daily post is scheduled (``[schedule] enabled``)
    scheduled: bool = True
    #: platforms not started yet -> why (unreachable at start; retried meanwhile: a live dict)
    waiting: dict[str, str] = field(default_factory=dict)

    def connected(self) -> dict[str, bool]:
        """Every started adapter: is it connected (adapters without a ``connected`` property
        count as connected once started)."""
        return {a.name: a.connected if isinstance(a, Connected) else True for a in self.started}

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the details shown by /readyz)."""
        leadership = self.leadership
        # the role is read once: it may change while the ledger is asked below, and the
        # body must show the role that decided the answer
        role = leadership.role
        body: dict[str, Any] = {"role": role.value, "owner": self.service.ledger.owner}
        ready = True
        try:
            async with asyncio.timeout(LEDGER_TIMEOUT):
                lease = await self.service.ledger.lease(leadership.name)
            body["ledger"] = "ok"
            body["leader"] = lease.owner if lease is not None else None
        except Exception as exc:
            body["ledger"] = f"unreachable: {type(exc).__name__}: {exc}"[:300]
            ready = False
        if self.service.ledger.health.lost is not None:
            body["ledger"] = f"lost: {self.service.ledger.health.lost}"
            ready = False
        connected = self.connected()
        if role is Role.LEADER:
            # a leader runs every platform: one not yet started is not connected
            connected = {name: connected.get(name, False) for name in self.service.platforms}
        elif role in (Role.LOST, Role.STARTING):
            ready = False
        body["platforms"] = connected
        if self.waiting:
            body["waiting"] = dict(self.waiting)
            ready = False
        if not all(connected.values()):
            ready = False
        body["ready"] = ready
        return ready, body


class HttpEndpoint:
    """The aiohttp server of one ``run``: :meth:`start`, then :meth:`stop`."""

    def __init__(
        self,
        probe: Probe,
        *,
        host: str,
        port: int,
        routes: Sequence[RouteInstaller] = (),
    ) -> None:
        try:
            from aiohttp import web
        except ImportError as exc:
            raise ConfigError(
                "the HTTP endpoint needs aiohttp: pip install 'digest-bot[http]'", key="http.listen"
            ) from exc
        self.probe = probe
        self.host = host
        self.port = port
        self.app = web.Application()
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        if probe.metrics is not None:
            self.app.router.add_get("/metrics", self._metrics)
        for install in (*_INSTALLERS, *routes):
            install(self.app, probe)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen on (host, port); ``port`` 0 takes a free one (then :attr:`port` is it).

        Raises:
            ConfigError: the address cannot be bound (in use, not this host's).
        """
        from aiohttp import web

        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}; choose "
                "another address or port",
                key="http.listen",
            ) from exc
        self._runner = runner
        addresses = runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        log.info(
            "HTTP endpoint on http://%s:%d (/healthz, /readyz, /metrics)", self.host, self.port
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------ handlers

    async def _healthz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        ready, body = await self.probe.readiness()
        return web.Response(
            text=json.dumps(body, ensure_ascii=False) + "\n",
            status=200 if ready else 503,
            content_type="application/json",
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        from aiohttp import web
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        probe = self.probe
        metrics = probe.metrics
        assert metrics is not None
        service = probe.service
        await metrics.refresh(
            ledger=service.ledger,
            platforms=list(service.platforms),
            next_post=(
                service.poster.next_post() if probe.scheduled and probe.leadership.leading else None
            ),
            leading=probe.leadership.leading,
            terms=probe.leadership.terms,
            connected=probe.connected(),
            tallied={n: p for n, p in service.platforms.items() if isinstance(p, Tallied)},
        )
        return web.Response(
            body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )
