"""How the app bot receives: lark-oapi's event dispatcher, over its long connection or over the
HTTP event callback; each event becomes one of three plain records for the handlers.

lark-oapi is imported here only, when the app bot starts (its import takes about 2 s), and in
the SDK's own thread (:mod:`bots.workchat.sdkthread`), never by ``spec.py``.

- Long connection: the SDK's ``ws.Client`` (https://open.feishu.cn/document/server-docs/
  event-subscription-guide/event-subscription-configure-/request-url-configuration-case):
  what ``Client.start()`` does, step by step on the thread's loop (connect, then the ping
  loop), so the first connection's failure reaches the adapter's start; after that the SDK
  reconnects by itself with the server's policy.
- HTTP callback: the SDK's ``EventDispatcherHandler.do`` checks the verification token and
  the ``X-Lark-Signature``, decrypts the body (AES-256-CBC with the SHA-256 of the encrypt
  key) and answers ``url_verification``; it runs in a worker thread, as a card press waits
  for its answer from the bot's loop.

The dispatcher's processors run off the bot's loop and hand a record to it
(:class:`~bots.workchat.sdkthread.MainLoop`); a card press waits up to
:data:`CARD_ANSWER_SECONDS` for the toast its answer shows (Feishu allows 3 s).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bots.workchat import callback
from bots.workchat.app.handlers import TextMessage
from bots.workchat.sdkthread import MainLoop, SdkConnection
from digest_core.port import ConfigError

log = logging.getLogger(__name__)

#: how long a card press waits for its answer before a generic toast (Feishu: 3 s)
CARD_ANSWER_SECONDS = 2.5


@dataclass(frozen=True)
class CardPress:
    """A press of a card button (``card.action.trigger``)."""

    operator: str
    data: str
    chat_id: str
    message_id: str


@dataclass(frozen=True)
class MenuChoice:
    """A bot-menu item chosen (``application.bot.menu_v6``)."""

    operator: str
    key: str


@dataclass(frozen=True)
class Receivers:
    """The handlers' three coroutines (run on the bot's loop; a press returns its toast), and
    the bot's open_id (a message mentioning it is addressed to the bot)."""

    message: Callable[[TextMessage], Coroutine[Any, Any, None]]
    press: Callable[[CardPress], Coroutine[Any, Any, str | None]]
    menu: Callable[[MenuChoice], Coroutine[Any, Any, None]]
    bot_open_id: str


def text_message(data: Any, bot_open_id: str) -> TextMessage | None:
    """The record of an SDK ``P2ImMessageReceiveV1`` (``im.message.receive_v1``; mentioning
    the bot: ``bot_open_id`` among its mentions); None for anything but text."""
    message, sender = data.event.message, data.event.sender
    if message.message_type != "text":
        return None
    try:
        text = str(json.loads(message.content or "{}").get("text", ""))
    except ValueError:
        return None
    mentioned = []
    for mention in message.mentions or []:
        text = text.replace(mention.key, " ")
        if mention.id is not None and mention.id.open_id:
            mentioned.append(str(mention.id.open_id))
    return TextMessage(
        message_id=str(message.message_id),
        chat=str(message.chat_id),
        private=message.chat_type == "p2p",
        sender=str(sender.sender_id.open_id),
        text=text.strip(),
        mentioned=bot_open_id in mentioned,
    )


def card_press(data: Any) -> CardPress | None:
    """The record of an SDK ``P2CardActionTrigger`` (a button whose value is ``{"data"}``)."""
    event = data.event
    value = event.action.value if event.action is not None else None
    if not isinstance(value, dict) or not isinstance(value.get("data"), str):
        return None
    context = event.context
    return CardPress(
        operator=str(event.operator.open_id),
        data=value["data"],
        chat_id=str(context.open_chat_id if context else ""),
        message_id=str(context.open_message_id if context else ""),
    )


def menu_choice(data: Any) -> MenuChoice | None:
    event = data.event
    if event.operator is None or event.operator.operator_id is None or not event.event_key:
        return None
    return MenuChoice(operator=str(event.operator.operator_id.open_id), key=str(event.event_key))


def dispatcher(
    main: MainLoop, receivers: Receivers, *, encrypt_key: str = "", verification_token: str = ""
) -> Any:
    """lark-oapi's ``EventDispatcherHandler`` with our three processors (imports the SDK)."""
    import lark_oapi as lark
    from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTriggerResponse

    def on_message(data: Any) -> None:
        record = text_message(data, receivers.bot_open_id)
        if record is not None:
            main.submit(receivers.message(record), what="feishu: a message")

    def on_press(data: Any) -> Any:
        record = card_press(data)
        toast: str | None = None
        if record is not None:
            try:
                toast = main.call(receivers.press(record), timeout=CARD_ANSWER_SECONDS)
            except TimeoutError:
                toast = "处理中… / working…"
        body = {"toast": {"type": "info", "content": toast}} if toast else {}
        return P2CardActionTriggerResponse(body)

    def on_menu(data: Any) -> None:
        record = menu_choice(data)
        if record is not None:
            main.submit(receivers.menu(record), what="feishu: a menu choice")

    return (
        lark.EventDispatcherHandler.builder(encrypt_key, verification_token)
        .register_p2_im_message_receive_v1(on_message)
        .register_p2_card_action_trigger(on_press)
        .register_p2_application_bot_menu_v6(on_menu)
        .build()
    )


def quiet_sdk_logger() -> None:
    """lark-oapi's logger ("Lark") prints to stdout through its own handler: route it
    through ours instead (our format, our level, never the console chat's prompt)."""
    logger = logging.getLogger("Lark")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True


class LongConnection(SdkConnection):
    """The SDK's long connection, on its own thread."""

    platform, what = "feishu", "the long connection"

    def __init__(self, *, app_id: str, app_secret: str, domain: str, receivers: Receivers) -> None:
        super().__init__("feishu-long-connection")
        self._app_id, self._secret, self._domain = app_id, app_secret, domain
        self._receivers = receivers

    @property
    def connected(self) -> bool:
        return self._thread.running and self._client is not None and self._client._conn is not None

    async def _setup(self, loop: asyncio.AbstractEventLoop) -> None:
        import lark_oapi as lark
        import lark_oapi.ws.client as ws_client
        from lark_oapi.ws.exception import ClientException

        quiet_sdk_logger()
        ws_client.loop = loop  # lark-oapi 1.7.5's module-level loop (issues #119, #133)
        handler = dispatcher(self._main, self._receivers)
        self._client = lark.ws.Client(
            self._app_id,
            self._secret,
            event_handler=handler,
            domain=self._domain,
            log_level=lark.LogLevel.WARNING,
        )
        try:
            await self._client._connect()
        except ClientException as exc:
            raise ConfigError(
                f"Feishu refused the long connection ({exc}): check feishu.app_id, "
                "DIGEST_BOT_FEISHU__APP_SECRET and that the app subscribes with 长连接",
                key="feishu.app_id",
            ) from None
        loop.create_task(self._client._ping_loop())

    async def _teardown(self) -> None:
        client = self._client
        if client is not None:
            client._auto_reconnect = False
            await client._disconnect()


class CallbackServer(callback.CallbackServer):
    """Feishu's HTTP event callback: ``path`` takes Feishu's POSTs, handed to the SDK's
    dispatcher (which checks and decrypts them)."""

    platform = "feishu"

    def __init__(
        self,
        *,
        listen: tuple[str, int],
        path: str,
        encrypt_key: str,
        verification_token: str,
        receivers: Receivers,
    ) -> None:
        super().__init__(listen=listen, path=path)
        self._keys = (encrypt_key, verification_token)
        self._receivers = receivers
        self._handler: Any = None

    async def _prepare(self) -> None:
        """Import the SDK and build its dispatcher (in a thread: it takes seconds)."""
        main = MainLoop(asyncio.get_running_loop())

        def build() -> Any:
            quiet_sdk_logger()
            encrypt_key, token = self._keys
            return dispatcher(
                main, self._receivers, encrypt_key=encrypt_key, verification_token=token
            )

        self._handler = await asyncio.to_thread(build)

    async def _serve(self, request: web.Request) -> web.Response:
        from lark_oapi.core.model import RawRequest

        raw = RawRequest()
        raw.uri = request.path
        raw.body = await request.read()
        raw.headers = {k: v for k, v in request.headers.items()}
        for name in ("X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature"):
            raw.headers[name] = request.headers.get(name, "")
        answer = await asyncio.to_thread(self._handler.do, raw)
        if answer.status_code != 200:
            log.warning("feishu: a callback was refused (HTTP %s)", answer.status_code)
            # the SDK's text names the check that failed; nothing of the request's
            return web.json_response({"msg": "refused"}, status=answer.status_code)
        return web.Response(
            status=200, body=answer.content, content_type="application/json", charset="utf-8"
        )
