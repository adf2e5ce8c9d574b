"""Settings of the ``[feishu]`` table (Feishu/Lark custom bots)."""

from __future__ import annotations

from typing import ClassVar

from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import WebhookSettings


class FeishuSettings(WebhookSettings):
    """Feishu/Lark custom bots by name. Webhooks (``https://open.feishu.cn/open-apis/bot/v2/
    hook/<token>`` or just the token) from ``DIGEST_BOT_FEISHU__WEBHOOKS`` or ``webhooks_file``;
    signing secrets from ``DIGEST_BOT_FEISHU__SECRETS`` or ``secrets_file``. Lark (the
    international service): ``api_base = "https://open.larksuite.com"``."""

    model_config = SettingsConfigDict(env_prefix="DIGEST_BOT_FEISHU__", extra="forbid", frozen=True)
    platform: ClassVar[str] = "feishu"
    default_api_base: ClassVar[str] = "https://open.feishu.cn"
