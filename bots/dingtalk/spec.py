"""The registry entry of dingtalk: DingTalk (钉钉) custom robot webhooks, send-only."""

from __future__ import annotations

from bots.dingtalk.settings import DingTalkSettings
from bots.workchat.spec import webhook_platform

PLATFORM = webhook_platform(
    DingTalkSettings,
    summary="DingTalk (钉钉) custom robot webhooks (send-only)",
    renderer="bots.dingtalk.render",
    adapter="bots.dingtalk.adapter:DingTalkAdapter",
)
