"""Feishu's `digest-bot doctor` checks: the custom bots' webhooks (:mod:`bots.workchat.doctor`)
and, with ``[feishu] app_id``, the app bot: its credentials (a tenant access token), its bot
(enabled in the tenant), and how it receives: the long connection's endpoint and address,
or the HTTP callback's settings. Plain calls over httpx, so the ``Date`` header can be read;
nothing is sent to any chat and no long connection is opened (:mod:`bots.workchat.app.doctor`).

- Token: https://open.feishu.cn/document/server-docs/authentication-management/access-token/
  tenant_access_token_internal (``code`` 0 and ``tenant_access_token``).
- Bot: ``GET /open-apis/bot/v3/info`` (https://open.larkoffice.com/document/ukTMukTMukTM/
  uAjMxEjLwITMx4CMyETM.md): "需要启用机器人能力"; ``activate_status`` 2 is "租户启用".
- Long connection: ``POST /callback/ws/endpoint`` as lark-oapi's ``ws.Client`` asks it
  (``{"AppID", "AppSecret"}``; code 0 and ``data.URL``; the codes lark_oapi/ws/const.py
  names: 514 AUTH_FAILED, 1000040350 EXCEED_CONN_LIMIT, 1 and 1000040343 the server's).
"""

from __future__ import annotations

import httpx

from bots.doctor import Check, fail, ok
from bots.feishu.adapter import FeishuAdapter
from bots.feishu.api import BOT_INFO_PATH, TOKEN_PATH
from bots.feishu.settings import FeishuSettings
from bots.workchat.app import doctor as app_doctor
from bots.workchat.app.doctor import Unreachable, call, unreachable

AREA = "feishu"
ENDPOINT_PATH = "/callback/ws/endpoint"
#: the endpoint's codes (lark_oapi/ws/const.py)
AUTH_FAILED, FORBIDDEN, EXCEED_CONN_LIMIT = 514, 403, 1000040350
#: ``activate_status`` of ``bot/v3/info``, as its page lists them
ACTIVATE_STATUS = {
    0: "initialised, not installed in the tenant (初始化，租户待安装)",
    1: "disabled by the tenant (租户停用)",
    2: "enabled in the tenant (租户启用)",
    3: "installed, not enabled yet (安装后待启用)",
    4: "upgraded, not enabled yet (升级待启用)",
    5: "disabled: its license expired (license过期停用)",
    6: "disabled: the Lark plan expired or was downgraded (Lark套餐到期或降级停用)",
}
CREDENTIALS_FIX = (
    "copy the App ID and App Secret from the developer console (开发者后台 → 凭证与基础信息) "
    "into feishu.app_id and DIGEST_BOT_FEISHU__APP_SECRET"
)
BOT_FIX = "enable the bot (应用能力 → 机器人), then publish a version (版本管理与发布)"
ENABLE_FIX = (
    "publish a version (版本管理与发布) and have the tenant's admin approve and enable the app"
)
LONG_CONNECTION_FIX = (
    'select 事件与回调 → 订阅方式 → 使用长连接接收事件 and save it, or set feishu.mode = "http"'
)
CALLBACK_FIX = (
    "copy 事件与回调 → 加密策略 → Encrypt Key and Verification Token into "
    "DIGEST_BOT_FEISHU__ENCRYPT_KEY and DIGEST_BOT_FEISHU__VERIFICATION_TOKEN"
)


def probe(settings: FeishuSettings) -> app_doctor.AppProbe:
    """The app bot's checks: the SDK, the credentials (a tenant access token), the bot, and
    the long connection or the callback."""

    async def more(client: httpx.AsyncClient, secret: str, token: app_doctor.Answer) -> list[Check]:
        return [await _bot_check(client, settings.base, token.body["tenant_access_token"])]

    return app_doctor.AppProbe(
        area=AREA,
        sdk=("lark_oapi", "feishu"),
        secret=lambda: settings.resolved_app_secret().get_secret_value(),
        credentials_fix=CREDENTIALS_FIX,
        token_url=settings.base + TOKEN_PATH,
        token_body=lambda secret: {"app_id": settings.app_id, "app_secret": secret},
        granted=lambda a: (
            a.body.get("code") == 0 and isinstance(a.body.get("tenant_access_token"), str)
        ),
        granted_detail=f"{settings.app_id}: a tenant access token",
        refused="Feishu refuses the app's credentials",
        quoted=_quoted,
        more=more,
        callback=lambda _: _callback_check(settings),
        connection=lambda client, secret: _long_connection_check(client, settings, secret),
    )


#: Feishu's lines of the doctor's table; none when nothing of Feishu is configured
checks = app_doctor.platform_checks("app_id", probe, webhook=FeishuAdapter)


async def _bot_check(client: httpx.AsyncClient, base: str, token: str) -> Check:
    """The app's bot: enabled as an ability, and the app enabled in the tenant."""
    try:
        answer = await call(
            client, "GET", base + BOT_INFO_PATH, headers={"Authorization": f"Bearer {token}"}
        )
    except Unreachable as exc:
        return unreachable(AREA, "bot", exc)
    bot = answer.body.get("bot")
    if answer.body.get("code") != 0 or not isinstance(bot, dict) or not bot.get("open_id"):
        return fail(AREA, "bot", f"the app has no bot ({_quoted(answer)})", BOT_FIX)
    name, status = bot.get("app_name") or "the app", bot.get("activate_status")
    if status != 2:
        state = (
            ACTIVATE_STATUS.get(status, f"in state {status!r}")
            if isinstance(status, int)
            else f"in state {status!r}"
        )
        return fail(AREA, "bot", f"{name} is {state}", ENABLE_FIX)
    return ok(AREA, "bot", f"{name} (open_id {bot['open_id']}), {ACTIVATE_STATUS[2]}")


async def _long_connection_check(
    client: httpx.AsyncClient, settings: FeishuSettings, secret: str
) -> Check:
    """The endpoint hands out an address (credentials and the long-connection mode good),
    and that address answers TCP; no connection is opened on it."""
    name = "long connection"
    assert settings.app_id is not None
    body = {"AppID": settings.app_id, "AppSecret": secret}
    try:
        answer = await call(
            client, "POST", settings.base + ENDPOINT_PATH, json=body, headers={"locale": "zh"}
        )
    except Unreachable as exc:
        return unreachable(AREA, name, exc)
    code, data = answer.body.get("code"), answer.body.get("data") or {}
    url = data.get("URL") if isinstance(data, dict) else None
    if answer.status != 200 or code != 0 or not isinstance(url, str):
        return _endpoint_refused(answer)
    reason = await app_doctor.tcp_reachable(url)
    if reason is not None:
        return fail(AREA, name, f"the long connection's address: {reason}", app_doctor.NETWORK_FIX)
    host = url.split("//", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    return ok(AREA, name, f"the endpoint gives an address; {host} answers")


def _endpoint_refused(answer: app_doctor.Answer) -> Check:
    name, code = "long connection", answer.body.get("code")
    quoted = _quoted(answer)
    if code in (AUTH_FAILED, FORBIDDEN):
        return fail(
            AREA, name, f"Feishu refuses the long connection ({quoted})", LONG_CONNECTION_FIX
        )
    if code == EXCEED_CONN_LIMIT:
        return fail(
            AREA,
            name,
            f"the app has all the connections Feishu allows ({quoted})",
            "stop the other instances of the bot (Feishu allows 50 connections per app)",
        )
    return fail(AREA, name, f"the endpoint answered {quoted}", "try again later; see the message")


def _callback_check(settings: FeishuSettings) -> Check:
    return app_doctor.callback_check(
        AREA,
        settings.listen_address,
        settings.callback_path,
        secrets={
            "Encrypt Key": settings.resolved_encrypt_key,
            "Verification Token": settings.resolved_verification_token,
        },
        secrets_fix=CALLBACK_FIX,
        where="事件与回调 → 请求地址 (and 回调配置 for the cards' buttons)",
    )


def _quoted(answer: app_doctor.Answer) -> str:
    """The answer's code and message, for the table (never a secret: Feishu echoes none)."""
    code = answer.body.get("code", f"HTTP {answer.status}")
    return f"{code} {str(answer.body.get('msg', ''))[:100]!r}"
