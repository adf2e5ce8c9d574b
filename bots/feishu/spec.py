"""The registry entry of feishu: Feishu/Lark custom bot webhooks, and the app bot that answers
readers (``[feishu] app_id``; lark-oapi is imported by the app bot only, when it starts)."""

from __future__ import annotations

from bots.feishu.pacing import FEISHU_LIMITS
from bots.feishu.settings import FeishuSettings
from bots.workchat.spec import webhook_platform

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
