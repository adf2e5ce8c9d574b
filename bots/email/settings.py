"""Settings of the ``[email]`` table: the SMTP relay, the sender, signing and pacing.

Secrets (the relay's password, the key that signs subscription links, the DKIM private key)
come only from the environment (``DIGEST_BOT_EMAIL__PASSWORD``, ``__SECRET_KEY``) or from files
named here (``password_file``, ``secret_key_file``, ``dkim_key_file``), never from the TOML file.
"""

from __future__ import annotations

import email.utils
import logging
from pathlib import Path
from typing import ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from digest_core.port import ConfigError

log = logging.getLogger(__name__)


class EmailSettings(BaseModel):
    """The ``[email]`` table. Nothing is sent unless ``host`` and ``from`` are set."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    #: keys refused in the TOML file (see digest_core.settings.load_settings)
    secret_keys: ClassVar[tuple[str, ...]] = ("password", "secret_key", "imap_password")

    #: the SMTP relay (any provider's submission host)
    host: str | None = None
    port: int = Field(default=587, ge=1, le=65535)
    #: "starttls" (port 587), "tls" (implicit TLS, port 465) or "none" (a relay on loopback)
    security: Literal["starttls", "tls", "none"] = "starttls"
    user: str | None = None
    #: from the environment only (DIGEST_BOT_EMAIL__PASSWORD), or ``password_file``
    password: SecretStr | None = None
    password_file: Path | None = None
    #: the From header, e.g. "AI 技术日报 <digest@example.org>"
    sender: str = Field(default="", alias="from")
    reply_to: str | None = None
    #: the List-Id, e.g. "AI 技术日报 <daily.digest.example.org>"; default from the sender's domain
    list_id: str | None = None
    #: the bot's public address for subscription links (its ``[http]`` server behind a proxy),
    #: e.g. "https://digest.example.org/"
    public_url: str | None = None
    #: the address whose mail unsubscribes (List-Unsubscribe's mailto); default: the sender
    unsubscribe_mailto: str | None = None
    #: signs the confirmation and unsubscribe links: DIGEST_BOT_EMAIL__SECRET_KEY or the file
    secret_key: SecretStr | None = None
    secret_key_file: Path | None = None
    #: the relay's own sending limit (messages per second) and burst; the core paces under it
    rate_per_second: float = Field(default=14.0, gt=0)
    burst: int = Field(default=1, ge=1)
    #: SMTP connections open at once, each reused for mail after mail (relays limit them:
    #: most allow a few; 1 sends one mail at a time)
    connections: int = Field(default=1, ge=1, le=32)
    #: a PEM file of the CA that signed the relay's certificate, for a relay whose certificate
    #: no public CA signed (default: the system's CAs); the certificate is always verified
    tls_ca_file: Path | None = None
    #: seconds one SMTP command may take; a DATA cut past it may have been delivered
    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    #: optional DKIM signing (dkimpy): selector, domain and the PEM private key's file
    dkim_selector: str | None = None
    dkim_domain: str | None = None
    dkim_key_file: Path | None = None
    #: where confirmed readers' addresses live (an SQLite file; the ledger holds only their ids)
    address_book: Path = Path("var/email-readers.sqlite3")
    #: hours a confirmation link is valid
    confirm_hours: float = Field(default=48.0, gt=0)
    #: the bounce mailbox (where the return path and the unsubscribe mailto deliver), read by
    #: the running bot (``bounce_check_seconds``) and ``digest-bot email bounces``;
    #: imap_password from the environment or its file only
    imap_host: str | None = None
    imap_port: int = Field(default=993, ge=1, le=65535)
    imap_security: Literal["tls", "none"] = "tls"
    imap_user: str | None = None
    imap_password: SecretStr | None = None
    imap_password_file: Path | None = None
    imap_mailbox: str = "INBOX"
    #: how often the running bot reads the bounce mailbox (seconds; 0: never, leave it to
    #: ``digest-bot email bounces`` from cron)
    bounce_check_seconds: float = Field(default=300.0, ge=0, le=86400)
    #: soft bounces (4.x.x) of one reader before the address is deactivated
    soft_bounce_limit: int = Field(default=3, ge=1, le=100)
    #: the digest's zone, for the Date header
    timezone: str = "Asia/Shanghai"

    @field_validator("timezone")
    @classmethod
    def _check_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (use an IANA name)") from None
        return v

    @field_validator("sender", "reply_to", "unsubscribe_mailto")
    @classmethod
    def _check_address(cls, v: str | None) -> str | None:
        if v and "@" not in email.utils.parseaddr(v)[1]:
            raise ValueError(f"{v!r} is not an address (expected 'Name <user@domain>')")
        return v

    @field_validator("public_url")
    @classmethod
    def _check_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.startswith(("https://", "http://")):
            raise ValueError(f"expected an http(s) URL, not {v!r}")
        return v if v.endswith("/") else v + "/"

    @property
    def configured(self) -> bool:
        return bool(self.host and self.sender)

    @property
    def sender_address(self) -> str:
        return email.utils.parseaddr(self.sender)[1]

    @property
    def sender_domain(self) -> str:
        return self.sender_address.rpartition("@")[2]

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def resolved_list_id(self) -> str:
        return self.list_id or f"<digest.{self.sender_domain}>"

    def resolved_password(self) -> str | None:
        """The relay's password from the environment or ``password_file`` (None: no login).

        Raises:
            ConfigError: the file cannot be read.
        """
        return _secret(self.password, self.password_file, "email.password_file")

    def resolved_imap_password(self) -> str | None:
        """The bounce mailbox's password (None: not set).

        Raises:
            ConfigError: the file cannot be read.
        """
        return _secret(self.imap_password, self.imap_password_file, "email.imap_password_file")

    def resolved_secret_key(self) -> str:
        """The key signing readers' links.

        Raises:
            ConfigError: none is set, or its file cannot be read.
        """
        key = _secret(self.secret_key, self.secret_key_file, "email.secret_key_file")
        if not key or len(key) < 16:
            raise ConfigError(
                "set DIGEST_BOT_EMAIL__SECRET_KEY (or email.secret_key_file) to a random "
                "string of at least 16 characters: it signs the subscription links",
                key="email.secret_key",
            )
        return key

    def resolved_dkim_key(self) -> bytes | None:
        """The DKIM private key (PEM), or None when DKIM is not configured.

        Raises:
            ConfigError: DKIM is half configured, or the key file cannot be read.
        """
        parts = (self.dkim_selector, self.dkim_domain, self.dkim_key_file)
        if not any(parts):
            return None
        if self.dkim_key_file is None or not self.dkim_selector or not self.dkim_domain:
            raise ConfigError(
                "DKIM needs dkim_selector, dkim_domain and dkim_key_file together",
                key="email.dkim_key_file",
            )
        try:
            return self.dkim_key_file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the DKIM key {self.dkim_key_file}: {exc.strerror}",
                key="email.dkim_key_file",
            ) from None


def _secret(value: SecretStr | None, path: Path | None, key: str) -> str | None:
    if value is not None and value.get_secret_value().strip():
        return value.get_secret_value().strip()
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", key=key) from None
