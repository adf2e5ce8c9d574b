"""The Telegram adapter: a PTB Application run in our event loop; sends and translates errors."""

from __future__ import annotations

import datetime as dt
import importlib.util
import inspect
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr
from telegram import (
    Bot,
    BotCommand,
    BotCommandScope,
    BotCommandScopeChat,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Update,
)
from telegram.constants import ChatType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import Application, ApplicationBuilder, ExtBot
from telegram.warnings import PTBDeprecationWarning

from bots.inflight import RESTARTING, InFlight
from bots.network import network_reason
from bots.renderers import Flavor
from bots.telegram.handlers import AnswerTiming, Handlers
from bots.telegram.limits import TELEGRAM_LIMITS
from bots.telegram.settings import TelegramSettings
from digest_core.catalogue import menu
from digest_core.clock import Clock
from digest_core.delivery import Pacer
from digest_core.errors import (
    ConfigError,
    DeliveryError,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    TargetGone,
    TargetMoved,
    TransientError,
)
from digest_core.platform import PartKey, PlatformLimits, Target, TargetKind
from digest_core.rendering import Message, RenderOptions, notice

if TYPE_CHECKING:
    from digest_core.service import DigestService

log = logging.getLogger(__name__)

#: PTB's concrete Application type as built by ApplicationBuilder
App = Application[Any, Any, Any, Any, Any, Any]

#: BadRequest descriptions (PTB strips "Bad Request: ") that mean we can never post there:
#: https://core.telegram.org/bots/api#making-requests and the error texts Telegram returns.
GONE_DESCRIPTIONS = (
    "chat not found",
    "user not found",
    "peer_id_invalid",
    "chat_write_forbidden",
    "have no rights to send",
    "not enough rights to send",
    "need administrator rights",
    "bot is not a member",
    "group chat was deactivated",
)

#: Update types the bot asks for: commands come as messages, button presses as callback
#: queries; channel posts (our own) and member updates are of no use.
ALLOWED_UPDATES = (Update.MESSAGE, Update.CALLBACK_QUERY)

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

#: A reply (not a ledgered delivery) waits out a 429 of at most this many seconds, at most
#: this many times per message, before it is dropped.
MAX_REPLY_RETRY_AFTER = 30.0
MAX_REPLY_ATTEMPTS = 4

#: On :meth:`TelegramAdapter.stop`, commands being answered get this long to finish before
#: they are cancelled and their users told to try again (``digest-bot run`` has done this
#: already, within its shutdown budget), and the notices this long to go out.
STOP_GRACE_SECONDS = 3.0
APOLOGY_SECONDS = 1.5


#: one setMyCommands call: scope (None: default), language code (None: all), commands
MenuCall = tuple[BotCommandScope | None, str | None, list[BotCommand]]


def command_menus(admins: Iterable[int]) -> list[MenuCall]:
    """Every ``setMyCommands`` call, as (scope, language code, commands), from the catalogue.

    Readers get the listed reader commands, in English by default and in Chinese for language
    code "zh"; each admin's own chat scope gets the admin commands too, in both languages.
    Descriptions are the catalogue's (1-256 characters, telegram.constants.BotCommandLimit).
    """

    def commands(*, admin: bool, zh: bool) -> list[BotCommand]:
        return [BotCommand(s.name, s.zh if zh else s.en) for s in menu(admin=admin)]

    calls: list[MenuCall] = [
        (None, None, commands(admin=False, zh=False)),
        (None, "zh", commands(admin=False, zh=True)),
    ]
    for admin in sorted(admins):
        scope = BotCommandScopeChat(admin)
        calls.append((scope, None, commands(admin=True, zh=False)))
        calls.append((scope, "zh", commands(admin=True, zh=True)))
    return calls


#: sendMessage parameters PTB's ``Bot.send_message`` takes by name; anything else in a payload
#: travels as ``api_kwargs`` so the request carries the payload exactly.
_SEND_PARAMS = frozenset(inspect.signature(Bot.send_message).parameters) - {
    "self", "chat_id", "api_kwargs", "reply_markup", "link_preview_options",
}  # fmt: skip


class TelegramAdapter:
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
    flavor = Flavor.TELEGRAM
    #: readers can subscribe to get the daily issue in a private chat
    subscriptions = True
    #: Telegram's flood limits (bots.telegram.limits): 30 messages/s per bot, about
    #: 1/s per private chat, 20/min per group or channel.
    limits: PlatformLimits = TELEGRAM_LIMITS

    def __init__(
        self,
        settings: TelegramSettings,
        *,
        token: SecretStr,
        clock: Clock,
        limits: PlatformLimits | None = None,
        on_answered: Callable[[AnswerTiming], None] | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        """``limits`` overrides the pacing model (benchmarks against a scaled double);
        ``on_answered`` is told how long each command took (benchmarks; MUST NOT raise);
        ``in_flight`` tracks the command handlers (shared by the runtime's adapters)."""
        self.settings = settings
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self.clock = clock
        if limits is not None:
            self.limits = limits
        self.post_options = RenderOptions(buttons=True, link_preview=settings.link_preview)
        self.admins = frozenset(settings.admins)
        self.on_answered = on_answered
        self._token = token
        self._app: App | None = None
        self._stopping = False
        self._pacer: Pacer | None = None
        self._handlers: Handlers | None = None
        self._redactor = _RedactToken(token)

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
        """One ``sendMessage`` with ``chat_id`` plus the payload exactly; the message id.
        (``key`` is unused: the Bot API has no idempotent send.)

        Raises:
            RateLimited: 429, with Telegram's retry_after.
            TargetGone: 403 (blocked, kicked), or "chat not found" and other no-rights 400s.
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
            raise TransientError(
                "the Telegram adapter is not running", platform=self.name, target=target.id
            )
        kwargs, extra = split_payload(message.payload)
        try:
            sent = await app.bot.send_message(
                chat_id=chat_id(target.id), **kwargs, api_kwargs=extra or None
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
        return str(sent.message_id)

    def _cut(self, exc: Exception, target: Target) -> OutcomeUnknown:
        """A send cut by :meth:`stop`: the request may have reached Telegram."""
        return OutcomeUnknown(
            f"the Telegram adapter stopped during the send (it may have arrived): {exc}",
            platform=self.name,
            target=target.id,
        )

    def _log_timeout(
        self, exc: TimedOut, target: Target, message: Message, *, retried: bool
    ) -> None:
        what = f"sendMessage to chat {target.id} ({_excerpt(message)})"
        if not _may_have_arrived(exc):
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
        """DM every admin (best effort: an admin who never started the bot is skipped)."""
        if self._app is None:
            return
        for admin in sorted(self.admins):
            try:
                await self.reply(admin, TargetKind.PRIVATE, notice(text, self.flavor))
            except Exception:
                log.exception("could not alert admin %s", admin)

    async def start(self, service: DigestService, *, receive: bool = True) -> None:
        """Build the Application, log in (getMe) and, with ``receive``, answer commands.

        Raises:
            ConfigError: Telegram refused the token.
            TransientError: the Bot API could not be reached.
        """
        for logger in _sdk_loggers():
            # request URLs hold the token: httpx logs each at INFO, PTB its base URL at DEBUG
            logger.addFilter(self._redactor)
        self._pacer = service.engine.pacer(self)
        app = self._app = self._build()
        try:
            await app.initialize()
        except InvalidToken as exc:
            self._app = None
            raise ConfigError("Telegram refused the bot token", key="telegram.token") from exc
        except TelegramError as exc:
            self._app = None
            reason = network_reason(exc) or str(exc)
            raise TransientError(
                f"cannot reach the Bot API at {self.settings.api_base_url}: {reason}; check "
                "the network or [telegram] api_base_url",
                platform=self.name,
            ) from exc
        log.info("telegram: logged in as @%s", app.bot.username)
        if not receive:
            return
        self._handlers = Handlers(self, service)
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
            )
            log.info("telegram: long polling")

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
            for logger in _sdk_loggers():
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

        Paced under the same budget as deliveries (real seconds spent waiting are appended to
        ``paced``); short 429s are waited out (:data:`MAX_REPLY_ATTEMPTS`).

        Raises:
            DeliveryError: a message could not be sent (the rest are not attempted).
        """
        target = Target(self.name, str(chat), kind)
        ids: list[str] = []
        for message in messages:
            for attempt in range(1, MAX_REPLY_ATTEMPTS + 1):
                before = time.perf_counter()
                if await self.pace(target) and paced is not None:
                    paced.append(time.perf_counter() - before)
                try:
                    ids.append(await self._send(target, message, retried=False))
                    break
                except RateLimited as exc:
                    pacer = self._get_pacer()
                    pacer.defer(target, self.clock.monotonic() + exc.retry_after)
                    if attempt == MAX_REPLY_ATTEMPTS or exc.retry_after > MAX_REPLY_RETRY_AFTER:
                        raise
        return ids

    async def tell_restarting(self, chat: int | str, kind: TargetKind) -> None:
        """Send :data:`~bots.inflight.RESTARTING` to ``chat`` at once: during a shutdown
        there is no time to wait for the pacing budget, so the message is only accounted.

        Raises:
            DeliveryError: it could not be sent.
        """
        target = Target(self.name, str(chat), kind)
        self._get_pacer().take(target, self.clock.monotonic())
        for message in notice(RESTARTING, self.flavor):
            await self._send(target, message, retried=False)

    async def pace(self, target: Target) -> float:
        """Wait until ``target`` (and the bot as a whole) may get a message; seconds waited."""
        pacer = self._get_pacer()
        waited = 0.0
        for _ in range(1000):  # bounded: every wait makes a token available
            now = self.clock.monotonic()
            wait = max(pacer.ready_at(target, now) - now, pacer.overall_delay(now))
            if wait <= 0:
                pacer.take(target, now)
                return waited
            await self.clock.sleep(wait)
            waited += wait
        raise TransientError("pacing did not converge", platform=self.name, target=target.id)

    def _get_pacer(self) -> Pacer:
        if self._pacer is None:
            self._pacer = Pacer(self.limits, now=self.clock.monotonic())
        return self._pacer

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
            # the delivery engine keeps up to 100 sends in flight; never queue on the pool
            .connection_pool_size(128)
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(self._read_timeout())
            .write_timeout(self.settings.request_timeout_seconds or WRITE_TIMEOUT)
            .pool_timeout(POOL_TIMEOUT)
            .get_updates_connect_timeout(CONNECT_TIMEOUT)
            .get_updates_read_timeout(GET_UPDATES_READ_MARGIN)
            .get_updates_write_timeout(WRITE_TIMEOUT)
            .get_updates_pool_timeout(POOL_TIMEOUT)
        )
        return builder.build()

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


# ---------------------------------------------------------------- helpers


def chat_id(target_id: str) -> int | str:
    """Telegram's chat_id: an integer id, or an ``@channelusername`` as is."""
    return target_id if target_id.startswith("@") else int(target_id)


def target_kind(target_id: str) -> TargetKind:
    """CHANNEL for @usernames and -100… ids, GROUP for other negative ids, else PRIVATE."""
    if target_id.startswith(("@", "-100")):
        return TargetKind.CHANNEL
    if target_id.startswith("-"):
        return TargetKind.GROUP
    return TargetKind.PRIVATE


def kind_of_chat(chat_type: str) -> TargetKind:
    """The pacing kind of a PTB chat type."""
    if chat_type == ChatType.PRIVATE:
        return TargetKind.PRIVATE
    if chat_type == ChatType.CHANNEL:
        return TargetKind.CHANNEL
    return TargetKind.GROUP


def split_payload(payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A rendered sendMessage payload as ``send_message`` keyword arguments plus ``api_kwargs``.

    Objects PTB wants typed (keyboard, preview options) are built from their JSON; the
    request PTB sends then carries exactly the payload's fields.
    """
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "reply_markup" and isinstance(value, dict) and "inline_keyboard" in value:
            kwargs[key] = InlineKeyboardMarkup.de_json(value, None)
        elif key == "link_preview_options" and isinstance(value, dict):
            kwargs[key] = LinkPreviewOptions.de_json(value, None)
        elif key in _SEND_PARAMS:
            kwargs[key] = value
        else:
            extra[key] = value
    return kwargs, extra


def _excerpt(message: Message, width: int = 40) -> str:
    """The start of a message's first line, to tell the parts of a post apart in logs."""
    text = str(message.payload.get("text", ""))
    first = text.strip().split("\n", 1)[0]
    return repr(first[:width] + ("…" if len(first) > width else ""))


def retry_seconds(value: float | dt.timedelta) -> float:
    """RetryAfter.retry_after as float seconds: PTB 22 gives an int, a float or a timedelta."""
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)


def translate(exc: TelegramError, target: Target) -> DeliveryError:
    """The core's DeliveryError for a PTB error (subclasses before their bases)."""
    where = {"platform": target.platform, "target": target.id}
    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PTBDeprecationWarning)  # int → timedelta migration
            wait = retry_seconds(exc.retry_after)
        return RateLimited(str(exc), retry_after=wait, **where)
    if isinstance(exc, ChatMigrated):
        return TargetMoved(str(exc), new_target=str(exc.new_chat_id), **where)
    if isinstance(exc, Forbidden):
        return TargetGone(str(exc), **where)
    if isinstance(exc, BadRequest):  # before NetworkError, its base
        if any(d in exc.message.lower() for d in GONE_DESCRIPTIONS):
            return TargetGone(str(exc), **where)
        return Rejected(str(exc), **where)
    if isinstance(exc, TimedOut) and _may_have_arrived(exc):
        return OutcomeUnknown(f"{type(exc).__name__}: {exc} (it may have arrived)", **where)
    if isinstance(exc, TimedOut | NetworkError):
        return TransientError(f"{type(exc).__name__}: {exc}", **where)
    return Rejected(f"{type(exc).__name__}: {exc}", **where)


def _may_have_arrived(exc: TimedOut) -> bool:
    """False for a timeout before the request left (connecting, or waiting for a pooled
    connection); True for a read or write timeout, which Telegram may have acted on."""
    return not (
        isinstance(exc.__cause__, httpx.ConnectTimeout | httpx.PoolTimeout)
        or "pool timeout" in exc.message.lower()
    )


def _sdk_loggers() -> list[logging.Logger]:
    """The loggers of PTB, httpx and httpcore (a logger's filters do not see its children's
    records, so each one gets the filter)."""
    names = [
        name
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
        and name.split(".", 1)[0] in ("telegram", "httpx", "httpcore")
    ]
    return [logging.getLogger(n) for n in {"telegram", "httpx", "httpcore", *names}]


class _RedactToken(logging.Filter):
    """Replaces the bot token in log records (request URLs carry it) with ``<token>``."""

    def __init__(self, token: SecretStr) -> None:
        super().__init__()
        self._secret = token.get_secret_value()

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secret:
            message = record.getMessage()
            if self._secret in message:
                record.msg = message.replace(self._secret, "<token>")
                record.args = None
        return True
