"""DingTalk's documented sending limits, as the core paces its sends (its adapter's ``limits``,
and its declaration's)."""

from __future__ import annotations

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
