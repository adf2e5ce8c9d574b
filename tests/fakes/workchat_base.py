"""The common machinery of the work-chat webhook doubles (Feishu, DingTalk, WeCom).

Each double is an aiohttp server on 127.0.0.1 with named robots (token/key, optional signing
secret), sliding-window rate limits answered with the platform's own codes, fault injection
and a record of what each robot posted. Subclasses implement one platform's route, signature
check and payload rules.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

from aiohttp import web

log = logging.getLogger(__name__)

Json = dict[str, Any]
FaultKind = Literal["server_error", "busy", "slow", "rate_limited", "gone", "http_429"]
_BAD_GATEWAY = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


class Refused(Exception):
    """An answer with the platform's error code (and HTTP status)."""

    def __init__(self, code: int, msg: str, *, status: int = 200) -> None:
        super().__init__(f"{code} {msg}")
        self.code = code
        self.msg = msg
        self.status = status


@dataclass
class Robot:
    """One group robot: its webhook token/key and optional signing secret."""

    name: str
    token: str
    secret: str | None = None
    #: accepted payloads, in order
    sent: list[Json] = field(default_factory=list)
    #: pings of everyone / mentions the platform would have made, by payload index
    pings: list[str] = field(default_factory=list)
    #: times (double clock) of accepted sends, for the sliding windows
    window: deque[float] = field(default_factory=deque)
    #: refused for going over the limit until then (DingTalk's 10-minute penalty)
    penalised_until: float = 0.0
    removed: bool = False


@dataclass
class _Fault:
    kind: FaultKind
    remaining: int
    delay: float = 0.0


class FakeWebhookService:
    """Base of the doubles. ``async with Double() as d:`` then ``d.add_robot(...)`` and point
    the adapter's ``api_base`` at ``d.url``.

    ``clock`` (seconds since the epoch) drives signature freshness and rate windows; inject
    one to test limits without waiting. ``scale`` divides the windows and penalties (scale
    60 turns "20 a minute" into "20 a second").
    """

    #: (count, seconds): more than ``count`` accepted sends in any ``seconds`` is refused
    WINDOWS: ClassVar[tuple[tuple[int, float], ...]] = ()
    #: seconds a robot stays refused after going over (0: none)
    PENALTY: ClassVar[float] = 0.0
    #: how old (or how far ahead) a signed timestamp may be, in seconds
    FRESHNESS: ClassVar[float] = 3600.0
    #: request bodies over this many bytes are refused
    BODY_LIMIT: ClassVar[int] = 20_000
    NAME: ClassVar[str] = "webhook"

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        scale: float = 1.0,
        rate_limits: bool = True,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if scale <= 0:
            raise ValueError("scale must be positive")
        self.clock = clock
        self.scale = scale
        self.rate_limits = rate_limits
        #: seconds every accepted send waits, *after* it is posted, before its answer: a
        #: client killed meanwhile never learns that its message arrived
        self.latency = latency
        self.host = host
        self.port = port
        self.robots: dict[str, Robot] = {}
        #: every request's outcome: (robot name or "?", code)
        self.answers: list[tuple[str, int]] = []
        #: sends received and not answered yet (see :meth:`wait_until_answered`)
        self.unanswered = 0
        self._answered = asyncio.Event()
        self._faults: dict[str, list[_Fault]] = {}
        self._runner: web.AppRunner | None = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Bind 127.0.0.1 (a random port unless one was given) and serve."""
        app = web.Application(client_max_size=4 * 1024 * 1024)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        """The root URL, e.g. http://127.0.0.1:PORT: what ``api_base`` takes."""
        return f"http://{self.host}:{self.port}"

    # ---------------------------------------------------------------- control

    def add_robot(self, name: str, token: str, secret: str | None = None) -> Robot:
        robot = Robot(name, token, secret)
        self.robots[token] = robot
        return robot

    def robot(self, name: str) -> Robot:
        for robot in self.robots.values():
            if robot.name == name:
                return robot
        raise KeyError(name)

    def remove_robot(self, name: str) -> None:
        """The robot is deleted from its group: its token stops working."""
        self.robot(name).removed = True

    def fail_next(self, name: str, kind: FaultKind, count: int = 1, *, delay: float = 0.0) -> None:
        """The next ``count`` requests to robot ``name`` fail as ``kind``: ``server_error``
        (HTTP 502 from the gateway), ``busy`` (the platform's busy code), ``slow`` (answer
        after ``delay`` seconds, then normally), ``rate_limited`` (the frequency code),
        ``gone`` (the invalid-token code), ``http_429`` (HTTP 429 with a reset header of 7 s)."""
        self._faults.setdefault(self.robot(name).token, []).append(_Fault(kind, count, delay))

    def clear_faults(self) -> None:
        """Forget every fault not yet applied."""
        self._faults.clear()

    def sent(self, name: str) -> list[Json]:
        return list(self.robot(name).sent)

    # ---------------------------------------------------------------- per platform

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def answer(self, code: int, msg: str) -> Json:
        """The JSON answer with ``code`` (0: success)."""
        raise NotImplementedError

    def codes(self) -> dict[str, tuple[int, str]]:
        """The platform's codes for: ``unknown`` token, ``rate`` limit, ``busy``."""
        raise NotImplementedError

    def check_signature(self, request: web.Request, body: Json, robot: Robot) -> None:
        """Raise Refused unless the request is signed as the platform requires."""

    def check_payload(self, body: Json) -> None:
        """Raise Refused for what the platform refuses."""

    def pings(self, body: Json) -> list[str]:
        """Everyone-pings or mentions the platform would make for ``body``."""
        return []

    # ---------------------------------------------------------------- serving

    async def wait_until_answered(
        self,
        timeout: float = 5.0,  # noqa: ASYNC109 - a bounded helper, not a cancellable op
    ) -> None:
        """Wait until every send received has been answered (a killed client's included).

        Raises:
            TimeoutError: when some were not within ``timeout`` real seconds.
        """
        async with asyncio.timeout(timeout):
            while self.unanswered:
                await self._answered.wait()

    async def handle(self, request: web.Request, token: str | None) -> web.Response:
        """Serve one send to the robot ``token``."""
        self.unanswered += 1
        try:
            return await self._serve(request, token)
        finally:
            self.unanswered -= 1
            self._answered.set()
            self._answered = asyncio.Event()

    async def _serve(self, request: web.Request, token: str | None) -> web.Response:
        robot = self.robots.get(token or "")
        name = robot.name if robot else "?"
        try:
            if robot is not None:
                fault_response = await self._apply_fault(robot)
                if fault_response is not None:
                    return fault_response
            if robot is None or robot.removed:
                raise Refused(*self.codes()["unknown"])
            raw = await request.read()
            if len(raw) > self.BODY_LIMIT:
                raise Refused(*self.codes()["too_long"])
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise Refused(*self.codes()["bad_json"]) from None
            if not isinstance(body, dict):
                raise Refused(*self.codes()["bad_json"])
            self.check_signature(request, body, robot)
            self.check_payload(body)
            self._check_rate(robot)
        except Refused as refused:
            self.answers.append((name, refused.code))
            return web.json_response(self.answer(refused.code, refused.msg), status=refused.status)
        robot.window.append(self.clock())
        robot.sent.append(body)
        robot.pings.extend(self.pings(body))
        self.answers.append((name, 0))
        if self.latency:
            await asyncio.sleep(self.latency)
        return web.json_response(self.answer(0, "ok"))

    async def _apply_fault(self, robot: Robot) -> web.Response | None:
        faults = self._faults.get(robot.token)
        if not faults:
            return None
        fault = faults[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            faults.pop(0)
        if fault.kind == "slow":
            await asyncio.sleep(fault.delay)
            return None
        if fault.kind == "server_error":
            return web.Response(status=502, text=_BAD_GATEWAY, content_type="text/html")
        if fault.kind == "http_429":
            # the gateway's answer (Feishu's OpenAPI gateway documents this form:
            # https://open.feishu.cn/document/server-docs/api-call-guide/frequency-control)
            self.answers.append((robot.name, 429))
            return web.json_response(
                {"code": 99991400, "msg": "request trigger frequency limit"},
                status=429,
                headers={"x-ogw-ratelimit-limit": "100", "x-ogw-ratelimit-reset": "7"},
            )
        key = {"busy": "busy", "rate_limited": "rate", "gone": "unknown"}[fault.kind]
        code, msg = self.codes()[key]
        self.answers.append((robot.name, code))
        return web.json_response(self.answer(code, msg))

    def _check_rate(self, robot: Robot) -> None:
        if not self.rate_limits:
            return
        now = self.clock()
        if now < robot.penalised_until:
            raise Refused(*self.codes()["rate"])
        longest = max((seconds for _, seconds in self.WINDOWS), default=0.0) / self.scale
        while robot.window and robot.window[0] <= now - longest:
            robot.window.popleft()
        for count, seconds in self.WINDOWS:
            recent = sum(1 for t in robot.window if t > now - seconds / self.scale)
            if recent >= count:
                robot.penalised_until = now + self.PENALTY / self.scale
                raise Refused(*self.codes()["rate"])


def serve_main(cls: type[FakeWebhookService], argv: Iterable[str] | None, doc: str) -> None:
    """``python -m tests.fakes.<platform>_api --robot NAME:TOKEN[:SECRET] …``: run the double
    until SIGINT/SIGTERM; print its URL on the first line of stdout."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--no-limits", action="store_true", help="disable rate limits")
    parser.add_argument("--robot", action="append", default=[], metavar="NAME:TOKEN[:SECRET]")
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO)

    async def serve() -> None:
        fake = cls(scale=args.scale, rate_limits=not args.no_limits, port=args.port)
        for spec in args.robot:
            name, token, *secret = spec.split(":", 2)
            fake.add_robot(name, token, secret[0] if secret else None)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with fake:
            print(fake.url, flush=True)
            await stop.wait()

    asyncio.run(serve())
