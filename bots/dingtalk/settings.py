"""Settings of the ``[dingtalk]`` table (DingTalk custom robots and the app robot)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import SECRET_KEYS, WebhookSettings
from digest_core.port import ConfigError


class DingTalkSettings(WebhookSettings):
    """DingTalk custom robots by name. Webhooks (``https://oapi.dingtalk.com/robot/send?
    access_token=<token>`` or just the token) from ``DIGEST_BOT_DINGTALK__WEBHOOKS`` or
    ``webhooks_file``; 加签 secrets (``SEC…``) from ``DIGEST_BOT_DINGTALK__SECRETS`` or
    ``secrets_file``.

    With ``client_id`` (the app's AppKey / Client ID; its secret from
    ``DIGEST_BOT_DINGTALK__CLIENT_SECRET`` or ``client_secret_file``) digest-bot is also the
    app's robot: it receives messages in Stream mode (``mode = "stream"``, the official
    dingtalk-stream SDK) or over the HTTP callback (``mode = "http"``), answers commands,
    posts to ``chats`` and sends subscribers their issue one-to-one."""

    model_config = SettingsConfigDict(
        env_prefix="DIGEST_BOT_DINGTALK__", extra="forbid", frozen=True
    )
    platform: ClassVar[str] = "dingtalk"
    default_api_base: ClassVar[str] = "https://oapi.dingtalk.com"
    secret_keys: ClassVar[tuple[str, ...]] = (*SECRET_KEYS, "client_secret")

    #: the app's Client ID (AppKey, public); set: digest-bot is the app's robot
    client_id: str | None = None
    client_secret: SecretStr | None = None
    client_secret_file: Path | None = None
    #: the robot's code (defaults to the Client ID, as for an app's own robot)
    robot_code: str | None = None
    #: the new API's address (token, sending, the Stream gateway)
    openapi_base: str = "https://api.dingtalk.com"
    mode: Literal["stream", "http"] = "stream"
    callback_listen: str = "127.0.0.1:8092"
    callback_path: str = "/dingtalk/messages"
    #: group conversations (openConversationId, ``cid…``) posted to through the app
    chats: list[str] = Field(default_factory=list)
    #: staff ids (userId) of the admins
    admins: list[str] = Field(default_factory=list)
    command_burst: int = Field(default=5, ge=1, le=100)
    command_window_seconds: float = Field(default=30.0, gt=0, le=3600)

    @field_validator("chats")
    @classmethod
    def _check_chats(cls, v: list[str]) -> list[str]:
        for chat in v:
            if not re.fullmatch(r"cid[\w+/=.-]{1,128}", chat):
                raise ValueError(f"{chat!r} is not an openConversationId (cid…)")
        return v

    @field_validator("openapi_base")
    @classmethod
    def _check_openapi(cls, v: str) -> str:
        if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", v):
            raise ValueError(f"expected an http(s) URL, not {v!r}")
        return v.rstrip("/")

    @property
    def app(self) -> bool:
        return self.client_id is not None

    @property
    def robot(self) -> str:
        return self.robot_code or self.client_id or ""

    def resolved_client_secret(self) -> SecretStr:
        """The app's Client Secret (environment first, then the file).

        Raises:
            ConfigError: none is set, or the file is unreadable.
        """
        if self.client_secret is not None and self.client_secret.get_secret_value().strip():
            return SecretStr(self.client_secret.get_secret_value().strip())
        if self.client_secret_file is not None:
            try:
                text = self.client_secret_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read {self.client_secret_file}: {exc.strerror}",
                    key="dingtalk.client_secret_file",
                ) from None
            if text:
                return SecretStr(text)
        raise ConfigError(
            "the app robot needs its Client Secret: set DIGEST_BOT_DINGTALK__CLIENT_SECRET or "
            "dingtalk.client_secret_file",
            key="dingtalk.client_secret",
        )

    def listen_address(self) -> tuple[str, int]:
        host, _, port = self.callback_listen.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError("expected host:port", key="dingtalk.callback_listen")
        return host.strip("[]"), int(port)
