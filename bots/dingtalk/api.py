"""The app robot's sending side: the access token and the robot's send APIs, over httpx.

https://open.dingtalk.com/document/orgapp/obtain-the-access_token-of-an-internal-app (``POST
/v1.0/oauth2/accessToken``), …/the-robot-sends-a-group-message (``POST
/v1.0/robot/groupMessages/send``) and …/chatbots-send-one-on-one-chat-messages-in-batches
(``POST /v1.0/robot/oToMessages/batchSend``: one user per call here, so each reader's part is
its own ledger part). A message of our renderer (``markdown`` or ``actionCard``) becomes a
``msgKey`` and its ``msgParam``: ``sampleMarkdown`` {title, text}, ``sampleActionCard<N>``
{title, text, actionTitle1, actionURL1, …} (one button: ``sampleActionCard`` {title, text,
singleTitle, singleURL}, DingTalk's one-button template).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from bots.workchat.app.api import AppApi
from bots.workchat.transport import WebhookTransport
from digest_core.port import (
    Clock,
    ConfigError,
    Message,
    RateLimited,
    Rejected,
    TargetGone,
    TransientError,
    encode_body,
)

log = logging.getLogger(__name__)

TOKEN_PATH = "/v1.0/oauth2/accessToken"
GROUP_PATH = "/v1.0/robot/groupMessages/send"
OTO_PATH = "/v1.0/robot/oToMessages/batchSend"
#: a user over DingTalk's flow control waits this long (DingTalk names no wait)
FLOW_CONTROL_SECONDS = 60.0


def msg_param(message: Message) -> tuple[str, dict[str, str]]:
    """The ``msgKey`` and ``msgParam`` of one of our payloads."""
    payload = message.payload
    if "actionCard" in payload:
        card = payload["actionCard"]
        params = {"title": card["title"], "text": card["text"]}
        if len(card["btns"]) == 1:  # the one-button template: singleTitle, singleURL
            [button] = card["btns"]
            params |= {"singleTitle": button["title"], "singleURL": button["actionURL"]}
            return "sampleActionCard", params
        for n, button in enumerate(card["btns"], start=1):
            params[f"actionTitle{n}"] = button["title"]
            params[f"actionURL{n}"] = button["actionURL"]
        return f"sampleActionCard{len(card['btns'])}", params
    md = payload["markdown"]
    return "sampleMarkdown", {"title": md["title"], "text": md["text"]}


class DingTalkApi(AppApi):
    """The calls the app robot makes, with its access token cached until near expiry."""

    def __init__(
        self,
        *,
        base: str,
        client_id: str,
        client_secret: str,
        robot_code: str,
        transport: WebhookTransport,
        clock: Clock,
    ) -> None:
        super().__init__(base=base, secret=client_secret, transport=transport, clock=clock)
        self.client_id, self.robot_code = client_id, robot_code

    async def _fetch_token(self, target: str) -> tuple[str, float]:
        """An access token.

        Raises:
            ConfigError: DingTalk refused the Client ID or secret.
            TransientError: as the transport.
        """
        body = encode_body({"appKey": self.client_id, "appSecret": self._secret})
        status, answer = await self._transport.post(f"{self.base}{TOKEN_PATH}", body, target=target)
        token = answer.get("accessToken")
        if status >= 400 or not isinstance(token, str):
            raise ConfigError(
                f"DingTalk refused the app's credentials ({str(answer.get('code'))[:60]}): "
                "check dingtalk.client_id and DIGEST_BOT_DINGTALK__CLIENT_SECRET",
                key="dingtalk.client_id",
            )
        return token, float(answer.get("expireIn", 7200))

    async def send(self, target: str, message: Message, *, group: bool) -> str:
        """Send ``message`` to a group conversation or one user; DingTalk's query key.

        Raises:
            RateLimited, TransientError, OutcomeUnknown, TargetGone, Rejected: the Platform
            contract (the robot out of the group, an unknown user: TargetGone).
        """
        key, params = msg_param(message)
        body: dict[str, Any] = {
            "robotCode": self.robot_code,
            "msgKey": key,
            "msgParam": json.dumps(params, ensure_ascii=False),
        }
        if group:
            body["openConversationId"] = target
        else:
            body["userIds"] = [target]
        token = await self.token(target=target)
        status, answer = await self._transport.request(
            "POST",
            f"{self.base}{GROUP_PATH if group else OTO_PATH}",
            encode_body(body),
            target=target,
            headers={"x-acs-dingtalk-access-token": token},
        )
        if status >= 400:
            raise self._refused(status, answer, target)
        if target in (answer.get("flowControlledStaffIdList") or []):
            raise RateLimited(
                "DingTalk's flow control holds this user",
                platform="dingtalk",
                target=target,
                retry_after=FLOW_CONTROL_SECONDS,
            )
        if target in (answer.get("invalidStaffIdList") or []):
            raise TargetGone(
                "not a user this robot may write to (outside the app's 可见范围?)",
                platform="dingtalk",
                target=target,
            )
        return str(answer.get("processQueryKey", ""))

    def _refused(self, status: int, answer: dict[str, Any], target: str) -> Exception:
        code = str(answer.get("code", ""))
        quoted = f"HTTP {status} {code} {str(answer.get('message', ''))[:120]!r}"
        if status == 401 or code == "InvalidAuthentication":
            self._token = None
            return TransientError(
                f"the access token was refused ({quoted}); a new one is fetched",
                platform="dingtalk",
                target=target,
            )
        if code.startswith("Forbidden.AccessDenied") or code.endswith("openConversationId"):
            return TargetGone(
                f"the robot cannot post there ({quoted})", platform="dingtalk", target=target
            )
        return Rejected(f"refused with {quoted}", platform="dingtalk", target=target)
