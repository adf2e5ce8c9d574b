"""Settings of the ``[discord]`` table (the Discord bot)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from digest_core.port import ConfigError, TokenSettings

#: a Discord bot token: three base64url parts joined by dots (the user id, a time, an HMAC),
#: about 70 characters; anything else is refused before a request is made
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{17,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}")


class DiscordChannel(BaseModel):
    """A ``channels`` entry written as a table: a forum channel, whose posts are one per issue,
    or a text channel with a thread opened on each issue's first message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    #: a forum channel: each issue is a forum post (titled with its date and headline)
    forum: bool = False
    #: the forum's tags (by name, as the forum lists them) each post gets: at most 5
    tags: tuple[str, ...] = ()
    #: a text channel: a thread for discussion opened on each issue's first message
    thread_per_issue: bool = False
    #: minutes of inactivity after which Discord archives the post or thread
    auto_archive_minutes: Literal[60, 1440, 4320, 10080] = 1440

    @field_validator("id", mode="before")
    @classmethod
    def _check_id(cls, v: Any) -> str:
        if not re.fullmatch(r"\d{1,20}", str(v)):
            raise ValueError(f"{v!r} is not a Discord channel id (digits)")
        return str(v)

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # Discord's limits on forum tags, its renderer's (imported only when tags are set:
        # reading the settings models loads no renderer)
        from digest_core.rendering.discord import Limits

        if len(v) > Limits.forum_tags:
            raise ValueError(f"a forum post takes at most {Limits.forum_tags} tags, not {len(v)}")
        for tag in v:
            if not 1 <= len(tag) <= Limits.forum_tag_name_maxlen:
                raise ValueError(
                    f"tag {tag!r}: a tag's name has 1-{Limits.forum_tag_name_maxlen} characters"
                )
        if len(set(v)) != len(v):
            raise ValueError("a tag is listed twice")
        return v

    @model_validator(mode="after")
    def _check_kind(self) -> DiscordChannel:
        if self.forum and self.thread_per_issue:
            raise ValueError(
                "a forum channel's posts are threads already: set forum or thread_per_issue"
            )
        if self.tags and not self.forum:
            raise ValueError("tags are a forum's: set forum = true (or drop them)")
        return self


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
    #: the ``channels`` written as tables ({ id = "…", forum = true, tags = […] } or
    #: { id = "…", thread_per_issue = true }), by id: filled from ``channels``
    channel_threads: dict[str, DiscordChannel] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _channel_tables(cls, data: Any) -> Any:
        """Tables in ``channels`` become their ids there and entries of
        :attr:`channel_threads`."""
        if not isinstance(data, dict) or not isinstance(data.get("channels"), list):
            return data
        ids: list[Any] = []
        tables = dict(data.get("channel_threads") or {})
        for entry in data["channels"]:
            if isinstance(entry, dict):
                channel = DiscordChannel.model_validate(entry)
                tables[channel.id] = channel
                ids.append(channel.id)
            else:
                ids.append(entry)
        return {**data, "channels": ids, "channel_threads": tables}

    def threads_of(self, channel_id: str) -> DiscordChannel | None:
        """The forum or thread-per-issue settings of a configured channel (None: plain)."""
        channel = self.channel_threads.get(channel_id)
        return (
            channel if channel is not None and (channel.forum or channel.thread_per_issue) else None
        )

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
