"""Commands: one declaration per command, the requests and replies, dispatch and the per-user
flood limit, confirmations, buttons and inline search."""

from digest_core.commands.dispatch import (
    ADMIN,
    MAX_ECHO_CHARS,
    AdminBackend,
    Capability,
    Choice,
    Commands,
    Reply,
    Request,
    Status,
    parse_command_line,
)
from digest_core.commands.reading import MAX_REPLY_MESSAGES

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
