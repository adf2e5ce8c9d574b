"""DingTalk's `digest-bot doctor` checks: the custom robots' webhooks (:mod:`bots.workchat.doctor`)
and, with ``[dingtalk] client_id``, the app robot: its credentials (an access token), its
robot code, and how it receives: the Stream gateway and the address it hands out, or the
HTTP callback's settings. Plain calls over httpx; nothing is sent to any chat and no stream
is opened (:mod:`bots.workchat.app.doctor`).

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

import httpx

from bots.dingtalk.adapter import DingTalkAdapter
from bots.dingtalk.api import TOKEN_PATH
from bots.dingtalk.settings import DingTalkSettings
from bots.doctor import Check, fail, ok
from bots.workchat.app import doctor as app_doctor
from bots.workchat.app.doctor import Unreachable, call, unreachable

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


def probe(settings: DingTalkSettings) -> app_doctor.AppProbe:
    """The app robot's checks: the SDK, the credentials (an access token), the robot, and the
    stream or the callback."""

    async def more(client: httpx.AsyncClient, secret: str, _: app_doctor.Answer) -> list[Check]:
        return [_robot_check(settings)]

    return app_doctor.AppProbe(
        area=AREA,
        sdk=("dingtalk_stream", "dingtalk"),
        secret=lambda: settings.resolved_client_secret().get_secret_value(),
        credentials_fix=CREDENTIALS_FIX,
        token_url=settings.openapi_base + TOKEN_PATH,
        token_body=lambda secret: {"appKey": settings.client_id, "appSecret": secret},
        granted=lambda a: a.status < 400 and isinstance(a.body.get("accessToken"), str),
        granted_detail=f"{settings.client_id}: an access token",
        refused="DingTalk refuses the app's credentials",
        quoted=_quoted,
        more=more,
        callback=lambda secret: _callback_check(settings, secret),
        connection=lambda client, secret: _stream_check(client, settings, secret),
    )


#: DingTalk's lines of the doctor's table; none when nothing of DingTalk is configured
checks = app_doctor.platform_checks("client_id", probe, webhook=DingTalkAdapter)


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
    reason = await app_doctor.tcp_reachable(endpoint)
    if reason is not None:
        return fail(AREA, name, f"the stream's endpoint: {reason}", app_doctor.NETWORK_FIX)
    host = endpoint.split("//", 1)[-1].split("/", 1)[0]
    return ok(AREA, name, f"the gateway gives an endpoint; {host} answers")


def _callback_check(settings: DingTalkSettings, secret: str) -> Check:
    # the callback is signed with the Client Secret, present once the token came
    return app_doctor.callback_check(
        AREA,
        settings.listen_address,
        settings.callback_path,
        secrets={"Client Secret": lambda: secret},
        secrets_fix=CREDENTIALS_FIX,
        where="机器人配置 → 消息接收地址 (HTTP 模式)",
    )


def _quoted(answer: app_doctor.Answer) -> str:
    """HTTP status, code and message, for the table (DingTalk echoes no secret)."""
    code = answer.body.get("code", "")
    message = str(answer.body.get("message", ""))[:100]
    return f"HTTP {answer.status} {code} {message!r}".replace("  ", " ")
