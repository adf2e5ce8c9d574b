"""The Feishu/Lark custom-bot adapter: signed JSON posts to a group's webhook."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from bots.workchat.adapter import Request, WebhookAdapter
from bots.workchat.signing import feishu_sign
from bots.workchat.transport import ErrorRule, Outcome
from digest_core.port import encode_body
from digest_core.rendering import feishu as feishu_render

log = logging.getLogger(__name__)

HOOK_PATH = "/open-apis/bot/v2/hook/"
GUIDE = "https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot"


#: Answer codes (``code`` in the JSON answer; 0 is success).
FEISHU_ERRORS: dict[int, ErrorRule] = {
    # 11232: "限流错误" when the robot sends too often or the system is loaded (GUIDE,
    # 注意事项). Verified in the guide; its wait is not documented: the per-minute window.
    11232: ErrorRule(Outcome.RATE_LIMITED, "frequency limited by Feishu", retry_after=60.0),
    # 99991400 "request trigger frequency limit", with HTTP 429 and x-ogw-ratelimit-reset
    # (https://open.feishu.cn/document/server-docs/api-call-guide/frequency-control)
    99991400: ErrorRule(Outcome.RATE_LIMITED, "frequency limited by Feishu", retry_after=60.0),
    # 19021 "sign match fail or timestamp is not within one hour from current time" (GUIDE,
    # 签名校验; the text is quoted from real answers, e.g. blog.csdn.net/zhanglili1993/article/
    # details/136473704)
    19021: ErrorRule(
        Outcome.GONE,
        "the signature was refused: the signing secret for this target is wrong or no longer "
        "set on the robot (or this machine's clock is off by over an hour)",
    ),
    # Not on Feishu's pages, but the same in many public reports of real answers (HTTP 200):
    # 19001 "param invalid: incoming webhook access token invalid" (robot removed, bad URL)
    19001: ErrorRule(Outcome.GONE, "the webhook token is invalid: the robot was removed or "
                     "the webhook address is wrong"),
    # 19024 "Key Words Not Found" (the keyword check is on)
    19024: ErrorRule(Outcome.GONE, "the robot requires a keyword our posts do not contain; "
                     "use signing instead of keywords"),
    # 9499 "Bad Request" (GUIDE's example of a malformed body; also "fail to parse content")
    9499: ErrorRule(Outcome.REJECTED, "the message was refused as malformed"),
    # 19022 "Ip Not Allowed" (GUIDE, 安全设置 → IP 白名单: "// IP校验失败 {"code": 19022, "msg":
    # "Ip Not Allowed"}", as the guide is reproduced at blog.csdn.net/qq_43108153/article/
    # details/136166075)
    19022: ErrorRule(Outcome.GONE, "this machine's IP is not on the robot's IP whitelist"),
    # NOT verified (as remembered): 19002 "param invalid: msg_type"; 2200 "Internal Error",
    # reported near the rate limit (github.com/openclaw/openclaw/issues/70879)
    19002: ErrorRule(Outcome.REJECTED, "a parameter of the message is invalid"),
    2200: ErrorRule(Outcome.TRANSIENT, "Feishu had an internal error"),
}  # fmt: skip


class FeishuAdapter(WebhookAdapter):
    """Feishu/Lark custom bots: one named target per group webhook (see WebhookAdapter).

    A signed request carries ``timestamp`` (seconds, from the injected clock) and ``sign`` in
    the JSON body (:func:`bots.workchat.signing.feishu_sign`); Feishu refuses one more than
    an hour off.
    """

    name = "feishu"
    errors = FEISHU_ERRORS
    #: the renderer the core uses for this platform's posts and notices
    flavor = feishu_render
    webhook_path = HOOK_PATH

    def build_request(self, token: str, secret: str | None, payload: Mapping[str, Any]) -> Request:
        body = dict(payload)
        if secret:
            timestamp = int(self.clock.now().timestamp())
            body = {"timestamp": str(timestamp), "sign": feishu_sign(secret, timestamp), **body}
        return Request(f"{self.settings.base}{HOOK_PATH}{token}", encode_body(body))

    def answer_code(self, answer: Mapping[str, Any]) -> tuple[int, str]:
        # older answers carry StatusCode/StatusMessage besides code/msg (GUIDE, 请求示例)
        code = answer.get("code", answer.get("StatusCode", 0))
        text = answer.get("msg", answer.get("StatusMessage", ""))
        return (int(code) if isinstance(code, int) else -1), str(text)
