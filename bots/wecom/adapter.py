"""The WeCom group-robot adapter: JSON posts to the webhook named by its key."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping
from typing import Any

from bots.workchat.adapter import Request, WebhookAdapter
from bots.workchat.transport import ErrorRule, Outcome
from digest_core.port import encode_body
from digest_core.rendering import wecom as wecom_render

log = logging.getLogger(__name__)

SEND_PATH = "/cgi-bin/webhook/send"
GUIDE = "https://developer.work.weixin.qq.com/document/path/91770"


#: Answer codes (``errcode``; 0 is success; https://developer.work.weixin.qq.com/document/
#: path/90313 lists WeCom's global codes).
WECOM_ERRORS: dict[int, ErrorRule] = {
    # 45009 "api freq out of limit" (real answers, e.g. github.com/WecomTeam/
    # wecom-openclaw-plugin/issues/48); the window is GUIDE's minute
    45009: ErrorRule(Outcome.RATE_LIMITED, "over 20 messages a minute", retry_after=60.0),
    # 93000 "invalid webhook url" (real answers, e.g. github.com/zema1/watchvuln/issues/146):
    # the key is wrong or the robot was removed from the group
    93000: ErrorRule(Outcome.GONE, "the webhook key is invalid: the robot was removed from "
                     "the group or the key is wrong"),
    # -1 "系统繁忙" (global codes)
    -1: ErrorRule(Outcome.TRANSIENT, "WeCom is busy"),
    # 40058 "markdown.content exceed max length 4096. Invalid input invalid Request
    # Parameter" (real answers quoted in public code; not on WeCom's pages)
    # NOT verified (as remembered): 40008 invalid message type; 44004 empty content
    40008: ErrorRule(Outcome.REJECTED, "invalid message type"),
    44004: ErrorRule(Outcome.REJECTED, "empty content"),
    40058: ErrorRule(Outcome.REJECTED, "a parameter is invalid (e.g. content over 4096 bytes)"),
}  # fmt: skip


class WeComAdapter(WebhookAdapter):
    """WeCom group robots: one named target per webhook key (see WebhookAdapter). WeCom has
    no signing: the key in the URL is the only credential."""

    name = "wecom"
    errors = WECOM_ERRORS
    #: the renderer the core uses for this platform's posts and notices
    flavor = wecom_render
    webhook_query = "key"

    def build_request(self, token: str, secret: str | None, payload: Mapping[str, Any]) -> Request:
        query = urllib.parse.urlencode({"key": token})
        return Request(f"{self.settings.base}{SEND_PATH}?{query}", encode_body(payload))
