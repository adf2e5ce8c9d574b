"""The registry entry of feishu: Feishu/Lark custom bot webhooks, send-only."""

from __future__ import annotations

from bots.feishu.settings import FeishuSettings
from bots.workchat.spec import webhook_platform

PLATFORM = webhook_platform(
    FeishuSettings,
    summary="Feishu/Lark custom bot webhooks (send-only)",
    renderer="bots.feishu.render",
    adapter="bots.feishu.adapter:FeishuAdapter",
)
