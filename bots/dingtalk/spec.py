"""The registry entry of dingtalk: DingTalk (钉钉) custom robot webhooks, and the app robot
that answers readers (``[dingtalk] client_id``; dingtalk-stream is imported when it starts)."""

from __future__ import annotations

from bots.dingtalk.pacing import DINGTALK_LIMITS
from bots.dingtalk.settings import DingTalkSettings
from bots.workchat.spec import webhook_platform

PLATFORM = webhook_platform(
    DingTalkSettings,
    summary="DingTalk (钉钉) custom robot webhooks, and the app robot (dingtalk-stream)",
    renderer="digest_core.rendering.dingtalk",
    limits=DINGTALK_LIMITS,
    adapter="bots.dingtalk.adapter:DingTalkAdapter",
    app_adapter="bots.dingtalk.app:DingTalkAppAdapter",
    sdk="dingtalk-stream",
    doctor="bots.dingtalk.doctor:checks",
)
