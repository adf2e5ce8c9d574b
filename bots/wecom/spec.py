"""The registry entry of wecom: WeCom (企业微信) group robot webhooks, send-only."""

from __future__ import annotations

from bots.wecom.pacing import WECOM_LIMITS
from bots.wecom.settings import WeComSettings
from bots.workchat.spec import webhook_platform

PLATFORM = webhook_platform(
    WeComSettings,
    summary="WeCom (企业微信) group robot webhooks (send-only)",
    renderer="digest_core.rendering.wecom",
    limits=WECOM_LIMITS,
    adapter="bots.wecom.adapter:WeComAdapter",
    doctor="bots.wecom.doctor:checks",
)
