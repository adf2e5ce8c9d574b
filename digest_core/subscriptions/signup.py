"""Subscribing a mail address from any chat: ``/email ADDRESS [full|compact|headline]``.

The core declares the command (one declaration, as every command's) and reads its words; what
a mail address is and how it is confirmed belong to the platform that mails the digest, the
:class:`AddressSignup` the service is handed (the first of its platforms that is one). That
platform checks the address (its syntax; nothing is looked up), limits requests per address
and per requester, and mails a signed, expiring confirmation link: the same double opt-in as
its web form. Only a confirmed address gets the digest.

The answer is the same whether the address is new, subscribed already, asked for too often or
could not be mailed, so the command tells no one who reads; it is private (only the requester
sees it), and neither it nor the log quotes the address.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from digest_core.commands.declaration import Argument, CommandSpec, Group, command, text
from digest_core.commands.requests import Reply, Request, Status
from digest_core.errors import BadArgument
from digest_core.subscriptions.commands import FORMAT

if TYPE_CHECKING:
    from digest_core.commands.dispatch import Commands

log = logging.getLogger(__name__)

#: the longest address (RFC 5321: a path is at most 256 octets, with its two brackets)
MAX_ADDRESS = 254
#: the one answer to a well-formed address, whatever happens next
SENT = (
    "如果地址有效，确认信已发出，请查收并点击其中的链接。\n"
    "If the address is valid, a confirmation mail is on its way: press its link to subscribe."
)
#: the answer where no platform mails the digest
NOT_HERE = "这里不支持邮件订阅 / subscribing by mail is not available here"
#: what a word that is not an address is told (it is not quoted back)
NOT_AN_ADDRESS = "这不是有效的邮箱地址 / that is not a valid mail address"


@runtime_checkable
class AddressSignup(Protocol):
    """The platform that mails the digest, as the ``/email`` command needs it."""

    def checked_address(self, text: str) -> str | None:
        """``text`` as the address it would mail (normalised), or None when it is not one
        (its syntax only: no lookup of the domain)."""
        ...

    async def request_signup(self, address: str, *, fmt: str, requester: str) -> None:
        """Mail ``address`` a signed, expiring link that confirms its subscription (in the
        reader's format ``fmt``: full, compact, headline or "" for the default), unless it or
        ``requester`` (``platform:user``) asked too often: the same for an address subscribed
        already. Logs only the reader's pseudonymous id, never the address."""
        ...


_ADDRESS = Argument(
    "address",
    "Your mail address",
    "你的邮箱地址",
    "你的郵箱地址",
    "邮箱",
    "郵箱",
    kind=text(3, MAX_ADDRESS),
    required=True,
    missing="请给出邮箱地址 / give your mail address",
)


class SignupCommands:
    """``/email`` over ``commands``, answered through its ``signup`` (None: not available)."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self.signup = commands.signup

    def available(self, spec: CommandSpec, request: Request) -> Reply | None:
        if self.signup is not None:
            return None
        return self.commands.reply(request, NOT_HERE, status=Status.USAGE, private=True)

    @command(
        "email",
        zh="用邮箱接收每天的日报（先点确认信里的链接）",
        zh_tw="用郵箱接收每天的日報（先點確認信裡的連結）",
        en="Get the daily issue by mail (press the link of the confirmation mail first)",
        usage="/email ADDRESS [full|compact|headline]",
        args=(_ADDRESS, FORMAT),
        label_zh="邮件订阅",
        label_zh_tw="郵件訂閱",
        group=Group.PRIVATE,
        quiet=True,
    )
    async def by_mail(self, request: Request, address: str, format: str | None) -> Reply:
        """``/email ADDRESS [FORMAT]``: a confirmation mail to ADDRESS (see the module doc)."""
        signup = self.signup
        assert signup is not None  # available()
        checked = signup.checked_address(address)
        if checked is None:
            raise BadArgument(NOT_AN_ADDRESS)
        requester = f"{request.platform}:{request.user}"
        try:
            await signup.request_signup(checked, fmt=format or "", requester=requester)
        except Exception as exc:  # the answer is the same whatever happened
            log.warning("a mail signup asked by %s failed: %s", requester, type(exc).__name__)
        return self.commands.reply(request, SENT, private=True)
