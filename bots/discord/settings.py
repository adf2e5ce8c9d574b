"""Settings of the ``[discord]`` table (the Discord bot)."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from digest_core.port import ConfigError, TokenSettings

#: a Discord bot token: three base64url parts joined by dots (the user id, a time, an HMAC),
#: about 70 characters; anything else is refused before a request is made
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{17,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}")


class DiscordSettings(TokenSettings):
    """The Discord bot."""

    env_examples: ClassVar[dict[str, str]] = {
        "channels": '["123456789012345678"]',
        "admin_roles": "[123456789012345678]",
        "admin_users": "[123456789012345678]",
    }

    #: role ids whose members may run admin commands (besides Manage Server); both count only
    #: in a server that holds one of ``channels``
    admin_roles: list[int] = Field(default_factory=list)
    #: Discord's REST API, or a rate-limit proxy in front of it; the gateway is asked from it
    api_base_url: str = "https://discord.com/api/v10"
    #: embeds (true) or the plain-markdown fallback
    embeds: bool = True
    #: pin the first message of each day's post in the channels and unpin the day before's;
    #: the bot needs Manage Messages / Pin Messages there (a missing right is reported once)
    pin: bool = False
    #: None = one shard unless Discord asks for more; a number forces AutoShardedClient
    shard_count: int | None = Field(default=None, ge=1)
    #: user ids that are admins everywhere (DMs included) and get alerts by DM
    admin_users: list[int] = Field(default_factory=list)
    #: a send that takes longer (discord.py's own 5xx retries included) is a TransientError and
    #: the core's backoff takes over
    request_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: on start, how long to wait for the gateway to be ready before running on regardless
    ready_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    #: how long discord.py waits for more servers after the last one arrives before "ready"
    guild_ready_timeout_seconds: float = Field(default=2.0, ge=0, le=60)
    #: reader commands (and button presses) one user may send per ``command_window_seconds``;
    #: past that they get an ephemeral "slow down" instead. Admins are not limited.
    command_burst: int = Field(default=5, ge=1, le=1000)
    command_window_seconds: float = Field(default=10.0, gt=0, le=3600)

    def checked_token(self) -> SecretStr | None:
        """:meth:`resolved_token`, refused unless it has a bot token's shape.

        Raises:
            ConfigError: the token file cannot be read, or the token is not token-shaped (the
                error names where it came from, never the token).
        """
        token = self.resolved_token()
        if token is None or TOKEN_SHAPE.fullmatch(token.get_secret_value()):
            return token
        where = (
            "DIGEST_BOT_DISCORD__TOKEN"
            if self.token is not None and self.token.get_secret_value().strip()
            else f"the token file {self.token_file}"
        )
        raise ConfigError(
            f"{where} does not look like a Discord bot token (three parts joined by dots, "
            "about 70 characters, like MTA…): copy it again from the Developer Portal, "
            "Bot → Reset Token",
            key="discord.token",
        )

    @field_validator("channels")
    @classmethod
    def _check_channels(cls, v: list[str]) -> list[str]:
        for c in v:
            if not re.fullmatch(r"\d{1,20}", c):
                raise ValueError(f"{c!r} is not a Discord channel id (digits)")
        return v

    @field_validator("api_base_url")
    @classmethod
    def _check_api_base(cls, v: str) -> str:
        if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", v):
            raise ValueError(f"expected an http(s) URL like https://discord.com/api/v10, not {v!r}")
        return v.rstrip("/")
