"""Settings of the ``[dingtalk]`` table (DingTalk custom robots)."""

from __future__ import annotations

from typing import ClassVar

from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import WebhookSettings


class DingTalkSettings(WebhookSettings):
    """DingTalk custom robots by name. Webhooks (``https://oapi.dingtalk.com/robot/send?
    access_token=<token>`` or just the token) from ``DIGEST_BOT_DINGTALK__WEBHOOKS`` or
    ``webhooks_file``; 加签 secrets (``SEC…``) from ``DIGEST_BOT_DINGTALK__SECRETS`` or
    ``secrets_file``."""

    model_config = SettingsConfigDict(
        env_prefix="DIGEST_BOT_DINGTALK__", extra="forbid", frozen=True
    )
    platform: ClassVar[str] = "dingtalk"
    default_api_base: ClassVar[str] = "https://oapi.dingtalk.com"
