"""Settings of the ``[telegram]`` table (the Telegram bot)."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from digest_core.port import TokenSettings


class TelegramSettings(TokenSettings):
    """The Telegram bot."""

    env_examples: ClassVar[dict[str, str]] = {
        "channels": '["@my_channel"]',
        "admins": "[123456789]",
    }
    # channels: "@name" or a chat id; "-1001234567890:42" (or the table
    # { id = "-1001234567890", thread_id = 42 }) is topic 42 of a forum supergroup

    #: user ids allowed to run admin commands
    admins: list[int] = Field(default_factory=list)
    #: also let these admins log in to the editor's dashboard ([http] admin) with Telegram's
    #: Login Widget (the dashboard's domain set with /setdomain at BotFather; the widget loads
    #: from telegram.org)
    dashboard_login: bool = False
    api_base_url: str = "https://api.telegram.org/bot"
    #: link preview for the headline's source on channel posts
    link_preview: bool = True
    #: pin the first message of each day's post in the channels (silently) and unpin the day
    #: before's; the bot needs the right to pin (a missing right is reported once)
    pin: bool = False
    #: "polling" (default) or "webhook"
    mode: str = "polling"
    #: long-polling: seconds one getUpdates call waits for updates (Telegram allows up to 50)
    poll_timeout_seconds: int = Field(default=10, ge=0, le=50)
    #: seconds a Bot API call may wait for Telegram's answer (HTTP read and write timeouts);
    #: unset: the adapter's 30 s. A send that times out may still have been delivered and is
    #: sent again, so keep this generous: it trades slow failure detection for duplicates.
    request_timeout_seconds: float | None = Field(default=None, gt=0, le=300)
    #: webhook mode: the public https URL Telegram calls; its path is the local path served
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=1, le=65535)
    #: webhook mode: the X-Telegram-Bot-Api-Secret-Token every request must carry (1-256 of
    #: A-Z a-z 0-9 _ -); required with mode = "webhook"; best set from the environment
    webhook_secret: SecretStr | None = None
    #: reader commands (and button presses) one user may send per ``command_window_seconds``;
    #: past that they get one "slow down" reply, then silence until the window allows more.
    #: Admins are not limited.
    #: what a private subscriber gets each day: "full" (the issue, as channels get it) or
    #: "compact" (one message: the headline and brief titles with the section buttons, which
    #: send the rest on request); compact makes a delivery to many subscribers hours shorter
    subscriber_format: Literal["full", "compact"] = "full"
    #: send with allow_paid_broadcast: up to 1000 messages/s instead of 30, each message past
    #: the free rate paid in Telegram Stars from the bot's balance; the pacing follows
    paid_broadcast: bool = False
    command_burst: int = Field(default=5, ge=1, le=1000)
    command_window_seconds: float = Field(default=10.0, gt=0, le=3600)

    @field_validator("mode")
    @classmethod
    def _check_mode(cls, v: str) -> str:
        if v not in ("polling", "webhook"):
            raise ValueError(f"expected 'polling' or 'webhook', got {v!r}")
        return v

    @field_validator("webhook_url")
    @classmethod
    def _check_webhook_url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https://[^/\s]+(/\S*)?", v):
            raise ValueError(f"expected an https:// URL (Telegram calls only HTTPS), got {v!r}")
        return v

    @field_validator("webhook_secret")
    @classmethod
    def _check_secret(cls, v: SecretStr | None) -> SecretStr | None:
        # https://core.telegram.org/bots/api#setwebhook (secret_token)
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", v.get_secret_value()):
            raise ValueError("expected 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return v

    @model_validator(mode="after")
    def _check_webhook(self) -> TelegramSettings:
        if self.mode == "webhook" and (self.webhook_url is None or self.webhook_secret is None):
            raise ValueError(
                'mode = "webhook" needs webhook_url and webhook_secret '
                "(DIGEST_BOT_TELEGRAM__WEBHOOK_SECRET)"
            )
        return self

    @field_validator("channels", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        """Each entry as text: a table ``{ id = "-100…", thread_id = 42 }`` names a forum
        topic, written ``-100…:42`` (the target's id)."""
        if isinstance(v, list):
            return [_entry(x) for x in v]
        return v

    @field_validator("channels")
    @classmethod
    def _check_channels(cls, v: list[str]) -> list[str]:
        for c in v:
            chat, _, topic = c.partition(":")
            if not re.fullmatch(r"-?\d+|@[A-Za-z][A-Za-z0-9_]{3,}", chat):
                raise ValueError(f"{c!r} is neither a numeric chat id nor an @username")
            if not topic:
                continue
            if not re.fullmatch(r"[1-9]\d{0,9}", topic):
                raise ValueError(f"{c!r}: the topic after ':' must be a message_thread_id")
            if not chat.startswith(("-100", "@")):
                raise ValueError(f"{c!r}: topics exist in forum supergroups only (-100… ids)")
            if topic == "1":
                raise ValueError(
                    f"{c!r}: 1 is the General topic, which takes no message_thread_id: "
                    f"list {chat!r} without a topic"
                )
        return v


def _entry(value: Any) -> Any:
    """A ``channels`` entry as text (see :meth:`TelegramSettings._stringify`)."""
    if not isinstance(value, dict):
        return str(value)
    unknown = set(value) - {"id", "thread_id"}
    if unknown or "id" not in value:
        raise ValueError(
            "a channel table takes id and thread_id, like "
            '{ id = "-1001234567890", thread_id = 42 }'
            + (f"; not {sorted(unknown)}" if unknown else "")
        )
    thread = value.get("thread_id")
    return f"{value['id']}:{thread}" if thread is not None else str(value["id"])
