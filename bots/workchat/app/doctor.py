"""What the app bots' `digest-bot doctor` checks share (Feishu's app bot, DingTalk's app
robot): their SDK installed, the webhook targets' own checks, a JSON call read as (status,
answer, Date header), a long-connection address reachable without opening a connection on
it, and the callback server's settings; and the order of an app bot's lines
(:func:`platform_checks`: SDK, credentials and clock, then the platform's own). Nothing here
sends to any chat.

A long connection is never opened by doctor: Feishu and DingTalk hand each event to one of
the app's connections, so one opened beside a running bot could take a reader's message and
never answer it. The endpoint is asked for an address (which proves the credentials and the
subscription mode), and that address is only reached with TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib.util
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx

from bots.doctor import TIMEOUT_SECONDS, Check, clock_check, fail, ok
from bots.network import network_reason, tls_context
from bots.workchat import doctor as webhook_doctor
from bots.workchat.adapter import WebhookAdapter
from bots.workchat.settings import AppBotSettings, WebhookSettings
from digest_core.port import ConfigError

S = TypeVar("S", bound=AppBotSettings)
S_in = TypeVar("S_in", bound=AppBotSettings, contravariant=True)


class PlatformChecks(Protocol[S_in]):
    """A platform's ``digest-bot doctor`` checks (``PlatformSpec.doctor``)."""

    def __call__(
        self, settings: S_in, *, now: Callable[[], dt.datetime]
    ) -> Awaitable[list[Check]]: ...


#: the fix for a service this host cannot reach
NETWORK_FIX = "allow outbound HTTPS to it (firewall, proxy: HTTPS_PROXY)"


@dataclass(frozen=True)
class Answer:
    """A JSON call's outcome: the HTTP status, the JSON body ({} if none) and ``Date``."""

    status: int
    body: dict[str, Any]
    date: str | None


@dataclass(frozen=True)
class AppProbe:
    """What the doctor asks of one platform's app bot: its SDK, its credentials (the token
    call), its own checks (``more``: given the open client, the secret and the token's
    answer), then how it receives: with ``mode = "http"`` the callback's settings
    (``callback``, given the secret), else its connection (``connection``, given the open
    client and the secret)."""

    area: str
    #: the SDK's module and the extra that installs it
    sdk: tuple[str, str]
    #: the app's secret, raising ConfigError when it is not set
    secret: Callable[[], str]
    #: the fix for refused or missing credentials
    credentials_fix: str
    #: the token call's URL and JSON body (given the secret)
    token_url: str
    token_body: Callable[[str], Mapping[str, Any]]
    #: whether the answer grants a token
    granted: Callable[[Answer], bool]
    #: the line when it does ("cli_…: a tenant access token"), and the one when it does not
    #: (before the quoted answer: "Feishu refuses the app's credentials")
    granted_detail: str
    refused: str
    #: the answer's status, code and message for the table (never a secret)
    quoted: Callable[[Answer], str]
    more: Callable[[httpx.AsyncClient, str, Answer], Awaitable[list[Check]]]
    callback: Callable[[str], Check]
    connection: Callable[[httpx.AsyncClient, str], Awaitable[Check]]


class Unreachable(Exception):
    """The service did not answer at all; ``reason`` says why, in a few words."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url, self.reason = url, reason


async def call(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    json: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """One JSON request.

    Raises:
        Unreachable: no HTTP answer came (DNS, refused, timeout).
    """
    try:
        response = await client.request(method, url, json=json, headers=headers)
    except httpx.HTTPError as exc:
        raise Unreachable(url.split("?")[0], network_reason(exc) or str(exc)) from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    return Answer(
        response.status_code, body if isinstance(body, dict) else {}, response.headers.get("Date")
    )


def unreachable(area: str, name: str, exc: Unreachable) -> Check:
    return fail(area, name, f"{exc.url}: {exc.reason}", NETWORK_FIX)


def sdk_check(area: str, module: str, extra: str) -> Check | None:
    """A failure when the app bot's SDK is not installed (``run`` would refuse to start)."""
    if importlib.util.find_spec(module) is not None:
        return None
    return fail(
        area,
        "sdk",
        f"{module} is not installed: the app bot cannot receive",
        f"pip install 'digest-bot[{extra}]'",
    )


def platform_checks(
    app_key: str, probe: Callable[[S], AppProbe], *, webhook: type[WebhookAdapter]
) -> PlatformChecks[S]:
    """A platform's doctor checks, ``checks(settings, now=...)``: its lines of the doctor's
    table, none when nothing of it is configured: its webhooks' (``webhook``: its webhook
    adapter), then, when the settings configure the app (``app_key`` set), the app's
    (:func:`app_checks` of ``probe(settings)``: the clock once)."""

    async def checks(settings: S, *, now: Callable[[], dt.datetime]) -> list[Check]:
        out = await webhook_checks(settings, app_key, webhook=webhook, now=now)
        if settings.app:
            clock = not any(c.name == "clock" for c in out)
            http = settings.mode == "http"
            out.extend(await app_checks(probe(settings), now=now, clock=clock, http=http))
        return out

    return checks


async def app_checks(
    probe: AppProbe, *, now: Callable[[], dt.datetime], clock: bool = True, http: bool = False
) -> list[Check]:
    """The app bot's lines: its SDK, its credentials (``clock``: with the clock against the
    token answer's ``Date``), then the probe's own, then its callback's (``http``) or its
    connection's."""
    area, name = probe.area, "app credentials"
    missing = sdk_check(area, *probe.sdk)
    out = [missing] if missing is not None else []
    try:
        secret = probe.secret()
    except ConfigError as exc:
        return [*out, fail(area, name, str(exc), probe.credentials_fix)]
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, verify=tls_context()) as client:
        sent = now()
        try:
            answer = await call(client, "POST", probe.token_url, json=probe.token_body(secret))
        except Unreachable as exc:
            return [*out, unreachable(area, name, exc)]
        received = now()
        if not probe.granted(answer):
            refused = f"{probe.refused} ({probe.quoted(answer)})"
            return [*out, fail(area, name, refused, probe.credentials_fix)]
        out.append(ok(area, name, probe.granted_detail))
        if clock:
            out.append(clock_check(area, answer.date, sent=sent, received=received))
        out.extend(await probe.more(client, secret, answer))
        out.append(probe.callback(secret) if http else await probe.connection(client, secret))
    return out


async def webhook_checks(
    settings: WebhookSettings,
    app_key: str,
    *,
    webhook: type[WebhookAdapter],
    now: Callable[[], dt.datetime],
) -> list[Check]:
    """The webhook targets' checks (:mod:`bots.workchat.doctor`), for the settings as if they
    configured no app (``app_key`` unset): their adapter is built without the app's secrets."""
    plain = settings.model_copy(update={app_key: None})
    return await webhook_doctor.checks(plain, adapter=webhook, now=now)


async def tcp_reachable(url: str) -> str | None:
    """Why ``url``'s host and port cannot be reached with TCP (None: they can). Only a TCP
    connection is opened and closed: no TLS, no WebSocket handshake."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme in ("wss", "https") else 80)
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return f"{host}:{port}: no answer in time"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def callback_check(
    area: str,
    listen: Callable[[], tuple[str, int]],
    path: str,
    *,
    secrets: Mapping[str, Callable[[], object]],
    secrets_fix: str,
    where: str,
) -> Check:
    """The HTTP callback's settings: each of ``secrets`` (what it is -> its resolver, raising
    ConfigError when unset) present and ``callback_listen`` an address; ``where`` names the
    console field the request URL goes into."""
    missing = []
    for name, resolve in secrets.items():
        try:
            resolve()
        except ConfigError:
            missing.append(name)
    if missing:
        detail = f'mode = "http" needs the {" and the ".join(missing)}: not set'
        return fail(area, "callback", detail, secrets_fix)
    try:
        host, port = listen()
    except ConfigError as exc:
        return fail(area, "callback", str(exc), f'set {area}.callback_listen = "HOST:PORT"')
    return ok(
        area,
        "callback",
        f"listens on {host}:{port}{path}; {where} must be https://<your host>{path}",
    )
