"""Settings of the ``[dingtalk]`` table (DingTalk custom robots and the app robot)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from bots.workchat.settings import SECRET_KEYS, AppBotSettings, http_url


class DingTalkSettings(AppBotSettings):
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
    # chats are group conversations (openConversationId, cid…), admins staff ids (userId)
    chat_id: ClassVar[tuple[str, str]] = (r"cid[\w+/=.-]{1,128}", "an openConversationId (cid…)")

    @field_validator("openapi_base")
    @classmethod
    def _check_openapi(cls, v: str) -> str:
        return http_url(v)

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
        return self._app_secret("client_secret", needs="the app robot needs its Client Secret")
