"""What the app bots' `digest-bot doctor` checks share (Feishu's app bot, DingTalk's app
robot): their SDK installed, the webhook targets' own checks, a JSON call read as (status,
answer, Date header), a long-connection address reachable without opening a connection on
it, and the callback server's settings. Nothing here sends to any chat.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from bots.doctor import TIMEOUT_SECONDS, Check, fail, ok
from bots.network import network_reason
from bots.workchat import doctor as webhook_doctor
from bots.workchat.settings import WebhookSettings
from digest_core.port import ConfigError

#: the fix for a service this host cannot reach
NETWORK_FIX = "allow outbound HTTPS to it (firewall, proxy: HTTPS_PROXY)"


@dataclass(frozen=True)
class Answer:
    """A JSON call's outcome: the HTTP status, the JSON body ({} if none) and ``Date``."""

    status: int
    body: dict[str, Any]
    date: str | None


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


async def webhook_checks(
    settings: WebhookSettings, app_key: str, *, now: Callable[[], dt.datetime]
) -> list[Check]:
    """The webhook targets' checks (:mod:`bots.workchat.doctor`), for the settings as if they
    configured no app (``app_key`` unset): their adapter is built without the app's secrets."""
    plain = settings.model_copy(update={app_key: None})
    return await webhook_doctor.checks(plain, now=now)


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
