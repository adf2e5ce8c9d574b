"""The email adapter: one reader's mail per part over reused SMTP connections (aiosmtplib).

Targets are readers (``Target("email", READER_ID, PRIVATE)``, the ledger's subscribers); the
address is looked up in the :class:`AddressBook` at send time, so an unsubscribed or forgotten
reader gets nothing more, not even a part already planned (``TargetGone``). Addresses never
reach the ledger, the logs or the errors: only reader ids do.

SMTP answers map onto the core's error tree: a 4xx anywhere is a ``TransientError`` (the core
backs off and retries), a 5xx to ``RCPT TO`` a ``TargetGone`` (a hard refusal of that address),
a 5xx to ``MAIL FROM`` or ``DATA`` a ``Rejected`` (our sender or our message), a connection
lost before ``DATA`` a ``TransientError`` and during it an ``OutcomeUnknown`` (the relay may
have taken it). The adapter never retries or sleeps; the connection is reopened on the next
send after any failure.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import aiosmtplib

from bots.email import bounces, mime, signup, transfer
from bots.email.addresses import AddressBook
from bots.email.settings import EmailSettings
from bots.email.tokens import Tokens
from digest_core.port import (
    SUBSCRIBE,
    UNSUBSCRIBE,
    Clock,
    Message,
    OutcomeUnknown,
    Part,
    PartKey,
    Rejected,
    RenderOptions,
    Request,
    Status,
    Target,
    TargetGone,
    TransientError,
)
from digest_core.rendering import email as email_render

if TYPE_CHECKING:
    from bots.periodic import PeriodicJob
    from digest_core.port import Adapter, AddressSignup, PlatformLimits, Port, Tallied

log = logging.getLogger(__name__)

NAME = "email"


class EmailAdapter:
    """The ``email`` platform (see the module doc)."""

    name = NAME
    flavor = email_render
    #: readers subscribe (by the web form or ``/email``), confirmed by mail
    subscriptions = True

    def __init__(self, settings: EmailSettings, *, clock: Clock, limits: PlatformLimits) -> None:
        """Resolve the secrets now, so a missing one fails at start. ``limits``: the pacing
        its spec states for ``settings`` (the relay's rate: :func:`bots.email.spec.limits_of`).

        Raises:
            ConfigError: the password, links' key or DKIM key cannot be read.
        """
        self.settings = settings
        self.clock = clock
        self.limits = limits
        self.post_options = RenderOptions(site_url=settings.public_url)
        self._password = settings.resolved_password()
        key = settings.resolved_secret_key()
        self.tokens = Tokens(
            key,
            confirm_seconds=settings.confirm_hours * 3600,
            preferences_seconds=settings.preferences_days * 86400,
            now=lambda: clock.now().timestamp(),
        )
        self.book = AddressBook(settings.address_book, key)
        pem = settings.resolved_dkim_key()
        self._dkim = (
            mime.Dkim(str(settings.dkim_selector), str(settings.dkim_domain), pem)
            if pem is not None
            else None
        )
        self.port: Port | None = None
        #: parsed once: every mail's envelope and Message-ID use them
        self._domain = settings.sender_domain
        self._unsubscribe_mailto = settings.unsubscribe_mailto or settings.sender_address
        self._list_id = settings.resolved_list_id()
        #: ``settings.connections`` connections, each reused for mail after mail
        self._all = [_Slot() for _ in range(settings.connections)]
        self._slots: asyncio.Queue[_Slot] = asyncio.Queue()
        for slot in self._all:
            self._slots.put_nowait(slot)
        #: connections opened so far (for tests)
        self.connections = 0
        #: confirmation requests per address and requester, the web form's and the chats'
        self.limiter = signup.Limiter()
        #: the bounce mailbox's read under way (the scheduler's job), cancelled by stop()
        self._polling: asyncio.Task[Any] | None = None

    # ------------------------------------------------------------ rendering

    def render(
        self,
        issue: Any,
        part: Part = Part.ALL,
        *,
        brief: int | None = None,
        options: RenderOptions | None = None,
    ) -> list[Message]:
        return email_render.render(issue, part, brief=brief, options=options or self.post_options)

    def preview(self, message: Message) -> str:
        return email_render.preview(message)

    def notice(self, text: str) -> list[Message]:
        """A one-off mail to an address (a confirmation request): no reader's links."""
        return email_render.notice(text, footer=False)

    # ------------------------------------------------------------ links

    def unsubscribe_url(self, rid: str) -> str | None:
        base = self.settings.public_url
        return f"{base}email/unsubscribe?t={self.tokens.unsubscribe(rid)}" if base else None

    def preferences_url(self, rid: str) -> str | None:
        """The reader's preferences page (a fresh, expiring token: every mail has one)."""
        base = self.settings.public_url
        return f"{base}email/preferences?t={self.tokens.preferences(rid)}" if base else None

    def confirm_url(self, address: str, fmt: str = "") -> str:
        base = self.settings.public_url or "/"
        return f"{base}email/confirm?t={self.tokens.confirm(address, fmt)}"

    # ------------------------------------------------------------ readers

    def checked_address(self, text: str) -> str | None:
        """``text`` as the address mail goes to, or None (its syntax: nothing looked up)."""
        return signup.checked(text)

    async def request_signup(self, address: str, *, fmt: str, requester: str) -> None:
        """The double opt-in's first step, for the web form and ``/email ADDRESS``
        (:func:`bots.email.signup.request`): a confirmation link mailed unless limited."""
        await signup.request(self, address, fmt=fmt, requester=requester)

    async def tallies(self) -> Mapping[str, Mapping[str, int]]:
        """Readers (confirmed, pending, deactivated) and what the bounce mailbox told (hard,
        soft, complaint, unsubscribe): counts, never addresses (``status``, ``/metrics``)."""
        since = self.clock.now() - dt.timedelta(hours=self.settings.confirm_hours)
        n = await self.book.tallies(pending_since=since)
        return {
            "readers": {k: n[k] for k in ("confirmed", "pending", "deactivated")},
            "bounces": {k: n[k] for k in ("hard", "soft", "complaint", "unsubscribe")},
        }

    # ------------------------------------------------------------ bounces

    async def read_bounces(self) -> dict[str, int]:
        """Read the bounce mailbox once and act on it (:func:`bots.email.bounces.apply`);
        the counts by kind.

        Raises:
            TransientError: the adapter is not started, or the core refused an /unsubscribe.
            ConfigError, OSError, TimeoutError, aioimaplib.Abort: see
                :func:`bots.email.bounces.read_mailbox`.
        """
        if self.port is None:
            raise TransientError("the email platform is not started", platform=NAME)
        events = await bounces.read_mailbox(self.settings)

        async def end(rid: str, why: str) -> None:
            await self.subscription(rid, on=False, via=why)

        return await bounces.apply(
            events, self.book, end=end, soft_limit=self.settings.soft_bounce_limit
        )

    def periodic_jobs(self) -> list[PeriodicJob]:
        """The bounce mailbox read every ``bounce_check_seconds`` while the bot runs (when
        one is configured)."""
        from bots.periodic import PeriodicJob

        every = self.settings.bounce_check_seconds
        if not (self.settings.imap_host and self.settings.imap_user) or every <= 0:
            return []
        return [PeriodicJob("email bounce mailbox", every, self._poll_bounces)]

    async def _poll_bounces(self) -> None:
        """One scheduled read; what the server answers is logged, tried again next time."""
        if self.port is None:
            return
        self._polling = asyncio.current_task()
        try:
            counts = await self.read_bounces()
        except Exception as exc:  # the mailbox unreachable, a login refused: next time
            log.warning("email: the bounce mailbox could not be read: %s", _reason(exc))
            return
        finally:
            self._polling = None
        if any(counts.values()):
            log.info("email bounce mailbox: %s", ", ".join(f"{k} {v}" for k, v in counts.items()))

    # ------------------------------------------------------------ Platform

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """Mail ``message`` to reader ``target.id``; the Message-ID is the returned id.

        Raises:
            TargetGone: the reader is not (or no longer) confirmed, or the relay refused the
                address for good (5xx to RCPT TO).
            TransientError: a 4xx, a connection that could not be opened or was lost before
                the message's data.
            OutcomeUnknown: the connection was lost while the data went out.
            Rejected: the relay refused our sender or the message (5xx to MAIL FROM / DATA).
        """
        rid = target.id
        address = await self.book.address(rid)
        if address is None:
            raise TargetGone("the reader has unsubscribed", platform=NAME, target=rid)
        return await self.send_to(address, rid, message, key=key)

    async def send_to(
        self, address: str, rid: str, message: Message, *, key: PartKey | None = None
    ) -> str:
        """Mail ``message`` to ``address`` (reader ``rid``); the errors of :meth:`send`."""
        settings = self.settings
        if not address.isascii() or any(c in address for c in "\r\n<>"):
            # the web form accepts only such addresses (no SMTPUTF8 needed at any relay)
            raise Rejected("the reader's address is not plain ASCII", platform=NAME, target=rid)
        # (a one-off mail is named by its content: hashing it costs more than the whole mail)
        fallback = message.digest[:16] if key is None else ""
        msgid = mime.message_id(key, rid, self._domain, fallback=fallback)
        envelope = mime.build(
            message,
            sender=settings.sender,
            reply_to=settings.reply_to,
            recipient=address,
            rid=rid,
            list_id=self._list_id,
            unsubscribe_url=self.unsubscribe_url(rid),
            unsubscribe_mailto=self._unsubscribe_mailto,
            msgid=msgid,
            now=self.clock.now().astimezone(settings.zone),
            dkim=self._dkim,
            # a part of a delivery goes to a reader; a one-off mail (a confirmation) has no
            # reader's links, so no token is signed for it
            preferences_url=self.preferences_url(rid) if key is not None else None,
        )
        await self._transmit(envelope, rid)
        log.debug("mailed %s to reader %s", msgid, rid)
        return msgid

    async def _connection(self, slot: _Slot, rid: str) -> aiosmtplib.SMTP:
        if slot.client is not None and slot.client.is_connected:
            return slot.client
        await slot.drop()
        settings = self.settings
        client = aiosmtplib.SMTP(
            hostname=settings.host,
            port=settings.port,
            use_tls=settings.security == "tls",
            start_tls=settings.security == "starttls",
            timeout=settings.timeout_seconds,
            cert_bundle=str(settings.tls_ca_file) if settings.tls_ca_file else None,
        )
        try:
            await client.connect()
            if settings.user:
                await client.login(settings.user, self._password or "")
        except aiosmtplib.SMTPAuthenticationError as exc:
            client.close()
            raise TransientError(
                f"the relay {settings.host}:{settings.port} refused the login of "
                f"{settings.user!r} ({exc.code}); check email.user and the password",
                platform=NAME,
                target=rid,
            ) from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            # aiosmtplib #38: a client whose connect failed must be closed before another try
            client.close()
            raise TransientError(
                f"cannot reach the relay {settings.host}:{settings.port}: {_reason(exc)}",
                platform=NAME,
                target=rid,
            ) from None
        slot.client = client
        self.connections += 1
        return client

    async def _transmit(self, envelope: mime.Envelope, rid: str) -> None:
        slot = await self._slots.get()
        try:
            await self._transmit_on(slot, envelope, rid)
        finally:
            self._slots.put_nowait(slot)

    async def _transmit_on(self, slot: _Slot, envelope: mime.Envelope, rid: str) -> None:
        client = await self._connection(slot, rid)
        phase = "MAIL FROM"
        try:
            await transfer.mail(client, envelope.sender)
            phase = "RCPT TO"
            await transfer.rcpt(client, envelope.recipient)
            phase = "DATA"
            await transfer.data(client, envelope.data)
        except aiosmtplib.SMTPResponseException as exc:
            await slot.reset(exc.code)
            # relays quote the address back: it never reaches a log
            said = str(exc.message).replace(envelope.recipient, "<address>")
            raise _refusal(exc.code, said, phase, rid) from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            await slot.drop()
            detail = f"the connection to the relay was lost at {phase}: {_reason(exc)}"
            if phase == "DATA":
                raise OutcomeUnknown(detail, platform=NAME, target=rid) from None
            raise TransientError(detail, platform=NAME, target=rid) from None
        except BaseException:
            await slot.drop()  # cancelled mid-command: the connection's state is unknown
            raise

    async def subscription(self, rid: str, *, on: bool, fmt: str = "", via: str = "") -> None:
        """Subscribe reader ``rid`` (confirmed) or end its subscription, through the core's
        ``/subscribe [FORMAT]`` / ``/unsubscribe`` commands (``fmt``: the reader's format,
        full, compact or headline, kept as a chat reader's); ending it forgets the address too, so a
        part still planned for the reader finds none and is not sent. ``via``: why it ends
        (:data:`~digest_core.commands.requests.LEFT_REASONS`: ``link``, ``mailto``,
        ``bounce``, ``complaint``), counted for the dashboard.

        Raises:
            TransientError: the adapter is not started, or the core refused the command.
        """
        if self.port is None:
            raise TransientError("the email platform is not started", platform=NAME, target=rid)
        command = (SUBSCRIBE if on else UNSUBSCRIBE).name
        reply = await self.port.handle(
            Request(
                command=command,
                args=(fmt,) if on and fmt else (),
                platform=NAME,
                flavor=email_render,
                user=rid,
                chat=rid,
                via="" if on else via,
            )
        )
        if reply.status is not Status.OK:
            raise TransientError(f"/{command} answered {reply.status}", platform=NAME, target=rid)
        if not on:
            await self.book.remove(rid)
        log.info("reader %s %s", rid, "subscribed" if on else "unsubscribed")

    def channel_targets(self) -> list[Target]:
        """None: every mail goes to a subscribed reader."""
        return []

    async def alert_admins(self, text: str) -> None:
        """Logged: the email edition has no admins' chat."""
        log.warning("email alert: %s", text)

    # ------------------------------------------------------------ lifecycle

    async def start(self, port: Port | None = None, *, receive: bool = True) -> None:
        """Nothing to open: the connection opens with the first mail."""
        self.port = port

    async def stop(self) -> None:
        """Stop a read of the bounce mailbox under way, QUIT and close the connections,
        close the address book (idempotent)."""
        polling, self._polling = self._polling, None
        if polling is not None and polling is not asyncio.current_task():
            polling.cancel()
            await asyncio.gather(polling, return_exceptions=True)
        self.port = None
        await asyncio.gather(*(slot.drop() for slot in self._all))
        self.book.close()


class _Slot:
    """One SMTP connection of the pool (None until first used or after a failure)."""

    def __init__(self) -> None:
        self.client: aiosmtplib.SMTP | None = None

    async def reset(self, code: int) -> None:
        """After a refusal: RSET to reuse the connection, or drop it (421 closes it)."""
        if code == 421 or self.client is None:
            await self.drop()
            return
        try:
            await self.client.rset()
        except (aiosmtplib.SMTPException, OSError):
            await self.drop()

    async def drop(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        try:
            if client.is_connected:
                await asyncio.wait_for(client.quit(), timeout=2.0)
        except (aiosmtplib.SMTPException, OSError, TimeoutError):
            pass
        finally:
            client.close()


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def _refusal(code: int, message: str, phase: str, rid: str) -> Exception:
    said = f"the relay answered {code} {message[:200]!r} to {phase}"
    if 400 <= code < 500:
        return TransientError(said, platform=NAME, target=rid)
    if phase == "RCPT TO":
        return TargetGone(said + ": the address is refused", platform=NAME, target=rid)
    return Rejected(said, platform=NAME, target=rid)


if TYPE_CHECKING:

    def _is_an_adapter(adapter: EmailAdapter) -> Adapter:
        """mypy checks here that the email adapter is what the runtime runs."""
        return adapter

    def _is_a_signup(adapter: EmailAdapter) -> AddressSignup:
        """... what the core's ``/email ADDRESS`` hands addresses to ..."""
        return adapter

    def _is_tallied(adapter: EmailAdapter) -> Tallied:
        """... and what ``status`` and ``/metrics`` count."""
        return adapter
