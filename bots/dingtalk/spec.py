"""The registry entry of dingtalk: DingTalk (钉钉) custom robot webhooks, and the app robot
that answers readers (``[dingtalk] client_id``; dingtalk-stream is imported when it starts)."""

from __future__ import annotations

from bots.dingtalk.settings import DingTalkSettings
from bots.workchat.spec import webhook_platform
from digest_core.port import PlatformLimits, Rate, TargetKind

#: The documented sending limits (GUIDE: ``bots.dingtalk.adapter.GUIDE``, the robot's guide).
#: "每个机器人每分钟最多发送20条消息到群里，如果超过20条，会限流10分钟" (GUIDE, 调用频率限制).
#: A burst of 3 plus 16/min keeps every 60 s window at 19 (≤ 20). DingTalk documents no
#: limit across robots; the overall rate is ours. The app robot's send APIs name no per-chat
#: limit we could verify: the same 16/min per conversation and per reader is kept.
DINGTALK_LIMITS = PlatformLimits(
    overall=Rate(10.0, burst=1),
    per_target={kind: Rate(16 / 60, burst=3) for kind in TargetKind},
)

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
