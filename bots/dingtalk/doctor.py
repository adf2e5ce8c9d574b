"""DingTalk's `digest-bot doctor` checks: the custom robots' webhooks (:mod:`bots.workchat.doctor`)
and, with ``[dingtalk] client_id``, the app robot: its credentials (an access token), its
robot code, and how it receives: the Stream gateway and the address it hands out, or the
HTTP callback's settings. Plain calls over httpx; nothing is sent to any chat and no stream
is opened (:mod:`bots.workchat.appdoctor`).

- Token: ``POST /v1.0/oauth2/accessToken`` {appKey, appSecret} (https://open.dingtalk.com/
  document/orgapp/obtain-the-access_token-of-an-internal-app): ``accessToken``.
- Stream: ``POST /v1.0/gateway/connections/open`` as dingtalk-stream's client asks it
  ({clientId, clientSecret, subscriptions, ua, localIp}; https://open.dingtalk.com/document/
  direction/stream-mode-protocol-access-description): ``endpoint`` and ``ticket``. The
  ticket is left unused: opening the stream beside a running robot could take its messages.
- Robot: DingTalk has no read-only call naming an app's robot; its code (the Client ID
  unless ``robot_code`` says otherwise) is checked by the first send.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import httpx

from bots.dingtalk.api import TOKEN_PATH
from bots.dingtalk.settings import DingTalkSettings
from bots.doctor import TIMEOUT_SECONDS, Check, clock_check, fail, ok
from bots.workchat import appdoctor
from bots.workchat.appdoctor import Unreachable, call, unreachable
from digest_core.port import ConfigError

AREA = "dingtalk"
GATEWAY_PATH = "/v1.0/gateway/connections/open"
#: the topic of robot messages, as the app robot subscribes to it
BOT_TOPIC = "/v1.0/im/bot/messages/get"
CREDENTIALS_FIX = (
    "copy the Client ID and Client Secret from the developer console (开发者后台 → 应用开发 → "
    "凭证与基础信息) into dingtalk.client_id and DIGEST_BOT_DINGTALK__CLIENT_SECRET"
)
STREAM_FIX = (
    "set the robot's 消息接收模式 to Stream 模式 (机器人配置) and publish, "
    'or set dingtalk.mode = "http"'
)


async def checks(settings: DingTalkSettings, *, now: Callable[[], dt.datetime]) -> list[Check]:
    """DingTalk's lines of the doctor's table; none when nothing of DingTalk is configured."""
    out = await appdoctor.webhook_checks(settings, "client_id", now=now)
    if settings.app:
        clock = not any(c.name == "clock" for c in out)
        out.extend(await app_checks(settings, now=now, clock=clock))
    return out


async def app_checks(
    settings: DingTalkSettings, *, now: Callable[[], dt.datetime], clock: bool = True
) -> list[Check]:
    """The app robot's lines (``clock``: with the clock against DingTalk's ``Date``)."""
    assert settings.client_id is not None
    missing = appdoctor.sdk_check(AREA, "dingtalk_stream", "dingtalk")
    out = [missing] if missing is not None else []
    try:
        secret = settings.resolved_client_secret().get_secret_value()
    except ConfigError as exc:
        return [*out, fail(AREA, "app credentials", str(exc), CREDENTIALS_FIX)]
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
        sent = now()
        try:
            answer = await call(
                client,
                "POST",
                settings.openapi_base + TOKEN_PATH,
                json={"appKey": settings.client_id, "appSecret": secret},
            )
        except Unreachable as exc:
            return [*out, unreachable(AREA, "app credentials", exc)]
        received = now()
        if answer.status >= 400 or not isinstance(answer.body.get("accessToken"), str):
            refused = f"DingTalk refuses the app's credentials ({_quoted(answer)})"
            return [*out, fail(AREA, "app credentials", refused, CREDENTIALS_FIX)]
        out.append(ok(AREA, "app credentials", f"{settings.client_id}: an access token"))
        if clock:
            out.append(clock_check(AREA, answer.date, sent=sent, received=received))
        out.append(_robot_check(settings))
        if settings.mode == "http":
            out.append(_callback_check(settings, secret))
        else:
            out.append(await _stream_check(client, settings, secret))
    return out


def _robot_check(settings: DingTalkSettings) -> Check:
    own = settings.robot_code is None or settings.robot_code == settings.client_id
    which = "the app's own robot (its Client ID)" if own else "robot_code"
    return ok(
        AREA,
        "robot",
        f"{settings.robot}, {which}; checked by the first send (DingTalk has no read-only call)",
    )


async def _stream_check(
    client: httpx.AsyncClient, settings: DingTalkSettings, secret: str
) -> Check:
    """The gateway hands out an endpoint for the robot's topic (credentials and Stream mode
    good), and the endpoint answers TCP; the ticket is not used."""
    name = "stream"
    body = {
        "clientId": settings.client_id,
        "clientSecret": secret,
        "subscriptions": [{"type": "CALLBACK", "topic": BOT_TOPIC}],
        "ua": "digest-bot-doctor",
        "localIp": "",
    }
    try:
        answer = await call(client, "POST", settings.openapi_base + GATEWAY_PATH, json=body)
    except Unreachable as exc:
        return unreachable(AREA, name, exc)
    endpoint = answer.body.get("endpoint")
    if answer.status >= 400 or not isinstance(endpoint, str) or not answer.body.get("ticket"):
        return fail(AREA, name, f"DingTalk refuses the stream ({_quoted(answer)})", STREAM_FIX)
    reason = await appdoctor.tcp_reachable(endpoint)
    if reason is not None:
        return fail(AREA, name, f"the stream's endpoint: {reason}", appdoctor.NETWORK_FIX)
    host = endpoint.split("//", 1)[-1].split("/", 1)[0]
    return ok(AREA, name, f"the gateway gives an endpoint; {host} answers")


def _callback_check(settings: DingTalkSettings, secret: str) -> Check:
    # the callback is signed with the Client Secret, present once the token came
    return appdoctor.callback_check(
        AREA,
        settings.listen_address,
        settings.callback_path,
        secrets={"Client Secret": lambda: secret},
        secrets_fix=CREDENTIALS_FIX,
        where="机器人配置 → 消息接收地址 (HTTP 模式)",
    )


def _quoted(answer: appdoctor.Answer) -> str:
    """HTTP status, code and message, for the table (DingTalk echoes no secret)."""
    code = answer.body.get("code", "")
    message = str(answer.body.get("message", ""))[:100]
    return f"HTTP {answer.status} {code} {message!r}".replace("  ", " ")
