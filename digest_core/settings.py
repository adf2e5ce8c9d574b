"""Settings: TOML file + ``DIGEST_BOT_*`` environment, validated once at start.

Precedence, highest first: explicit overrides (CLI flags), environment variables
(``DIGEST_BOT_<NAME>__TOKEN`` sets ``<name>.token``), the TOML file, defaults.
Each platform's ``[<name>]`` table is validated with the settings model the platform declares
(``load_settings(platforms=...)``); the core knows no platform by name.
Tokens and other secrets (a model's ``secret_keys``) MUST come from the environment or a
secrets file (``token_file``), never the TOML file, and are held as ``SecretStr`` so they
never show in reprs, logs or dumps.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import json
import logging
import os
import re
import tomllib
import types
from collections.abc import Collection, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Union, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from digest_core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_CONFIG = Path("config/digest-bot.toml")
ENV_PREFIX = "DIGEST_BOT_"
_TIME_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScheduleSettings(_Section):
    """When the daily issue goes out."""

    #: local time in ``timezone``, HH:MM
    post_time: str = "08:00"
    #: on start, a post missed less than this many hours ago is still sent
    catch_up_hours: float = Field(default=6, ge=0, le=48)
    #: when today's file is missing at post time, look again this often
    retry_minutes: float = Field(default=5, gt=0, le=120)
    #: give up on today's issue (and alert admins) this many hours after post time
    deadline_hours: float = Field(default=4, ge=0, le=23)
    #: a day's file changed less than this many seconds before its post is still being saved:
    #: the post waits until it has been unchanged this long (0: post files as found)
    settle_seconds: float = Field(default=10, ge=0, le=300)
    #: how often subscribers' own times and follows are looked at (the minute job), seconds
    personal_seconds: float = Field(default=60, gt=0, le=60)
    #: set false to run commands only, without the daily post
    enabled: bool = True
    #: the daily post waits for an admin's approval of the day's current revision
    require_approval: bool = False
    #: local HH:MM when admins get the preview to approve (default: 2 h before post_time)
    review_time: str | None = None
    #: local HH:MM when admins are alerted that the next issue is missing or invalid
    #: (default: 3 h before post_time)
    missing_alert: str | None = None
    #: "auto": when the file of a day already posted changes, the running bot edits the posted
    #: messages in place (as `digest-bot correct` does); "manual": only when asked
    corrections: Literal["manual", "auto"] = "manual"

    @field_validator("post_time", "review_time", "missing_alert")
    @classmethod
    def _check_time(cls, v: str | None) -> str | None:
        if v is not None and not _TIME_RE.match(v):
            raise ValueError(f"expected HH:MM (24-hour), got {v!r}")
        return v

    @property
    def time(self) -> dt.time:
        return _clock_time(self.post_time)

    def before_post(self, setting: str | None, *, default_hours: int) -> dt.timedelta:
        """How long before post_time the local time ``setting`` comes (``default_hours``
        when unset); a time after post_time is read as the evening before."""
        if setting is None:
            return dt.timedelta(hours=default_hours)
        at = _clock_time(setting)
        minutes = (self.time.hour - at.hour) * 60 + self.time.minute - at.minute
        return dt.timedelta(minutes=minutes % (24 * 60))


def _clock_time(text: str) -> dt.time:
    hour, minute = (int(p) for p in text.split(":"))
    return dt.time(hour, minute)


class DeliverySettings(_Section):
    """Retries and pacing of sends."""

    max_attempts: int = Field(default=5, ge=1, le=50)
    backoff_base_seconds: float = Field(default=1.0, gt=0)
    backoff_max_seconds: float = Field(default=60.0, gt=0)
    #: the longest a delivery waits for one target (a 429's retry_after): a target due
    #: later is left waiting, and a running bot sends it when it is due
    max_wait_seconds: float = Field(default=300.0, gt=0)
    #: how often a running bot looks in the ledger for parts another process left waiting
    resume_check_seconds: float = Field(default=30.0, gt=0, le=3600)
    #: how often a running bot checks that its ledger database is still the one it opened
    #: (not deleted or replaced); a lost ledger stops the bot within this many seconds
    ledger_check_seconds: float = Field(default=20.0, gt=0, le=300)


def _secret(value: SecretStr | None, path: Path | None, key: str) -> str | None:
    """A secret from its environment value or, else, the file named by ``key``; None when
    neither is set.

    Raises:
        ConfigError: the file cannot be read or is empty.
    """
    if value is not None and value.get_secret_value().strip():
        return value.get_secret_value().strip()
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", key=key) from exc
    if not text:
        raise ConfigError(f"{path} is empty; write the secret into it", key=key)
    return text


class HttpSettings(_Section):
    """The operator's HTTP endpoint: /healthz, /readyz, /metrics (off unless ``listen`` is set)."""

    #: keys refused in the TOML file: secrets come from the environment or a file
    secret_keys: ClassVar[tuple[str, ...]] = ("admin_password",)

    #: "HOST:PORT" to serve on, e.g. "127.0.0.1:9464"; unset (the default): no endpoint
    listen: str | None = None
    #: serve the web archive at the endpoint's root too (built live, published issues only)
    site: bool = False
    #: the editor's dashboard at /admin/ (log in with ``admin_password``)
    admin: bool = False
    #: the dashboard's password or token: DIGEST_BOT_HTTP__ADMIN_PASSWORD, never the file
    admin_password: SecretStr | None = None
    #: a file holding it (Docker/Kubernetes secrets); read at start
    admin_password_file: Path | None = None
    #: a dashboard session ends this many hours after its login
    session_hours: float = Field(default=12, gt=0, le=24 * 30)

    def resolved_admin_password(self) -> str | None:
        """The dashboard's password from the environment or ``admin_password_file``.

        Raises:
            ConfigError: the file cannot be read or is empty.
        """
        return _secret(self.admin_password, self.admin_password_file, "http.admin_password_file")

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, v: str | None) -> str | None:
        if v is None:
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f'expected "HOST:PORT" such as "127.0.0.1:9464", got {v!r}')
        return v

    @model_validator(mode="after")
    def _site_needs_listen(self) -> HttpSettings:
        if self.site and self.listen is None:
            raise ValueError(
                'site = true serves the web archive on the endpoint: set listen = "HOST:PORT" '
                "too (or use `digest-bot site serve`)"
            )
        if self.admin and self.listen is None:
            raise ValueError('admin = true serves the dashboard: set listen = "HOST:PORT" too')
        if self.admin and self.admin_password is None and self.admin_password_file is None:
            raise ValueError(
                "admin = true needs a password: set DIGEST_BOT_HTTP__ADMIN_PASSWORD or "
                "http.admin_password_file"
            )
        return self

    @property
    def address(self) -> tuple[str, int] | None:
        """(host, port) to bind, brackets of an IPv6 host removed; None when off."""
        if self.listen is None:
            return None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class LeaderSettings(_Section):
    """Leadership among several ``run`` processes sharing one ledger: one posts, the rest wait."""

    #: the leader's lease lasts this long (the database's clock) and is renewed every third
    #: of it; a standby takes over at most this long (plus a third) after the leader died.
    #: (PostgreSQL; on an SQLite file the leadership is an OS lock held while the leader runs)
    lease_seconds: float = Field(default=15.0, ge=2, le=300)


class LedgerSettings(_Section):
    """The ledger database's upkeep: schema upgrades and retention."""

    #: upgrade an older ledger schema at start (false: `digest-bot db upgrade` does it)
    auto_upgrade: bool = True
    #: part rows of deliveries older than this many days are pruned (a per-day summary per
    #: target stays); at least a week, so a catch-up or a correction never meets pruned days
    keep_days: int = Field(default=90, ge=7, le=36500)
    #: audit rows (who ran which admin command) are kept this long
    audit_keep_days: int = Field(default=400, ge=7, le=36500)
    #: local time (HH:MM) of the daily pruning, away from post_time
    prune_time: str = "04:30"

    @field_validator("prune_time")
    @classmethod
    def _check_time(cls, v: str) -> str:
        if not _TIME_RE.match(v):
            raise ValueError(f"expected HH:MM (24-hour), got {v!r}")
        return v

    @property
    def prune_at(self) -> dt.time:
        hour, minute = (int(p) for p in self.prune_time.split(":"))
        return dt.time(hour, minute)


class SiteSettings(_Section):
    """The web archive (``digest-bot site build``, and ``[http] site``)."""

    #: the public address of the site, e.g. ``https://digest.example.org/``; when set, posts
    #: carry a "全文 / web" link to the issue's page and the feed's links are absolute
    base_url: str | None = None

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, v: str | None) -> str | None:
        return _base_url(v)


def _base_url(v: str | None) -> str | None:
    """A site's http(s) address ending with ``/`` (None when blank)."""
    if v is None or not v.strip():
        return None
    v = v.strip()
    if len(v) > 300:
        raise ValueError(f"is {len(v)} characters long; at most 300 are allowed")
    if not re.fullmatch(r"https?://[^/\s?#@]+(/[^\s?#]*)?", v):
        raise ValueError(
            f"expected the site's http(s) address without a query, like "
            f"https://digest.example.org/ (got {v!r})"
        )
    return v if v.endswith("/") else v + "/"


class AnalyticsSettings(_Section):
    """What readers do with posts, counted without naming any reader (``[analytics]``)."""

    secret_keys: ClassVar[tuple[str, ...]] = ("secret_key",)

    #: links in posts go through the bot's own redirect (``/r/<signed token>``), which counts
    #: clicks per issue, story, link, platform and day; off: the links are the originals
    track_links: bool = False
    #: the public address of the bot's HTTP endpoint the redirects are at (default:
    #: ``[site] base_url``, where ``[http] site = true`` serves the archive)
    base_url: str | None = None
    #: the key the redirect tokens are signed with: DIGEST_BOT_ANALYTICS__SECRET_KEY or a file
    #: (keep it: posted links carry tokens signed with it)
    secret_key: SecretStr | None = None
    secret_key_file: Path | None = None

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, v: str | None) -> str | None:
        return _base_url(v)

    def resolved_secret_key(self) -> str | None:
        """The links' signing key from the environment or ``secret_key_file``.

        Raises:
            ConfigError: the file cannot be read or is empty.
        """
        return _secret(self.secret_key, self.secret_key_file, "analytics.secret_key_file")


class TokenSettings(_Section):
    """The base of a platform's settings that signs in with a bot token."""

    #: keys refused in the TOML file: they are secrets (see :func:`load_settings`)
    secret_keys: ClassVar[tuple[str, ...]] = ("token",)
    #: examples of list values, shown when an environment variable is not a JSON list
    env_examples: ClassVar[dict[str, str]] = {}

    token: SecretStr | None = None
    #: a file holding the token (Docker/Kubernetes secrets); read at start
    token_file: Path | None = None
    channels: list[str] = []

    @field_validator("channels", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [str(x) for x in v]
        return v

    def resolved_token(self) -> SecretStr | None:
        """The token from ``token`` (env) or ``token_file``; None when neither is set.

        Raises:
            ConfigError: ``token_file`` cannot be read or is empty.
        """
        if self.token is not None and self.token.get_secret_value().strip():
            return SecretStr(self.token.get_secret_value().strip())
        if self.token_file is None:
            return None
        try:
            text = self.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read token file {self.token_file}: {exc.strerror}; point it at a "
                "readable file holding only the bot token"
            ) from exc
        if not text:
            raise ConfigError(f"token file {self.token_file} is empty; write the bot token into it")
        return SecretStr(text)


#: A database_url of the bundled kind, accepted without loading SQLAlchemy's URL parser: an
#: aiosqlite file path (or memory) with no host part.
_SQLITE_ASYNC = re.compile(r"sqlite\+aiosqlite:///[^?#]*(\?[^#]*)?\Z")


class Settings(BaseSettings):
    """Every setting of digest-bot; see config/digest-bot.example.toml for each key."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    timezone: str = "Asia/Shanghai"
    archive_dir: Path = Path("archive")
    database_url: str = "sqlite+aiosqlite:///var/digest-bot.db"
    log_level: str = "INFO"
    #: "human" (one readable line, with the digest's zone) or "json" (one object per line)
    log_format: str = "human"
    http: HttpSettings = HttpSettings()
    leader: LeaderSettings = LeaderSettings()
    schedule: ScheduleSettings = ScheduleSettings()
    delivery: DeliverySettings = DeliverySettings()
    ledger: LedgerSettings = LedgerSettings()
    site: SiteSettings = SiteSettings()
    analytics: AnalyticsSettings = AnalyticsSettings()

    #: the names of the platform tables (fields) of this class; set by :func:`load_settings`
    platform_names: ClassVar[tuple[str, ...]] = ()
    #: the config file these settings were read from (set by :func:`load_settings`)
    _config_path: Path | None = PrivateAttr(default=None)

    @property
    def config_path(self) -> Path | None:
        """The config file these settings were read from; None when none was found."""
        return self._config_path

    def platform(self, name: str) -> BaseModel:
        """The settings of the platform ``name`` (its ``[name]`` table).

        Raises:
            KeyError: no platform of that name was registered when loading.
        """
        if name not in self.platform_names:
            raise KeyError(name)
        section: BaseModel = getattr(self, name)
        return section

    @property
    def platforms(self) -> dict[str, BaseModel]:
        """Every platform's settings by name, in registry order."""
        return {name: self.platform(name) for name in self.platform_names}

    @model_validator(mode="after")
    def _tracking_needs_a_redirect(self) -> Settings:
        a = self.analytics
        if not a.track_links:
            return self
        if self.http.listen is None:
            raise ValueError(
                "analytics.track_links counts clicks at the HTTP endpoint: set [http] listen"
            )
        if a.base_url is None and self.site.base_url is None:
            raise ValueError(
                "analytics.track_links needs the endpoint's public address: set "
                "[analytics] base_url (or [site] base_url)"
            )
        if a.secret_key is None and a.secret_key_file is None:
            raise ValueError(
                "analytics.track_links signs its links: set DIGEST_BOT_ANALYTICS__SECRET_KEY "
                "or analytics.secret_key_file"
            )
        return self

    @property
    def redirect_base(self) -> str | None:
        """Where the link redirects are (``[analytics] base_url`` or ``[site] base_url``)."""
        return self.analytics.base_url or self.site.base_url

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown time zone {v!r} (use an IANA name like Asia/Shanghai)"
            ) from exc
        return v

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, v: str) -> str:
        if v.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError(f"expected DEBUG, INFO, WARNING or ERROR, got {v!r}")
        return v.upper()

    @field_validator("log_format")
    @classmethod
    def _check_format(cls, v: str) -> str:
        if v not in ("human", "json"):
            raise ValueError(f'expected "human" or "json", got {v!r}')
        return v

    @field_validator("database_url")
    @classmethod
    def _check_db(cls, v: str) -> str:
        if _SQLITE_ASYNC.match(v):
            return v  # the default kind: no need to import SQLAlchemy for every CLI command
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        example = "e.g. sqlite+aiosqlite:///var/digest-bot.db or postgresql+asyncpg://user@host/db"
        try:
            url = make_url(v)
        except ArgumentError:
            raise ValueError(f"not an SQLAlchemy URL ({example})") from None
        shown = url.render_as_string(hide_password=True)
        try:
            dialect = url.get_dialect()
        except NoSuchModuleError:
            raise ValueError(f"unknown database kind in {shown} ({example})") from None
        if not dialect.is_async:
            raise ValueError(
                f"{shown} uses the synchronous driver {dialect.driver!r}; the bot needs an "
                f"asyncio driver ({example})"
            )
        return v

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    #: the parsed TOML file, lowest-priority source (set by load_settings while it validates)
    _toml: ClassVar[ContextVar[Mapping[str, Any]]] = ContextVar(
        "digest_bot_toml", default=types.MappingProxyType({})
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlData(settings_cls, cls._toml.get()))


class _TomlData(PydanticBaseSettingsSource):
    """An already-parsed TOML file as a settings source."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]):
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


#: the core's tables that hold secrets (refused in the file, as a platform's token is)
_CORE_SECRETS: dict[str, type[BaseModel]] = {
    "http": HttpSettings,
    "analytics": AnalyticsSettings,
}


def _read_toml(path: Path, platforms: Mapping[str, type[BaseModel]]) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", file=path) from exc
    for name, model in {**_CORE_SECRETS, **platforms}.items():
        section = data.get(name)
        if not isinstance(section, dict):
            continue
        for secret in getattr(model, "secret_keys", ()):
            if secret in section:
                what = "tokens" if secret == "token" else "secrets"
                raise ConfigError(
                    f"{what} must not be written in the config file; set "
                    f"{ENV_PREFIX}{name.upper()}__{secret.upper()} or {name}.{secret}_file "
                    "instead",
                    file=path,
                    key=f"{name}.{secret}",
                )
    return data


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _message(err: Any, model: type[BaseModel]) -> str:
    if err["type"] == "extra_forbidden":
        near = _near_key(model, tuple(err["loc"]))
        hint = f"; did you mean {near}?" if near else ""
        return f"unknown key{hint} (config/digest-bot.example.toml lists every key)"
    return str(err["msg"]).removeprefix("Value error, ")


def _near_key(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The key (or table) of ``model`` closest to the unknown last part of ``loc``, if one is
    close (a typo: ``post_tme`` -> ``post_time``, ``[schedul]`` -> ``schedule``)."""
    *tables, name = loc
    for part in tables:  # down to the table holding the unknown key
        field = model.model_fields.get(str(part))
        inner = field.annotation if field is not None else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return None
        model = inner
    known = [key for key in model.model_fields if not key.startswith("_")]
    close = difflib.get_close_matches(str(name).lower(), known, n=1, cutoff=0.75)
    return close[0] if close else None


def _json_kind(annotation: Any) -> str | None:
    """ "list" or "object" when pydantic-settings reads a field's env value as JSON."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        kinds = {_json_kind(a) for a in get_args(annotation) if a is not type(None)}
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        return "list"
    if origin is dict or annotation is dict:
        return "object"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return None


def _check_env_json(settings_cls: type[BaseModel], environ: Mapping[str, str]) -> None:
    """Refuse a ``DIGEST_BOT_*`` variable of a list or table setting whose value is not JSON
    of that shape, naming the variable and showing the expected form (pydantic-settings
    would raise a long SettingsError naming only the section).

    Raises:
        ConfigError: ``file`` is ``environment VARIABLE``.
    """
    for name, value in environ.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        model: type[BaseModel] = settings_cls
        field: FieldInfo | None = None
        for i, part in enumerate(path):
            field = model.model_fields.get(part)
            if field is None:
                break
            inner = field.annotation
            if i < len(path) - 1:
                if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
                    field = None
                    break
                model = inner
        if field is None:
            continue
        kind = _json_kind(field.annotation)
        if kind is None:
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if kind == "list" and not isinstance(parsed, list):
            examples: Mapping[str, str] = getattr(model, "env_examples", {})
            example = examples.get(path[-1], '["…"]')
            raise ConfigError(
                f"expected a JSON list such as '{example}'", file=f"environment {name}"
            )
        if kind == "object" and not isinstance(parsed, dict):
            raise ConfigError(
                'expected a JSON object such as \'{"key": "value"}\', or set one '
                f"{name}__KEY variable per key",
                file=f"environment {name}",
            )


def load_settings(
    path: Path | str | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    platforms: Mapping[str, type[BaseModel]] | None = None,
    unchecked: Collection[str] = (),
) -> Settings:
    """Load settings from ``path`` (default ``config/digest-bot.toml`` if it exists), the
    environment and ``overrides``.

    ``platforms`` maps each platform's name to its settings model: the ``[name]`` table and
    the ``DIGEST_BOT_NAME__*`` variables are validated with it, and a table of no platform is
    an unknown key. A model may name ``secret_keys`` (refused in the file) and
    ``env_examples`` (shown for a list variable that is not JSON); one with a
    ``resolved_token()`` has it checked now.

    A table named in ``unchecked`` (a platform's, for a command that reads only the core
    settings) is set aside unread: neither validated nor an unknown key, and the settings
    have no section for it.

    Raises:
        ConfigError: the file is unreadable or not TOML, holds a token, or a value is invalid;
            the message names the file, the key and the reason.
    """
    explicit = path is not None
    cfg = Path(path) if path is not None else DEFAULT_CONFIG
    platforms = dict(platforms or {})
    found = cfg.exists()
    if found:
        data = _read_toml(cfg, platforms)
    elif explicit:
        raise ConfigError("config file not found", file=cfg)
    else:
        data = {}
    data = {key: value for key, value in data.items() if key not in unchecked}
    loaded = _settings_model(tuple(platforms.items()))
    _check_env_json(loaded, os.environ)
    toml = Settings._toml.set(data)
    try:
        settings: Settings = loaded(**(overrides or {}))
    except SettingsError as exc:  # a DIGEST_BOT_* value pydantic-settings cannot parse
        raise ConfigError(f"{exc}; check the {ENV_PREFIX}* environment variables") from exc
    except ValidationError as exc:
        errors = exc.errors()
        key = _key(errors[0]["loc"])
        msg = _message(errors[0], loaded)
        others = [f"{_key(e['loc'])}: {_message(e, loaded)}" for e in errors[1:]]
        if others:
            msg += "; also " + "; ".join(others)
        env_name = ENV_PREFIX + key.replace(".", "__").upper()
        source: str | Path | None = cfg if data else None
        if env_name in os.environ:
            source = f"environment {env_name}"
        raise ConfigError(msg, file=source, key=key) from exc
    finally:
        Settings._toml.reset(toml)
    settings._config_path = cfg if found else None
    for name, section in settings.platforms.items():
        resolve = getattr(section, "resolved_token", None)
        if resolve is None:
            continue
        try:
            resolve()
        except ConfigError as exc:
            # the environment wins over the file: when it set the path, blame it
            variable = _env_name(f"{name}.token_file")
            where = f"environment {variable}" if variable else (cfg if data else None)
            raise ConfigError(exc.detail, file=where, key=f"{name}.token_file") from exc
    return settings


@functools.cache
def _settings_model(platforms: tuple[tuple[str, type[BaseModel]], ...]) -> type[Settings]:
    """The settings model with a field per platform table, built once per set of platforms
    (building it costs pydantic a schema of every table: 15-40 ms at every load before)."""
    fields: dict[str, Any] = {
        name: (model, Field(default_factory=model)) for name, model in platforms
    }
    model: type[Settings] = create_model(
        "Settings", __base__=Settings, __module__=__name__, **fields
    )
    model.platform_names = tuple(name for name, _ in platforms)
    return model


#: settings whose defaults are paths relative to the working directory
_RELATIVE_DEFAULTS = ("database_url", "archive_dir")


@dataclass(frozen=True)
class DefaultsWarning:
    """No config file was found and a path setting fell back to its default."""

    detail: str
    fix: str

    def __str__(self) -> str:
        return f"{self.detail}; {self.fix}"


def default_warning(settings: Settings, *, cwd: Path | None = None) -> DefaultsWarning | None:
    """What to warn about when no config file was found and ``database_url`` or
    ``archive_dir`` is still its default, relative to the working directory: run from another
    folder, the bot would silently open a new, empty ledger there. None when a config file was
    read or the environment (or a flag) set both."""
    if settings.config_path is not None:
        return None
    defaulted = [k for k in _RELATIVE_DEFAULTS if k not in settings.model_fields_set]
    if not defaulted:
        return None
    cwd = cwd or Path.cwd()
    used = []
    if "database_url" in defaulted:
        db = settings.database_url.removeprefix("sqlite+aiosqlite:///")
        used.append(f"the ledger {cwd / db}")
    if "archive_dir" in defaulted:
        used.append(f"the archive {cwd / settings.archive_dir}")
    variables = " and ".join(ENV_PREFIX + k.upper() for k in defaulted)
    return DefaultsWarning(
        f"no config file {DEFAULT_CONFIG} in {cwd}: using the defaults, " + " and ".join(used),
        f"run from the folder holding {DEFAULT_CONFIG}, pass --config PATH, or set {variables}",
    )


def _env_name(key: str) -> str | None:
    """The ``DIGEST_BOT_*`` variable setting ``key`` as it is spelled in the environment
    (matched case-insensitively, as pydantic-settings does), or None."""
    wanted = ENV_PREFIX + key.replace(".", "__").upper()
    return next((n for n in os.environ if n.upper() == wanted), None)
