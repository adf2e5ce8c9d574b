"""A loopback SMTP relay double (aiosmtpd) that refuses what a relay refuses.

It accepts mail for any recipient and keeps every message's exact bytes, and refuses, like a
real relay: a ``MAIL FROM`` outside ``senders`` (553), a message whose header holds 8-bit bytes
without SMTPUTF8, or with a line over 998 characters (550), or over ``size_limit`` (552, the
SIZE limit it announces). Answers on demand: ``refuse_rcpt[address] = ["450 …", …]`` answers
the next RCPTs of one address in turn (then it is accepted), ``refuse_data`` a queue of
answers for the next messages' DATA, and ``close_next`` drops the connection (421) at the next
MAIL FROM; ``stall_data`` leaves the next messages' DATA unanswered (a relay that hangs after
taking the content: the sender cannot know whether it was delivered). With ``starttls`` (a
server-side SSL context) it requires STARTTLS before anything else (530), as a submission port
does; with ``logins`` (user -> password) it requires AUTH, offered only once TLS is on. Each
message records whether it came over TLS and who logged in.

Known problems avoided: the Controller is given ``hostname="127.0.0.1"`` (its default ``::1``
fails where IPv6 is off, aiosmtpd #248) and ``server_hostname`` (else each session's
``getfqdn()`` blocks the server's loop for seconds, aiosmtpd #178).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests import ports


@dataclass
class Received:
    sender: str
    recipients: list[str]
    data: bytes
    session: int
    #: the message came over a connection that had switched to TLS (STARTTLS)
    tls: bool = False
    #: the user that logged in on its connection (None: no AUTH)
    user: str | None = None

    @property
    def message(self) -> Message:
        return message_from_bytes(self.data)


@dataclass
class _Handler:
    senders: set[str]
    received: list[Received] = field(default_factory=list)
    refuse_rcpt: dict[str, list[str]] = field(default_factory=dict)
    refuse_data: list[str] = field(default_factory=list)
    close_next: bool = False
    stall_data: int = 0
    sessions: int = 0
    logins: dict[str, str] | None = None
    cond: threading.Condition = field(default_factory=threading.Condition)

    async def handle_EHLO(
        self, server: SMTP, session: Session, envelope: Envelope, hostname: str, responses: Any
    ) -> Any:
        with self.cond:
            self.sessions += 1
            session.number = self.sessions  # type: ignore[attr-defined]
        session.host_name = hostname
        return responses

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if self.close_next:
            self.close_next = False
            return "421 4.3.2 service shutting down"
        if address not in self.senders:
            return "553 5.7.1 sender not allowed"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        answers = self.refuse_rcpt.get(address)
        if answers:
            return answers.pop(0)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        data = envelope.original_content or b""
        if self.stall_data:
            self.stall_data -= 1
            await asyncio.Event().wait()  # until the relay stops (its tasks are cancelled)
        if self.refuse_data:
            return self.refuse_data.pop(0)
        head = data.split(b"\r\n\r\n", 1)[0]
        if "SMTPUTF8" not in envelope.mail_options and any(b > 127 for b in head):
            return "550 5.6.7 8-bit header without SMTPUTF8"
        if any(len(line) > 998 for line in data.split(b"\r\n")):
            return "550 5.6.0 line over 998 characters"
        with self.cond:
            self.received.append(
                Received(
                    str(envelope.mail_from),
                    list(envelope.rcpt_tos),
                    data,
                    getattr(session, "number", 0),
                    tls=session.ssl is not None,
                    user=session.auth_data if session.authenticated else None,
                )
            )
            self.cond.notify_all()
        return "250 2.0.0 queued"

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        """AUTH PLAIN/LOGIN against ``logins`` (the user is kept as the session's auth data)."""
        if not isinstance(data, LoginPassword) or self.logins is None:
            return AuthResult(success=False, handled=False)
        user, password = data.login.decode(), data.password.decode()
        if self.logins.get(user) != password:
            return AuthResult(success=False, handled=False)
        return AuthResult(success=True, auth_data=user)


def _free_port() -> int:
    return ports.free_port()


class FakeRelay:
    """``with FakeRelay(senders={...}) as relay:`` a relay on ``relay.port``."""

    def __init__(
        self,
        *,
        senders: set[str],
        size_limit: int = 10 * 1024 * 1024,
        starttls: ssl.SSLContext | None = None,
        logins: dict[str, str] | None = None,
    ) -> None:
        self.handler = _Handler(senders=senders, logins=logins)
        self.port = _free_port()
        auth: dict[str, Any] = (
            {"authenticator": self.handler.authenticate, "auth_require_tls": True}
            if logins is not None
            else {}
        )
        self._controller = Controller(
            self.handler,
            hostname="127.0.0.1",
            port=self.port,
            server_hostname="relay.test",
            data_size_limit=size_limit,
            decode_data=False,
            tls_context=starttls,
            require_starttls=starttls is not None,
            **auth,
        )

    def __enter__(self) -> FakeRelay:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()

    @property
    def received(self) -> list[Received]:
        with self.handler.cond:
            return list(self.handler.received)

    @property
    def sessions(self) -> int:
        return self.handler.sessions

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """The messages once at least ``count`` arrived (blocks: call from a thread)."""
        with self.handler.cond:
            if not self.handler.cond.wait_for(lambda: len(self.handler.received) >= count, timeout):
                raise TimeoutError(f"{len(self.handler.received)} of {count} messages arrived")
            return list(self.handler.received)
