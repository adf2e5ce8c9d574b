"""Settings of the ``[feishu]`` table (Feishu/Lark custom bots and the app bot)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import SECRET_KEYS, AppBotSettings

#: keys holding the app's secrets: from the environment or files only
APP_SECRET_KEYS = ("app_secret", "encrypt_key", "verification_token")


class FeishuSettings(AppBotSettings):
    """Feishu/Lark custom bots by name. Webhooks (``https://open.feishu.cn/open-apis/bot/v2/
    hook/<token>`` or just the token) from ``DIGEST_BOT_FEISHU__WEBHOOKS`` or ``webhooks_file``;
    signing secrets from ``DIGEST_BOT_FEISHU__SECRETS`` or ``secrets_file``. Lark (the
    international service): ``api_base = "https://open.larksuite.com"``.

    With ``app_id`` (and the app secret from ``DIGEST_BOT_FEISHU__APP_SECRET`` or
    ``app_secret_file``) digest-bot is also the app's bot: it receives readers' messages over
    the long connection (``mode = "long_connection"``) or the HTTP event callback (``mode =
    "http"``, with ``DIGEST_BOT_FEISHU__ENCRYPT_KEY`` and ``__VERIFICATION_TOKEN``), answers
    commands, posts to ``chats`` and sends subscribers their issue."""

    model_config = SettingsConfigDict(env_prefix="DIGEST_BOT_FEISHU__", extra="forbid", frozen=True)
    platform: ClassVar[str] = "feishu"
    default_api_base: ClassVar[str] = "https://open.feishu.cn"
    secret_keys: ClassVar[tuple[str, ...]] = (*SECRET_KEYS, *APP_SECRET_KEYS)

    #: the app's App ID (``cli_…``, public); set: digest-bot is the app's bot
    app_id: str | None = None
    #: the App Secret: from the environment only
    app_secret: SecretStr | None = None
    app_secret_file: Path | None = None
    #: how events arrive: the SDK's long connection (no public URL), or Feishu's POSTs
    mode: Literal["long_connection", "http"] = "long_connection"
    callback_listen: str = "127.0.0.1:8091"
    callback_path: str = "/feishu/events"
    #: mode "http": the 事件与回调 → 加密策略 values (secrets, from the environment)
    encrypt_key: SecretStr | None = None
    verification_token: SecretStr | None = None
    # chats are group chat ids (oc_…), admins open_ids (ou_…)
    chat_id: ClassVar[tuple[str, str]] = (r"oc_[0-9A-Za-z]{1,64}", "a group chat id (oc_…)")
    admin_id: ClassVar[tuple[str, str] | None] = (r"ou_[0-9A-Za-z]{1,64}", "an open_id (ou_…)")

    @field_validator("callback_path")
    @classmethod
    def _check_path(cls, v: str) -> str:
        if not re.fullmatch(r"/[\w./-]*", v):
            raise ValueError(f"{v!r} is not a URL path")
        return v

    @property
    def app(self) -> bool:
        """Whether digest-bot is the app's bot."""
        return self.app_id is not None

    def resolved_app_secret(self) -> SecretStr:
        """The App Secret (environment first, then ``app_secret_file``).

        Raises:
            ConfigError: none is set, or the file is unreadable.
        """
        return self._app_secret("app_secret", needs="the app bot needs its app_secret")

    def resolved_encrypt_key(self) -> SecretStr:
        """Mode "http"'s Encrypt Key (from the environment).

        Raises:
            ConfigError: it is not set.
        """
        return self._app_secret("encrypt_key", needs="the app bot needs its encrypt_key")

    def resolved_verification_token(self) -> SecretStr:
        """Mode "http"'s Verification Token (from the environment).

        Raises:
            ConfigError: it is not set.
        """
        return self._app_secret(
            "verification_token", needs="the app bot needs its verification_token"
        )
