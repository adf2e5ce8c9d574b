"""WeCom's documented sending limits, as the core paces its sends (its adapter's ``limits``,
and its declaration's)."""

from __future__ import annotations

from digest_core.port import PlatformLimits, Rate, TargetKind

#: The documented sending limits (GUIDE: ``bots.wecom.adapter.GUIDE``, the robot's guide).
#: "每个机器人发送的消息不能超过20条/分钟" (GUIDE, 消息发送频率限制). A burst of 3 plus 16/min
#: keeps every 60 s window at 19 (≤ 20). The overall rate is ours, not WeCom's.
WECOM_LIMITS = PlatformLimits(
    overall=Rate(10.0, burst=1),
    per_target={kind: Rate(16 / 60, burst=3) for kind in TargetKind},
)
