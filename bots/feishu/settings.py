"""Settings of the ``[feishu]`` table (Feishu/Lark custom bots and the app bot)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import SECRET_KEYS, WebhookSettings
from digest_core.port import ConfigError

#: keys holding the app's secrets: from the environment or files only
APP_SECRET_KEYS = ("app_secret", "encrypt_key", "verification_token")


class FeishuSettings(WebhookSettings):
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
    #: mode "http": where the callback server listens, and its path (the request URL is
    #: ``https://<your host><callback_path>``, behind your TLS proxy)
    callback_listen: str = "127.0.0.1:8091"
    callback_path: str = "/feishu/events"
    #: mode "http": the 事件与回调 → 加密策略 values (secrets, from the environment)
    encrypt_key: SecretStr | None = None
    verification_token: SecretStr | None = None
    #: group chats (``oc_…``) the daily issue is posted to through the app
    chats: list[str] = Field(default_factory=list)
    #: open_ids (``ou_…``) of the admins
    admins: list[str] = Field(default_factory=list)
    #: the per-user command limit: this many commands within the window
    command_burst: int = Field(default=5, ge=1, le=100)
    command_window_seconds: float = Field(default=30.0, gt=0, le=3600)

    @field_validator("chats")
    @classmethod
    def _check_chats(cls, v: list[str]) -> list[str]:
        for chat in v:
            if not re.fullmatch(r"oc_[0-9A-Za-z]{1,64}", chat):
                raise ValueError(f"{chat!r} is not a group chat id (oc_…)")
        return v

    @field_validator("admins")
    @classmethod
    def _check_admins(cls, v: list[str]) -> list[str]:
        for user in v:
            if not re.fullmatch(r"ou_[0-9A-Za-z]{1,64}", user):
                raise ValueError(f"{user!r} is not an open_id (ou_…)")
        return v

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
        return _secret(self.app_secret, self.app_secret_file, "app_secret")

    def listen_address(self) -> tuple[str, int]:
        """``callback_listen`` as (host, port).

        Raises:
            ConfigError: it is not ``host:port``.
        """
        host, _, port = self.callback_listen.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError("expected host:port", key="feishu.callback_listen")
        return host.strip("[]"), int(port)


def _secret(value: SecretStr | None, file: Path | None, key: str) -> SecretStr:
    if value is not None and value.get_secret_value().strip():
        return SecretStr(value.get_secret_value().strip())
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read {file}: {exc.strerror}", key=f"feishu.{key}_file"
            ) from None
        if text:
            return SecretStr(text)
    raise ConfigError(
        f"the app bot needs its {key}: set DIGEST_BOT_FEISHU__{key.upper()} or feishu.{key}_file",
        key=f"feishu.{key}",
    )
