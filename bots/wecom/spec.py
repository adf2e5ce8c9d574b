"""The registry entry of wecom: WeCom (企业微信) group robot webhooks, send-only."""

from __future__ import annotations

from bots.wecom.settings import WeComSettings
from bots.workchat.spec import webhook_platform
from digest_core.port import PlatformLimits, Rate, TargetKind

#: The documented sending limits (GUIDE: ``bots.wecom.adapter.GUIDE``, the robot's guide).
#: "每个机器人发送的消息不能超过20条/分钟" (GUIDE, 消息发送频率限制). A burst of 3 plus 16/min
#: keeps every 60 s window at 19 (≤ 20). The overall rate is ours, not WeCom's.
WECOM_LIMITS = PlatformLimits(
    overall=Rate(10.0, burst=1),
    per_target={kind: Rate(16 / 60, burst=3) for kind in TargetKind},
)

PLATFORM = webhook_platform(
    WeComSettings,
    summary="WeCom (企业微信) group robot webhooks (send-only)",
    renderer="digest_core.rendering.wecom",
    limits=WECOM_LIMITS,
    adapter="bots.wecom.adapter:WeComAdapter",
    doctor="bots.wecom.doctor:checks",
)
