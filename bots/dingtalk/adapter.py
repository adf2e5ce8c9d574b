"""The DingTalk custom-robot adapter: JSON posts, signed in the query string."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from bots.workchat.adapter import Request, WebhookAdapter
from bots.workchat.signing import dingtalk_query
from bots.workchat.transport import ErrorRule, Outcome
from digest_core.port import encode_body
from digest_core.rendering import dingtalk as dingtalk_render

log = logging.getLogger(__name__)

SEND_PATH = "/robot/send"
GUIDE = "https://open.dingtalk.com/document/orgapp/custom-robot-access"

#: the penalty after going over: "限流10分钟" (GUIDE)
PENALTY_SECONDS = 600.0

#: Answer codes (``errcode``; 0 is success).
DINGTALK_ERRORS: dict[int, ErrorRule] = {
    # 130101 "send too fast, exceed 20 times per minute" (quoted from real answers, e.g.
    # blog.csdn.net/jialiuyang/article/details/118615052; the 10-minute penalty is GUIDE's)
    130101: ErrorRule(Outcome.RATE_LIMITED, "sending too fast (over 20 a minute): DingTalk "
                      "holds this robot for 10 minutes", retry_after=PENALTY_SECONDS),
    # 310000: "sign not match", "invalid timestamp", "keywords not in content", IP not
    # allowed — the security settings (https://open.dingtalk.com/document/orgapp/
    # customize-robot-security-settings; texts from real answers in GitHub issues)
    310000: ErrorRule(Outcome.GONE, "the robot's security check failed: the 加签 secret for "
                      "this target is wrong or missing (or the robot wants a keyword or an IP "
                      "whitelist we do not meet, or this machine's clock is off by over an "
                      "hour)"),
    # -1 "系统繁忙" (DingTalk's global codes, https://open.dingtalk.com/document/orgapp/
    # server-api-error-codes-1)
    -1: ErrorRule(Outcome.TRANSIENT, "DingTalk is busy"),
    # 300001 "token is not exist" (real answers quoted in public code); not on DingTalk's pages
    # NOT verified (as developers report them): 300005 "token is not exist" and 660026
    # (rate limited) from the newer gateway; 400101 access_token不存在; 400102 机器人已停用;
    # 400106 机器人不存在; 400013 群已被解散
    300001: ErrorRule(Outcome.GONE, "the access token is unknown: the robot was removed or "
                      "the webhook address is wrong"),
    300005: ErrorRule(Outcome.GONE, "the access token is unknown: the robot was removed or "
                      "the webhook address is wrong"),
    660026: ErrorRule(Outcome.RATE_LIMITED, "sending too fast", retry_after=PENALTY_SECONDS),
    400101: ErrorRule(Outcome.GONE, "the access token is unknown"),
    400102: ErrorRule(Outcome.GONE, "the robot is disabled"),
    400106: ErrorRule(Outcome.GONE, "the robot does not exist"),
    400013: ErrorRule(Outcome.GONE, "the group was dissolved"),
    # 410100 发送速度太快而限流 (the newer code of 130101)
    410100: ErrorRule(Outcome.RATE_LIMITED, "sending too fast", retry_after=PENALTY_SECONDS),
    # 460101 "message too long, exceed 20000 bytes"; 430101-430104 unsafe content
    460101: ErrorRule(Outcome.REJECTED, "the message is too long"),
    430104: ErrorRule(Outcome.REJECTED, "the message was refused as unsuitable content"),
}  # fmt: skip


class DingTalkAdapter(WebhookAdapter):
    """DingTalk custom robots: one named target per group webhook (see WebhookAdapter).

    A signed request carries ``timestamp`` (milliseconds, from the injected clock) and the
    URL-encoded ``sign`` as query parameters (:func:`bots.workchat.signing.dingtalk_query`).
    """

    name = "dingtalk"
    errors = DINGTALK_ERRORS
    #: the renderer the core uses for this platform's posts and notices
    flavor = dingtalk_render
    webhook_query = "access_token"

    def build_request(self, token: str, secret: str | None, payload: Mapping[str, Any]) -> Request:
        timestamp_ms = int(self.clock.now().timestamp() * 1000)
        query = dingtalk_query(token, secret, timestamp_ms)
        return Request(f"{self.settings.base}{SEND_PATH}?{query}", encode_body(payload))
