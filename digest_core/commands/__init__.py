"""Commands: one declaration per command, the requests and replies, dispatch and the per-user
flood limit, confirmations, buttons and inline search."""

from digest_core.commands.declaration import MAX_ECHO_CHARS
from digest_core.commands.dispatch import Commands, parse_command_line
from digest_core.commands.reading import MAX_REPLY_MESSAGES
from digest_core.commands.requests import (
    ADMIN,
    AdminBackend,
    Capability,
    Choice,
    Reply,
    Request,
    Status,
)

__all__ = [
    "ADMIN",
    "MAX_ECHO_CHARS",
    "MAX_REPLY_MESSAGES",
    "AdminBackend",
    "Capability",
    "Choice",
    "Commands",
    "Reply",
    "Request",
    "Status",
    "parse_command_line",
]
