"""The app bot's sending side: the tenant access token and the send-message API, over httpx.

Not the SDK's API client: lark-oapi 1.7.5 fetches tokens with a blocking ``requests`` call even
on its async path and opens a new connection per request. This is the same HTTP transport
as the webhooks (:class:`~bots.workchat.transport.WebhookTransport`: timeouts, a cut answer
as :class:`~digest_core.errors.OutcomeUnknown`, secrets kept out of logs), over the documented
calls: https://open.feishu.cn/document/server-docs/authentication-management/access-token/
tenant_access_token_internal and https://open.feishu.cn/document/server-docs/im-v1/message/create.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from bots.workchat.app.api import AppApi
from bots.workchat.transport import ErrorRule, Outcome, WebhookTransport, translate
from digest_core.port import (
    Clock,
    ConfigError,
    Message,
    PartKey,
    TransientError,
    encode_body,
)

log = logging.getLogger(__name__)

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
MESSAGES_PATH = "/open-apis/im/v1/messages"
BOT_INFO_PATH = "/open-apis/bot/v3/info"
#: codes of a token Feishu no longer takes: fetch a new one, send again
TOKEN_CODES = frozenset({99991661, 99991663, 99991668})
#: "invalid request parameter", and, with the text "Internal Error", Feishu's own trouble
INVALID_PARAMETER = 230001

#: Answer codes of the send API (``code``, with HTTP 400; 0 is success). Checked against
#: Feishu's pages: the create page (https://open.larkoffice.com/document/uAjLw4CM/
#: ukTMukTMukTM/reference/im-v1/message/create.md: prerequisites, "5 QPS", "1000 次/分钟、50
#: 次/秒"), the error table the im-v1 message pages share (as published on the Edit message
#: page, https://open.larksuite.com/document/uAjLw4CM/ukTMukTMukTM/reference/im-v1/message/
#: update: the texts quoted below), and the 230001 troubleshooting page (https://
#: open.larkoffice.com/document/uAjLw4CM/ugTN1YjL4UTN24CO1UjN/trouble-shooting/
#: how-to-resolve-error-230001.md: "…invalid request parameter, ext=invalid receive_id.").
APP_ERRORS: dict[int, ErrorRule] = {
    # 99991400 "request trigger frequency limit": the API's 50/s, 1000/min (HTTP 429 or 400,
    # x-ogw-ratelimit-reset; api-call-guide/frequency-control)
    99991400: ErrorRule(Outcome.RATE_LIMITED, "frequency limited by Feishu", retry_after=1.0),
    # 230020 "This operation triggers the frequency limit.": 5 QPS per user or group
    230020: ErrorRule(Outcome.RATE_LIMITED, "too many messages to this chat", retry_after=1.0),
    # 230002 "The bot can not be outside the group."
    230002: ErrorRule(Outcome.GONE, "the bot is not in this group (add it, then reactivate)"),
    # 230013 "Bot has NO availability to this user.": outside the app's 可用范围
    230013: ErrorRule(Outcome.GONE, "this user is outside the app's availability (可用范围)"),
    # 230006 "Bot ability is not activated."
    230006: ErrorRule(Outcome.GONE, "the app's bot ability (机器人能力) is not enabled"),
    # 230027 "Lack of necessary permissions."
    230027: ErrorRule(Outcome.GONE, "the app lacks im:message:send_as_bot"),
    # 230035 "Send message permission deny." (the group muted, or the tenant's communication
    # permissions) and 230038 "Cross tenant p2p chat operate forbid."
    230035: ErrorRule(Outcome.GONE, "the bot may not send here (muted group, or the tenant's "
                      "communication permissions)"),
    230038: ErrorRule(Outcome.GONE, "a user of another tenant cannot be written to privately"),
    # 230001 invalid parameter (ext=… names it); 230025 "The length of the message content
    # reaches its limit.": "text message body 150 KB … card and rich text message body 30 KB"
    230001: ErrorRule(Outcome.REJECTED, "a parameter of the message is invalid"),
    230025: ErrorRule(Outcome.REJECTED, "the message is too long"),
    # 230099 is in no table we found; real answers read "Failed to create card content,
    # ext=ErrCode: 11310; ErrMsg: card table number over limit" (github.com/sipeed/picoclaw
    # issues/1727)
    230099: ErrorRule(Outcome.REJECTED, "the card was refused"),
    # 2200 "内部错误" with HTTP 500, answered by the send API (github.com/larksuite/
    # oapi-sdk-python/issues/15); -1: an answer without a code (a gateway's 5xx page)
    2200: ErrorRule(Outcome.TRANSIENT, "Feishu had an internal error"),
    -1: ErrorRule(Outcome.TRANSIENT, "Feishu had an internal error"),
}  # fmt: skip


def receive_id_type(target_id: str) -> str:
    """``open_id`` for a user (``ou_…``: readers' private chats), else ``chat_id``."""
    return "open_id" if target_id.startswith("ou_") else "chat_id"


def message_uuid(key: PartKey) -> str:
    """The send's dedup key for a ledger part: equal on every retry and after a restart, so
    Feishu creates the part once within an hour ("持有相同uuid的请求1小时内至多成功发送一条消息";
    at most 50 characters)."""
    raw = f"{key.issue_date.isoformat()}:{key.revision}:{key.generation}:{key.target}:{key.part}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def send_body(receive_id: str, message: Message, uuid: str | None) -> dict[str, Any]:
    """The send API's body for a payload of our renderers: a card (``card``) or rich text
    (``content.post``); ``content`` is the message as a JSON string."""
    payload = message.payload
    if "card" in payload:
        msg_type, content = "interactive", payload["card"]
    elif payload.get("msg_type") == "post":
        msg_type, content = "post", payload["content"]["post"]
    else:
        msg_type, content = str(payload["msg_type"]), payload["content"]
    body: dict[str, Any] = {
        "receive_id": receive_id,
        "msg_type": msg_type,
        "content": json.dumps(content, ensure_ascii=False, separators=(",", ":")),
    }
    if uuid is not None:
        body["uuid"] = uuid
    return body


class FeishuApi(AppApi):
    """The calls the app bot makes, with its tenant access token cached until near expiry."""

    def __init__(
        self,
        *,
        base: str,
        app_id: str,
        app_secret: str,
        transport: WebhookTransport,
        clock: Clock,
    ) -> None:
        super().__init__(base=base, secret=app_secret, transport=transport, clock=clock)
        self.app_id = app_id

    async def _fetch_token(self, target: str) -> tuple[str, float]:
        """A tenant access token (its lifetime: Feishu's "expire", seconds).

        Raises:
            ConfigError: Feishu refused the app id or secret.
            TransientError, RateLimited: as the transport.
        """
        body = encode_body({"app_id": self.app_id, "app_secret": self._secret})
        _, answer = await self._transport.post(f"{self.base}{TOKEN_PATH}", body, target=target)
        code = answer.get("code")
        token = answer.get("tenant_access_token")
        if code != 0 or not isinstance(token, str):
            raise ConfigError(
                f"Feishu refused the app's credentials ({code} {str(answer.get('msg'))[:100]!r})"
                ": check feishu.app_id and DIGEST_BOT_FEISHU__APP_SECRET",
                key="feishu.app_id",
            )
        return token, float(answer.get("expire", 7200))

    async def bot_open_id(self) -> str:
        """The bot's own open_id (to tell @-mentions of it in groups).

        Raises:
            ConfigError, TransientError: as :meth:`token`, or the app has no bot.
        """
        answer = await self._call("GET", BOT_INFO_PATH, None, target="app")
        open_id = (answer.get("bot") or {}).get("open_id")
        if not isinstance(open_id, str):
            raise ConfigError(
                "the app has no bot: enable 机器人 (bot) under 应用能力", key="feishu.app_id"
            )
        return open_id

    async def send(self, receive_id: str, message: Message, *, uuid: str | None) -> str:
        """Send ``message`` to ``receive_id`` (a chat or an open_id); the message id.

        Raises:
            RateLimited, TransientError, OutcomeUnknown, TargetGone, Rejected: as the
            Platform contract (a token Feishu refused is renewed and the send is transient).
        """
        id_type = receive_id_type(receive_id)
        body = send_body(receive_id, message, uuid)
        answer = await self._call(
            "POST", f"{MESSAGES_PATH}?receive_id_type={id_type}", body, target=receive_id
        )
        message_id = (answer.get("data") or {}).get("message_id")
        return str(message_id or "")

    async def _call(
        self, method: str, path: str, body: Mapping[str, Any] | None, *, target: str
    ) -> dict[str, Any]:
        token = await self.token(target=target)
        headers = {"Authorization": f"Bearer {token}"}
        raw = encode_body(body) if body is not None else None
        _, answer = await self._transport.request(
            method, f"{self.base}{path}", raw, target=target, headers=headers
        )
        code = answer.get("code", -1)
        if code == 0:
            return answer
        code = int(code) if isinstance(code, int) else -1
        text = str(answer.get("msg", ""))
        if code in TOKEN_CODES:
            self._token = None
            raise TransientError(
                f"Feishu refused the access token ({code}); a new one is fetched",
                platform="feishu",
                target=target,
            )
        if code == INVALID_PARAMETER and text.strip().rstrip(".").lower() == "internal error":
            # the 230001 troubleshooting page's first row: "400 | 230001 | Internal Error |
            # 内部异常": Feishu's trouble, not our parameter
            raise TransientError(
                f"Feishu had an internal error ({code} {text[:60]!r})",
                platform="feishu",
                target=target,
            )
        raise translate(code, text, APP_ERRORS, platform="feishu", target=target)
