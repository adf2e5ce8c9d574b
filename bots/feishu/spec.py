"""The registry entry of feishu: Feishu/Lark custom bot webhooks, send-only."""

from __future__ import annotations

from bots.feishu.settings import FeishuSettings
from bots.workchat.spec import webhook_platform
from digest_core.port import PlatformLimits, Rate, TargetKind

#: The documented sending limits (GUIDE: ``bots.feishu.adapter.GUIDE``, the robot's guide).
#: "单租户单机器人 100 次/分钟，5 次/秒" (GUIDE, 注意事项; also
#: https://open.feishu.cn/document/server-docs/api-call-guide/frequency-control). A burst of 3
#: plus 1.5/s keeps every 1 s window at 4.5 (≤ 5) and every minute at 93 (≤ 100). Feishu
#: documents no limit across a tenant's robots; the overall rate is ours, not Feishu's.
FEISHU_LIMITS = PlatformLimits(
    overall=Rate(10.0, burst=1),
    per_target={kind: Rate(1.5, burst=3) for kind in TargetKind},
)

PLATFORM = webhook_platform(
    FeishuSettings,
    summary="Feishu/Lark custom bot webhooks (send-only)",
    renderer="digest_core.rendering.feishu",
    limits=FEISHU_LIMITS,
    adapter="bots.feishu.adapter:FeishuAdapter",
)
