"""The registry entry of feishu: Feishu/Lark custom bot webhooks, and the app bot that answers
readers (``[feishu] app_id``; lark-oapi is imported by the app bot only, when it starts)."""

from __future__ import annotations

from bots.feishu.settings import FeishuSettings
from bots.workchat.spec import webhook_platform
from digest_core.port import PlatformLimits, Rate, TargetKind

#: The documented sending limits (GUIDE: ``bots.feishu.adapter.GUIDE``, the robot's guide).
#: "单租户单机器人 100 次/分钟，5 次/秒" (GUIDE, 注意事项; also
#: https://open.feishu.cn/document/server-docs/api-call-guide/frequency-control). A burst of 3
#: plus 1.5/s keeps every 1 s window at 4.5 (≤ 5) and every minute at 93 (≤ 100). Feishu
#: documents no limit across a tenant's robots; the overall rate is ours, not Feishu's.
#:
#: The app bot's send API (https://open.feishu.cn/document/server-docs/im-v1/message/create):
#: "1000 次/分钟、50 次/秒" for the app, and "向同一用户发送消息的限频为 5 QPS、向同一群组发送消息的
#: 限频为群内机器人共享 5 QPS". Overall 15/s with a burst of 5 keeps every second at 20 (≤ 50)
#: and every minute at 905 (≤ 1000); a private chat 3/s with a burst of 2 at 5 a second; groups
#: keep the custom bots' 1.5/s (their robots' 100 a minute, and a group's 5 QPS is shared with
#: the group's other bots).
FEISHU_LIMITS = PlatformLimits(
    overall=Rate(15.0, burst=5),
    per_target={
        TargetKind.CHANNEL: Rate(1.5, burst=3),
        TargetKind.GROUP: Rate(1.5, burst=3),
        TargetKind.PRIVATE: Rate(3.0, burst=2),
    },
)

PLATFORM = webhook_platform(
    FeishuSettings,
    summary="Feishu/Lark custom bot webhooks, and the app bot (lark-oapi)",
    renderer="digest_core.rendering.feishu",
    limits=FEISHU_LIMITS,
    adapter="bots.feishu.adapter:FeishuAdapter",
    app_adapter="bots.feishu.app:FeishuAppAdapter",
    sdk="lark-oapi",
    doctor="bots.feishu.doctor:checks",
)
