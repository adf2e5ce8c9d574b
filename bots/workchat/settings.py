"""Settings shared by the webhook platforms: public target names, secret webhooks by name.

A webhook address (it carries the robot's token or key) and a signing secret are secrets: they
come only from the environment (``DIGEST_BOT_<PLATFORM>__WEBHOOKS`` / ``__SECRETS``, JSON
objects keyed by target name) or from JSON files named in the config (``webhooks_file`` /
``secrets_file``), never from the TOML file, and are held as ``SecretStr``. Targets are named
(``targets = ["ai-team"]``): the ledger, logs and errors only ever see the name.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from digest_core.port import ConfigError

log = logging.getLogger(__name__)

#: what a target name may be: letters (any script), digits, "_", ".", "-"; at most 64
NAME_RE = re.compile(r"[^\W_][\w.-]{0,63}")
#: keys that hold secrets and so are refused in the TOML file
SECRET_KEYS = ("webhooks", "secrets")


class WebhookSettings(BaseSettings):
    """One ``[<platform>]`` table. Subclasses set ``platform`` and ``env_prefix``."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    #: the platform's name, e.g. "feishu" (the table name and the env prefix)
    platform: ClassVar[str] = ""
    #: the default service address; the path and the secret are added by the adapter
    default_api_base: ClassVar[str] = ""
    #: keys the core refuses in the TOML file (see digest_core.settings.load_settings)
    secret_keys: ClassVar[tuple[str, ...]] = SECRET_KEYS

    #: public names of the group webhooks to post the daily issue to, in order
    targets: list[str] = []
    #: name -> webhook address (or just its token/key): from the environment only
    webhooks: dict[str, SecretStr] = {}
    #: a JSON file {name: webhook} (Docker/Kubernetes secrets); the environment wins per name
    webhooks_file: Path | None = None
    #: name -> signing secret, for robots with signing enabled: from the environment only
    secrets: dict[str, SecretStr] = {}
    #: a JSON file {name: secret}; the environment wins per name
    secrets_file: Path | None = None
    #: the target that gets alerts for admins (these webhooks are group chats); none: logged
    alert_target: str | None = None
    #: the service's address; tests point it at a loopback double
    api_base: str = ""
    #: seconds one webhook call may take (connect, write, read); a timed-out send is retried
    #: by the core and may then appear twice (webhooks have no idempotency key)
    request_timeout_seconds: float = Field(default=10.0, gt=0, le=120)

    @field_validator("targets")
    @classmethod
    def _check_targets(cls, v: list[str]) -> list[str]:
        for name in v:
            _check_name(name)
        if len(set(v)) != len(v):
            raise ValueError("a target is listed twice")
        return v

    @field_validator("alert_target")
    @classmethod
    def _check_alert(cls, v: str | None) -> str | None:
        return _check_name(v) if v is not None else None

    @field_validator("api_base")
    @classmethod
    def _check_api_base(cls, v: str) -> str:
        return http_url(v) if v else v

    @property
    def app(self) -> bool:
        """Whether these settings configure an app bot (a platform's own settings say)."""
        return False

    @property
    def base(self) -> str:
        """``api_base``, or the platform's own address."""
        return self.api_base or self.default_api_base

    def resolved_webhooks(self) -> dict[str, SecretStr]:
        """Every target's (and the alert target's) webhook, from the environment or the file.

        Raises:
            ConfigError: a file is unreadable or not a JSON object of strings, or a target
                has no webhook (naming the env var and the file key to set).
        """
        found = {**_read_json_secrets(self.webhooks_file, f"{self.platform}.webhooks_file")}
        found.update(_strip(self.webhooks))
        for name in self.all_targets():
            if name not in found:
                raise ConfigError(
                    f"no webhook for target {name!r}: set {self.env_name('webhooks')} "
                    f'(a JSON object {{"{name}": "https://…"}}) or add it to '
                    f"{self.platform}.webhooks_file",
                    key=f"{self.platform}.targets",
                )
        return found

    def resolved_secrets(self) -> dict[str, SecretStr]:
        """Signing secrets by target name (targets without one are sent unsigned).

        Raises:
            ConfigError: the file is unreadable or not a JSON object of strings.
        """
        found = {**_read_json_secrets(self.secrets_file, f"{self.platform}.secrets_file")}
        found.update(_strip(self.secrets))
        return found

    def all_targets(self) -> list[str]:
        """``targets`` plus ``alert_target`` when it is not one of them."""
        extra = (
            [self.alert_target]
            if self.alert_target and self.alert_target not in self.targets
            else []
        )
        return [*self.targets, *extra]

    @classmethod
    def env_name(cls, key: str) -> str:
        return f"DIGEST_BOT_{cls.platform.upper()}__{key.upper()}"

    @classmethod
    def load(
        cls, table: Mapping[str, Any] | None = None, *, file: str | Path | None = None
    ) -> Self:
        """The settings from the TOML ``table`` (may be None) and the environment.

        Raises:
            ConfigError: the table holds a secret, or a value is invalid (naming the key and,
                where it came from the environment, the variable).
        """
        table = dict(table or {})
        for key in cls.secret_keys:
            if key in table:
                raise ConfigError(
                    f"secrets must not be written in the config file; set "
                    f"{cls.env_name(key)} or {cls.platform}.{key}_file instead",
                    file=file,
                    key=f"{cls.platform}.{key}",
                )
        try:
            return cls(**table)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = ".".join(str(p) for p in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            # never echo an input: it may be a secret
            raise ConfigError(msg, file=file, key=f"{cls.platform}.{name}") from None


class AppBotSettings(WebhookSettings):
    """A table whose platform also has an app bot (Feishu, DingTalk): its HTTP callback's
    address, its group chats and admins, the per-user command limit and its secrets. A
    platform's table sets the callback's defaults, its ``mode`` and how its ids look."""

    if TYPE_CHECKING:
        #: "http" (the callback server), or the connection's name: each platform's table
        #: declares its modes
        mode: str
    #: mode "http": where the callback server listens, and its path (the request URL is
    #: ``https://<your host><callback_path>``, behind your TLS proxy)
    callback_listen: str = ""
    callback_path: str = ""
    #: group chats the daily issue is posted to through the app
    chats: list[str] = Field(default_factory=list)
    #: the admins' user ids
    admins: list[str] = Field(default_factory=list)
    #: the per-user command limit: this many commands within the window
    command_burst: int = Field(default=5, ge=1, le=100)
    command_window_seconds: float = Field(default=30.0, gt=0, le=3600)

    #: how a group chat's id looks, and what the error calls one ("a group chat id (oc_…)")
    chat_id: ClassVar[tuple[str, str]] = (r".+", "a chat id")
    #: how an admin's id looks (None: any text), and what the error calls one
    admin_id: ClassVar[tuple[str, str] | None] = None

    @field_validator("chats")
    @classmethod
    def _check_chats(cls, v: list[str]) -> list[str]:
        return _each_matching(v, *cls.chat_id)

    @field_validator("admins")
    @classmethod
    def _check_admins(cls, v: list[str]) -> list[str]:
        return v if cls.admin_id is None else _each_matching(v, *cls.admin_id)

    def listen_address(self) -> tuple[str, int]:
        """``callback_listen`` as (host, port).

        Raises:
            ConfigError: it is not ``host:port``.
        """
        host, _, port = self.callback_listen.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError("expected host:port", key=f"{self.platform}.callback_listen")
        return host.strip("[]"), int(port)

    def _app_secret(self, key: str, *, needs: str) -> SecretStr:
        """The secret ``key`` (environment first, then ``<key>_file`` where there is one);
        ``needs`` opens the error ("the app bot needs its app_secret").

        Raises:
            ConfigError: none is set, or the file is unreadable.
        """
        value: SecretStr | None = getattr(self, key)
        file: Path | None = getattr(self, f"{key}_file", None)
        if value is not None and value.get_secret_value().strip():
            return SecretStr(value.get_secret_value().strip())
        if file is not None:
            try:
                text = file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read {file}: {exc.strerror}", key=f"{self.platform}.{key}_file"
                ) from None
            if text:
                return SecretStr(text)
        raise ConfigError(
            f"{needs}: set {self.env_name(key)} or {self.platform}.{key}_file",
            key=f"{self.platform}.{key}",
        )


def http_url(v: str) -> str:
    """``v``, an http(s) URL, without its trailing "/".

    Raises:
        ValueError: it is not one.
    """
    if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", v):
        raise ValueError(f"expected an http(s) URL, not {v!r}")
    return v.rstrip("/")


def _each_matching(values: list[str], pattern: str, what: str) -> list[str]:
    for value in values:
        if not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {what}")
    return values


def _check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a target name (1-64 letters, digits, '_', '.', '-'; a name, "
            "not the webhook address, which goes in the environment)"
        )
    return name


def _strip(values: Mapping[str, SecretStr]) -> dict[str, SecretStr]:
    return {
        k: SecretStr(v.get_secret_value().strip())
        for k, v in values.items()
        if v.get_secret_value().strip()
    }


def _read_json_secrets(path: Path | None, key: str) -> dict[str, SecretStr]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", key=key) from None
    except json.JSONDecodeError as exc:
        # the position only: the text may be a secret
        raise ConfigError(
            f"{path}:{exc.lineno}: not JSON (expected an object of name: string)", key=key
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ConfigError(f"{path}: expected a JSON object of name: string", key=key)
    return _strip({k: SecretStr(v) for k, v in data.items()})
