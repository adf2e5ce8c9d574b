"""Settings of the ``[wecom]`` table (WeCom group robots)."""

from __future__ import annotations

from typing import ClassVar

from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import WebhookSettings


class WeComSettings(WebhookSettings):
    """WeCom (企业微信) group robots by name. Webhooks (``https://qyapi.weixin.qq.com/cgi-bin/
    webhook/send?key=<key>`` or just the key) from ``DIGEST_BOT_WECOM__WEBHOOKS`` or
    ``webhooks_file``. WeCom robots have no signing, so ``secrets`` is unused."""

    model_config = SettingsConfigDict(env_prefix="DIGEST_BOT_WECOM__", extra="forbid", frozen=True)
    platform: ClassVar[str] = "wecom"
    default_api_base: ClassVar[str] = "https://qyapi.weixin.qq.com"
