"""The Telegram adapter: a PTB Application run in our event loop; sends and translates errors."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import importlib.util
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import SecretStr
from telegram import Update
from telegram.error import InvalidToken, TelegramError, TimedOut
from telegram.ext import Application, ApplicationBuilder, ExtBot
from telegram.request import HTTPXRequest

from bots.inflight import RESTARTING, InFlight
from bots.network import network_reason
from bots.telegram.editing import TelegramEditing
from bots.telegram.handlers import AnswerTiming, Handlers
from bots.telegram.menus import RedactToken, command_menus, sdk_loggers
from bots.telegram.request import ClientClosed, EncodedJson, JsonRequest, shared_tls
from bots.telegram.settings import TelegramSettings
from bots.telegram.wire import (
    SendBodies,
    chat_id,
    excerpt,
    may_have_arrived,
    target_kind,
    topic_of,
    translate,
)
from digest_core.port import (
    Clock,
    CommandButton,
    ConfigError,
    DeliveryError,
    Message,
    OutcomeUnknown,
    Part,
    PartKey,
    PlatformLimits,
    RenderOptions,
    Target,
    TargetKind,
    TransientError,
    notice,
)
from digest_core.rendering import telegram as telegram_render

if TYPE_CHECKING:
    from digest_core.port import Port, Renderer

log = logging.getLogger(__name__)

#: PTB's concrete Application type as built by ApplicationBuilder
App = Application[Any, Any, Any, Any, Any, Any]

#: Update types the bot asks for: commands come as messages, button presses as callback
#: queries; channel posts (our own) and member updates are of no use.
ALLOWED_UPDATES = (Update.MESSAGE, Update.CALLBACK_QUERY, Update.INLINE_QUERY)

#: HTTP timeouts of Bot API calls, in seconds (PTB's defaults are 5, 5, 5 and 1). A send
#: whose answer does not come within the read timeout is retried by the core, but Telegram
#: may have accepted it: the post then appears twice. The read and write timeouts are
#: therefore generous (``request_timeout_seconds`` in the settings overrides both); connect
#: and pool timeouts can be shorter, as a request that times out there never left.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
WRITE_TIMEOUT = 30.0
POOL_TIMEOUT = 10.0
#: getUpdates: PTB waits ``poll_timeout_seconds`` (the long poll) plus this read timeout
#: (telegram.Bot.get_updates adds the two), so an idle poll never times out.
GET_UPDATES_READ_MARGIN = 10.0

#: On :meth:`TelegramAdapter.stop`, commands being answered get this long to finish before
#: they are cancelled and their users told to try again (``digest-bot run`` has done this
#: already, within its shutdown budget), and the notices this long to go out.
#: a getUpdates failing again for the same reason is logged again after this many seconds
POLL_ERROR_REPEAT = 60.0

STOP_GRACE_SECONDS = 3.0
APOLOGY_SECONDS = 1.5


class TelegramAdapter(TelegramEditing):
    """The Telegram platform: posts through the Bot API and answers commands.

    ``send`` is the Platform contract (one sendMessage, errors translated, no retries);
    ``start``/``stop`` run a python-telegram-bot Application inside the running event loop
    (long polling, or a webhook server when configured). Replies to commands go through the
    same pacing budget as deliveries (the service's engine pacer), so a broadcast and readers'
    commands together stay under Telegram's limits.

    Timeouts and duplicates: a ``sendMessage`` whose answer does not come within the read
    timeout (:data:`READ_TIMEOUT`, or ``request_timeout_seconds``) is a
    :class:`~digest_core.errors.TransientError`, so the core sends it again. Telegram may have
    accepted the first one, and the Bot API has no idempotency key, so the post can then
    appear twice: deliberately at-least-once, as a lost post is worse than a rare duplicate.
    The timeouts are generous to make this rare, and each such timeout is logged as a WARNING
    naming the chat and the message.

    Stopping: :meth:`stop` stops receiving first and keeps the bot usable until PTB has shut
    down; a send while the adapter is not running is a ``TransientError`` (the part goes back
    to pending and the next start sends it), never a contract breach. A send cut by the stop,
    like a read timeout, is :class:`~digest_core.errors.OutcomeUnknown`: the core keeps the
    part counted in flight (it may have arrived) and sends it again. Commands being answered
    are tracked in ``in_flight``: they get :data:`STOP_GRACE_SECONDS`, then are cancelled and
    their users told to try again, so a stop never waits on a long reply.
    """

    name = "telegram"
    flavor: Renderer = telegram_render
    #: readers can subscribe to get the daily issue in a private chat
    subscriptions = True

    def __init__(
        self,
        settings: TelegramSettings,
        *,
        token: SecretStr,
        clock: Clock,
        limits: PlatformLimits,
        on_answered: Callable[[AnswerTiming], None] | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        """``limits``: the pacing model, Telegram's flood limits (:mod:`bots.telegram.spec`
        chooses them: 30 messages/s per bot, about 1/s per private chat, 20/min per group or
        channel; paid broadcast's 1000/s);
        ``on_answered`` is told how long each command took (benchmarks; MUST NOT raise);
        ``in_flight`` tracks the command handlers (shared by the runtime's adapters)."""
        self.settings = settings
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self.clock = clock
        self.limits = limits
        #: what private subscribers get (the core renders it): the issue or its compact form
        self.subscriber_part = Part.TOC if settings.subscriber_format == "compact" else Part.ALL
        #: every sendMessage carries allow_paid_broadcast: replies share the paced budget
        self._bodies = SendBodies({"allow_paid_broadcast": True} if settings.paid_broadcast else {})
        #: the Bot API's sendMessage URL (the token in it), known once the bot is built
        self._send_url = ""
        self.post_options = RenderOptions(buttons=True, link_preview=settings.link_preview)
        self.admins = frozenset(settings.admins)
        self.on_answered = on_answered
        self._token = token
        self._app: App | None = None
        self._stopping = False
        self._port: Port | None = None
        self._handlers: Handlers | None = None
        self._redactor = RedactToken(token)
        #: the last getUpdates failure logged: (reason, monotonic time)
        self._poll_error: tuple[str, float] | None = None

    # ------------------------------------------------------------ Platform

    @property
    def bot(self) -> ExtBot[Any]:
        """The PTB bot; only after :meth:`start`.

        Raises:
            RuntimeError: the adapter has not been started.
        """
        if self._app is None:
            raise RuntimeError("TelegramAdapter.start() has not been called")
        bot: ExtBot[Any] = self._app.bot
        return bot

    @property
    def username(self) -> str:
        """The bot's @username without the @ (known after start)."""
        return self.bot.username

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """One ``sendMessage`` with ``chat_id`` plus the payload exactly (and the
        ``message_thread_id`` of a forum topic's target, ``-100…:42``); the message id.
        (``key`` is unused: the Bot API has no idempotent send.)

        Raises:
            RateLimited: 429, with Telegram's retry_after.
            TargetGone: 403 (blocked, kicked), or "chat not found" and other no-rights 400s;
                a forum topic closed, deleted or not found.
            TargetMoved: the group became a supergroup (``new_target`` is its id).
            Rejected: any other 400 (the payload is wrong), a 401/404/409.
            TransientError: timeouts (the message may have arrived), network errors, 5xx,
                or the adapter is not running (stopped, or not yet started).
        """
        return await self._send(target, message, retried=True)

    async def _send(self, target: Target, message: Message, *, retried: bool) -> str:
        """:meth:`send`; ``retried`` tells the timeout warning whether a retry follows."""
        app = self._app
        if app is None:
            raise self._not_running(target)
        body = self._bodies.body(chat_id(target.id), topic_of(target.id), message)
        try:
            # PTB's request's post (its timeouts, its errors from the answer) of a body encoded
            # for this chat from the message's fields encoded once (SendBodies), the answer cut
            # down to the message's id: building the request and a Message from the answer
            # (Bot.send_message) was most of PTB's CPU per send
            sent = await app.bot.request.post(
                self._send_url, EncodedJson(body, message_id_only=True)
            )
        except TelegramError as exc:
            if self._app is not app or self._stopping:
                raise self._cut(exc, target) from exc
            if isinstance(exc, TimedOut):
                self._log_timeout(exc, target, message, retried=retried)
            raise translate(exc, target) from exc
        except RuntimeError as exc:
            # PTB's HTTP client closed under the send: stop() is shutting the adapter down
            if self._app is app and not self._stopping:
                raise
            raise self._cut(exc, target) from exc
        return str(sent["message_id"])

    def _cut(self, exc: Exception, target: Target) -> DeliveryError:
        """A send cut by :meth:`stop`: the request may have reached Telegram, unless the
        client was closed before it went out (then it is refused as when not running)."""
        if isinstance(exc, ClientClosed) or isinstance(exc.__cause__, ClientClosed):
            return self._not_running(target)
        return OutcomeUnknown(
            f"the Telegram adapter stopped during the send (it may have arrived): {exc}",
            platform=self.name,
            target=target.id,
        )

    def _log_timeout(
        self, exc: TimedOut, target: Target, message: Message, *, retried: bool
    ) -> None:
        what = f"sendMessage to chat {target.id} ({excerpt(message)})"
        if not may_have_arrived(exc):
            log.info("telegram: %s timed out before it was sent: %s", what, exc)
            return
        log.warning(
            "telegram: %s timed out after %g s: it may have arrived; %s",
            what,
            self._read_timeout(),
            "it will be sent again (possibly a duplicate)" if retried else "not retried",
        )

    def _read_timeout(self) -> float:
        return self.settings.request_timeout_seconds or READ_TIMEOUT

    # ------------------------------------------------------------ Adapter

    def channel_targets(self) -> list[Target]:
        return [Target(self.name, c, target_kind(c)) for c in self.settings.channels]

    async def alert_admins(self, text: str) -> None:
        """DM every admin (best effort: an admin who never started the bot is skipped).

        Raises:
            TransientError: no admin got it and Telegram could not be reached (or the
                adapter is not running): the service queues it and sends it again.
        """
        if not self.admins:
            return
        if self._app is None:
            raise self._not_running()
        reached, unreachable = 0, ""
        for admin in sorted(self.admins):
            try:
                await self.reply(admin, TargetKind.PRIVATE, notice(text, self.flavor))
                reached += 1
            except TransientError as exc:  # said once, by whoever queues the alert
                unreachable = str(exc)
                log.debug("could not alert admin %s: %s", admin, exc)
            except Exception as exc:  # one line: the reason, not a traceback
                log.warning("could not alert admin %s: %s: %s", admin, type(exc).__name__, exc)
        if not reached and unreachable:
            raise TransientError(f"no admin got the alert: {unreachable}", platform=self.name)

    @property
    def standby_receives(self) -> bool:
        """A standby (not the leader) may answer commands in webhook mode; polling is the
        leader's alone, as two pollers of one token get 409 Conflict."""
        return self.settings.mode == "webhook"

    @property
    def connected(self) -> bool:
        """Logged in and, when receiving, its updater running (for /readyz)."""
        app = self._app
        if app is None:
            return False
        return not app.running or (app.updater is not None and app.updater.running)

    async def message_admins(
        self, messages: Sequence[Message], *, actions: Sequence[CommandButton] = ()
    ) -> int:
        """DM ``messages`` to every admin, ``actions`` as buttons on the last (best effort:
        an admin who never started the bot is skipped); how many got them. Not a delivery."""
        if self._app is None or not messages:
            return 0
        out = list(messages)
        if actions:
            out[-1] = with_actions(out[-1], actions)
        reached = 0
        for admin in sorted(self.admins):
            try:
                await self.reply(admin, TargetKind.PRIVATE, out)
                reached += 1
            except Exception as exc:
                log.warning("could not message admin %s: %s", admin, exc)
        return reached

    async def start(self, port: Port, *, receive: bool = True) -> None:
        """Build the Application, log in (getMe) and, with ``receive``, answer commands.

        Raises:
            ConfigError: Telegram refused the token.
            TransientError: the Bot API could not be reached.
        """
        for logger in sdk_loggers():
            # request URLs hold the token: httpx logs each at INFO, PTB its base URL at DEBUG
            logger.addFilter(self._redactor)
        self._port = port
        app = self._app = self._build()
        try:
            await app.initialize()
        except InvalidToken as exc:
            await self._abandon()
            raise ConfigError("Telegram refused the bot token", key="telegram.token") from exc
        except TelegramError as exc:
            await self._abandon()
            reason = network_reason(exc) or str(exc)
            raise TransientError(
                f"cannot reach the Bot API at {self.settings.api_base_url}: {reason}; check "
                "the network or [telegram] api_base_url",
                platform=self.name,
            ) from exc
        log.info("telegram: logged in as @%s", app.bot.username)
        if not receive:
            return
        self._handlers = Handlers(self, port)
        self._handlers.install(app)
        await self._set_commands()
        await app.start()
        assert app.updater is not None
        allowed = list(ALLOWED_UPDATES)
        if self.settings.mode == "webhook":
            s = self.settings
            assert s.webhook_url is not None and s.webhook_secret is not None
            if importlib.util.find_spec("tornado") is None:
                await self.stop()
                raise ConfigError(
                    "webhook mode needs pip install 'python-telegram-bot[webhooks]'",
                    key="telegram.mode",
                )
            await app.updater.start_webhook(
                listen=s.webhook_listen,
                port=s.webhook_port,
                url_path=urlsplit(s.webhook_url).path.lstrip("/"),
                webhook_url=s.webhook_url,
                secret_token=s.webhook_secret.get_secret_value(),
                allowed_updates=allowed,
            )
            log.info(
                "telegram: webhook on %s:%d for %s", s.webhook_listen, s.webhook_port, s.webhook_url
            )
        else:
            await app.updater.start_polling(
                poll_interval=0.0,
                timeout=dt.timedelta(seconds=self.settings.poll_timeout_seconds),
                allowed_updates=allowed,
                error_callback=self._poll_failed,
            )
            log.info("telegram: long polling")

    async def _abandon(self) -> None:
        """Drop an Application whose log-in failed: PTB leaves its requests' clients open
        (its shutdown skips a bot that never logged in), so they are closed here."""
        app, self._app = self._app, None
        if app is not None:
            # (getUpdates' request and the one of every other call)
            requests = app.bot._request
            await asyncio.gather(*(r.shutdown() for r in requests), return_exceptions=True)

    def _poll_failed(self, exc: TelegramError) -> None:
        """A failed getUpdates (PTB retries it): one line per new reason, not a traceback
        per poll (PTB's default); the same reason again is logged at most once a minute."""
        reason = network_reason(exc) or f"{type(exc).__name__}: {exc}"
        now = self.clock.monotonic()
        last = self._poll_error
        if last is not None and last[0] == reason and now - last[1] < POLL_ERROR_REPEAT:
            log.debug("telegram: polling for updates failed again: %s", reason)
            return
        self._poll_error = (reason, now)
        log.warning("telegram: polling for updates failed: %s (retrying)", reason)

    async def stop(self) -> None:
        """Stop receiving (updater, then application), then close the HTTP connections.

        Sends keep working until PTB has shut down (``Application.stop`` waits for running
        handlers, which may be delivering a /repost); after that they raise
        :class:`TransientError`.
        """
        app = self._app
        if app is None or self._stopping:
            return
        self._stopping = True
        try:
            # the order PTB requires: "This Application is still running!" otherwise
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                # Application.stop waits for every handler, however long its reply takes:
                # bound that, and tell whoever was cut short (updates already fetched are
                # told at once)
                self.in_flight.close()
                if not await self.in_flight.idle(STOP_GRACE_SECONDS):
                    await self.in_flight.cancel(within=1.0)
                await self.in_flight.apologise(within=APOLOGY_SECONDS)
                await app.stop()
            await app.shutdown()
        finally:
            self._app = None
            self._stopping = False
            for logger in sdk_loggers():
                logger.removeFilter(self._redactor)

    # ------------------------------------------------------------ replies

    async def reply(
        self,
        chat: int | str,
        kind: TargetKind,
        messages: Sequence[Message],
        *,
        paced: list[float] | None = None,
    ) -> list[str]:
        """Send ``messages`` in order to ``chat`` as a reply (not a ledgered delivery).

        The core paces them under the same budget as deliveries and waits out short 429s
        (:meth:`digest_core.port.Port.reply`; real seconds spent waiting are appended to
        ``paced``); here each message is one ``sendMessage``, never retried, never waited for.

        Raises:
            DeliveryError: a message could not be sent (the rest are not attempted).
        """
        target = Target(self.name, str(chat), kind)
        once = functools.partial(self._send, retried=False)
        return await self._require_port(target).reply(
            self, target, messages, send=once, paced=paced
        )

    async def tell_restarting(self, chat: int | str, kind: TargetKind) -> None:
        """Send :data:`~bots.inflight.RESTARTING` to ``chat`` at once: during a shutdown
        there is no time to wait for the pacing budget, so the message is only accounted.

        Raises:
            DeliveryError: it could not be sent.
        """
        target = Target(self.name, str(chat), kind)
        self._require_port(target).account(self, target)
        for message in notice(RESTARTING, self.flavor):
            await self._send(target, message, retried=False)

    def _require_port(self, target: Target) -> Port:
        if self._port is None:
            raise self._not_running(target)
        return self._port

    # ------------------------------------------------------------ internals

    def _build(self) -> App:
        base = self.settings.api_base_url.rstrip("/")
        builder = (
            ApplicationBuilder()
            .token(self._token.get_secret_value())
            .base_url(base)
            # a self-hosted Bot API server serves files under /file/bot<token>
            .base_file_url(base[: -len("/bot")] + "/file/bot" if base.endswith("/bot") else base)
            # readers' commands are answered concurrently: one slow reply blocks no one
            .concurrent_updates(True)
            .request(
                JsonRequest(
                    # the delivery engine keeps up to 100 sends in flight; never queue on the pool
                    connection_pool_size=128,
                    connect_timeout=CONNECT_TIMEOUT,
                    read_timeout=self._read_timeout(),
                    write_timeout=self.settings.request_timeout_seconds or WRITE_TIMEOUT,
                    pool_timeout=POOL_TIMEOUT,
                )
            )
            # (PTB takes no get_updates_* timeouts beside a request instance)
            .get_updates_request(
                HTTPXRequest(
                    connection_pool_size=1,
                    connect_timeout=CONNECT_TIMEOUT,
                    read_timeout=GET_UPDATES_READ_MARGIN,
                    write_timeout=WRITE_TIMEOUT,
                    pool_timeout=POOL_TIMEOUT,
                    httpx_kwargs=shared_tls(),
                )
            )
        )
        app = builder.build()
        self._send_url = f"{app.bot.base_url}/sendMessage"
        return app

    async def _set_commands(self) -> None:
        """The command menu in Chinese and English; admins also see the admin commands."""
        bot = self.bot
        for scope, language, commands in command_menus(self.admins):
            try:
                await bot.set_my_commands(commands, scope=scope, language_code=language)
            except TelegramError as exc:
                if scope is None:
                    log.warning("telegram: could not set the command menu: %s", exc)
                # an admin's scope only works once the admin has talked to the bot; harmless


def with_actions(message: Message, actions: Sequence[CommandButton]) -> Message:
    """``message`` with one row of inline buttons, one per action (callback data from
    :attr:`CommandButton.data`)."""
    payload = dict(message.payload)
    row = [{"text": a.label, "callback_data": a.data} for a in actions]
    payload["reply_markup"] = {"inline_keyboard": [row]}
    return Message(payload)
