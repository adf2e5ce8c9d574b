"""Commands: one declaration per command, the requests and replies, dispatch and the per-user
flood limit, confirmations, buttons and inline search.

The package re-exports what commands are made of (requests, replies, capabilities);
:class:`~digest_core.commands.dispatch.Commands`, which answers every command the catalogue's
owners declare (some outside this package, importing it), is imported from its module.
"""

from digest_core.commands.declaration import MAX_ECHO_CHARS
from digest_core.commands.reading import MAX_REPLY_MESSAGES
from digest_core.commands.requests import (
    ADMIN,
    AdminBackend,
    Capability,
    Choice,
    Reply,
    Request,
    Status,
    parse_command_line,
)

__all__ = [
    "ADMIN",
    "MAX_ECHO_CHARS",
    "MAX_REPLY_MESSAGES",
    "AdminBackend",
    "Capability",
    "Choice",
    "Reply",
    "Request",
    "Status",
    "parse_command_line",
]
