"""How the app robot receives: dingtalk-stream's Stream client, or the HTTP callback; each
robot message becomes a :class:`~bots.workchat.app.handlers.TextMessage` for the handlers.

dingtalk-stream is imported here only, when the app robot starts. Its client runs on its own
thread (:mod:`bots.workchat.sdkthread`): ``open_connection`` is a blocking ``requests.post``
without a timeout inside its coroutine. The gateway's address is the SDK's class attribute
``OPEN_CONNECTION_API`` (derived at import from ``DINGTALK_OPENAPI_ENDPOINT``), set here from
``[dingtalk] openapi_base``; ``get_host_ip`` (a UDP "connect" towards 8.8.8.8 to learn the
local address it reports) is left out. The SDK acks each message once its handler returns:
ours hands the message to the bot's loop and returns at once.

HTTP callback (https://open.dingtalk.com/document/orgapp/receive-message): headers
``timestamp`` (ms) and ``sign`` = base64(HMAC-SHA256(app secret, timestamp + "\\n" + app
secret)), checked here, the timestamp within an hour.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from bots.workchat import callback
from bots.workchat.app.handlers import TextMessage
from bots.workchat.sdkthread import CONNECT_SECONDS, SdkConnection
from digest_core.port import ConfigError

log = logging.getLogger(__name__)

#: how far a callback's timestamp may be from our clock
FRESHNESS_SECONDS = 3600.0


Receiver = Callable[[TextMessage], Coroutine[Any, Any, None]]


def robot_message(data: dict[str, Any]) -> TextMessage | None:
    """The record of a robot message's JSON (the Stream frame's data, or the callback's
    body), read with the SDK's ``ChatbotMessage`` (the conversation's openConversationId, the
    sender's staff id); None for anything but text."""
    from dingtalk_stream import ChatbotMessage

    message = ChatbotMessage.from_dict(data)
    if message.message_type != "text" or message.text is None or not message.sender_staff_id:
        return None
    return TextMessage(
        message_id=str(message.message_id),
        chat=str(message.conversation_id),
        private=message.conversation_type == "1",
        sender=str(message.sender_staff_id),
        text=str(message.text.content or "").strip(),
        mentioned=bool(message.is_in_at_list),
    )


def signed(secret: str, timestamp: str, sign: str, *, now: float) -> bool:
    """Whether a callback's ``timestamp`` and ``sign`` headers are DingTalk's."""
    if not timestamp.isdigit() or abs(now * 1000 - int(timestamp)) > FRESHNESS_SECONDS * 1000:
        return False
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256)
    return hmac.compare_digest(base64.b64encode(digest.digest()).decode(), sign)


class StreamConnection(SdkConnection):
    """The SDK's Stream client, on its own thread."""

    platform, what = "dingtalk", "the stream"

    def __init__(
        self, *, client_id: str, client_secret: str, openapi_base: str, receiver: Receiver
    ) -> None:
        super().__init__("dingtalk-stream")
        self._id, self._secret, self._base = client_id, client_secret, openapi_base
        self._receiver = receiver

    @property
    def connected(self) -> bool:
        return self._thread.running and self._client is not None and bool(self._client.websocket)

    async def _setup(self, loop: asyncio.AbstractEventLoop) -> None:
        import dingtalk_stream
        from dingtalk_stream import AckMessage, ChatbotHandler, ChatbotMessage, Credential

        main, receiver = self._main, self._receiver

        class Handler(ChatbotHandler):  # type: ignore[misc]
            async def process(self, callback: Any) -> tuple[int, str]:
                record = robot_message(callback.data)
                if record is not None:
                    main.submit(receiver(record), what="dingtalk: a message")
                return AckMessage.STATUS_OK, "OK"

        connected = asyncio.Event()

        class Client(dingtalk_stream.DingTalkStreamClient):  # type: ignore[misc]
            def get_host_ip(self) -> str:
                return ""

            async def keepalive(self, ws: Any, ping_interval: int = 60) -> None:
                # started by start() right after it connects: the connection is up
                connected.set()
                await super().keepalive(ws, ping_interval)

        Client.OPEN_CONNECTION_API = self._base + "/v1.0/gateway/connections/open"
        dingtalk_stream.DingTalkStreamClient.OPEN_CONNECTION_API = Client.OPEN_CONNECTION_API
        client = self._client = Client(Credential(self._id, self._secret), logger=log)
        client.register_callback_handler(ChatbotMessage.TOPIC, Handler())
        # what start() would find: refuse bad credentials at once instead of its retry loop
        if await asyncio.to_thread(client.open_connection) is None:
            raise ConfigError(
                "DingTalk did not open the stream: check dingtalk.client_id, "
                "DIGEST_BOT_DINGTALK__CLIENT_SECRET and that the robot uses Stream mode",
                key="dingtalk.client_id",
            )
        loop.create_task(client.start())
        async with asyncio.timeout(CONNECT_SECONDS):
            await connected.wait()

    async def _teardown(self) -> None:
        client = self._client
        if client is not None and client.websocket is not None:
            await client.websocket.close()


def _import_sdk() -> None:
    import dingtalk_stream  # noqa: F401  (what the callback's records are read with)


class CallbackServer(callback.CallbackServer):
    """The robot's HTTP callback: ``path`` takes the POSTs, checked for their signature."""

    platform = "dingtalk"

    def __init__(
        self, *, listen: tuple[str, int], path: str, client_secret: str, receiver: Receiver
    ) -> None:
        super().__init__(listen=listen, path=path)
        self._secret = client_secret
        self._receiver = receiver
        self._tasks: set[asyncio.Task[None]] = set()

    async def _prepare(self) -> None:
        """Import the SDK's message model (in a thread)."""
        await asyncio.to_thread(_import_sdk)

    async def _serve(self, request: web.Request) -> web.Response:
        timestamp = request.headers.get("timestamp", "")
        sign = request.headers.get("sign", "")
        if not signed(self._secret, timestamp, sign, now=time.time()):
            log.warning("dingtalk: a callback with a wrong or stale signature was refused")
            return web.json_response({"msg": "refused"}, status=403)
        try:
            data = json.loads(await request.read())
        except ValueError:
            return web.json_response({"msg": "not JSON"}, status=400)
        record = robot_message(data) if isinstance(data, dict) else None
        if record is not None:
            task = asyncio.get_running_loop().create_task(self._receiver(record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return web.json_response({})
