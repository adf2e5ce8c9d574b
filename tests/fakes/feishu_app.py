"""Loopback double of a Feishu/Lark app bot's side of Feishu (aiohttp on 127.0.0.1).

Written from Feishu's published documentation; the SDK's own clients check it
(tests/fakes/test_feishu_app.py):

- **Long connection** (https://open.feishu.cn/document/server-docs/event-subscription-guide/
  event-subscription-configure-/request-url-configuration-case, the SDK guide's 长连接):
  ``POST /callback/ws/endpoint`` with ``{"AppID", "AppSecret"}`` answers the WebSocket URL
  (``device_id`` and ``service_id`` in its query) and the client's config (ping interval,
  reconnect policy); the WebSocket carries protocol-buffer frames
  (:mod:`tests.fakes.lark_frames`): the client pings, the double pongs; each event is a data
  frame (split in ``sum`` parts when large) that the client must answer ("ack") within 3 s —
  "长连接模式下接收到消息后，需要在 3 秒内处理完成" — or it is pushed again; a card press
  (``card.action.trigger``) is answered by the ack's data (a toast). Events go to one of the
  app's connections at random ("集群模式，不支持广播"); at most 50 connections per app.
- **HTTP callback** (https://open.feishu.cn/document/server-docs/event-subscription-guide/
  event-subscription-configure-/request-url-configuration-case): the double POSTs events to a
  URL: ``{"encrypt": base64(IV + AES-256-CBC(key = SHA-256(encrypt key), PKCS#7))}``, with
  ``X-Lark-Request-Timestamp``, ``X-Lark-Request-Nonce`` and ``X-Lark-Signature`` =
  hex(SHA-256(timestamp + nonce + encrypt key + body)); ``url_verification`` expects
  ``{"challenge": …}`` back within 1 s (3 s here); every event carries the verification token.
- **Sending** (https://open.feishu.cn/document/server-docs/im-v1/message/create):
  ``POST /open-apis/auth/v3/tenant_access_token/internal`` (``expire`` 7200 s), then
  ``POST /open-apis/im/v1/messages?receive_id_type=chat_id|open_id`` with ``Authorization:
  Bearer <tenant token>`` and ``{receive_id, msg_type, content (a JSON string), uuid}``;
  "向同一用户发送消息的限频为 5 QPS、向同一群组发送消息的限频为群内机器人共享 5 QPS", the API 1000
  a minute and 50 a second (HTTP 429, code 99991400, ``x-ogw-ratelimit-reset``; api-call-guide/
  frequency-control); a ``uuid`` sent again within an hour creates nothing more
  ("持有相同uuid的请求1小时内至多成功发送一条消息"). Body limits, from the error table the
  im-v1 message pages share (230025, as published on https://open.larksuite.com/document/
  uAjLw4CM/ukTMukTMukTM/reference/im-v1/message/update): "The maximum size of the text message
  body is 150 KB and the maximum size of the card and rich text message body is 30 KB", the
  request body measured (read as 150,000 and 30,000 bytes: the stricter reading of "KB").
  Error codes and their texts from the same table: 230001 bad parameter ("…, ext=invalid
  receive_id." per the 230001 troubleshooting page), 230002 bot not in the group, 230013 user
  outside the app's availability, 230020 per-chat frequency, 230025 content too long; 230099
  (a card Feishu cannot build) is in no table, its text from real answers ("Failed to create
  card content, ext=…", github.com/sipeed/picoclaw/issues/1727); 99991663 a token Feishu does
  not take.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import aiohttp
from aiohttp import web
from Crypto.Cipher import AES

from tests.fakes import lark_frames as frames

Json = dict[str, Any]

ENDPOINT = "/callback/ws/endpoint"
TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
MESSAGES = "/open-apis/im/v1/messages"
BOT_INFO = "/open-apis/bot/v3/info"
TOKEN_SECONDS = 7200
ACK_SECONDS = 3.0
MAX_CONNECTIONS = 50
#: the endpoint's codes as lark-oapi 1.7.5 names them (lark_oapi/ws/const.py)
AUTH_FAILED = 514
EXCEED_CONN_LIMIT = 1000040350
TEXT_LIMIT = 150_000
CARD_LIMIT = 30_000
#: (count, seconds) windows of the send API for the whole app
APP_WINDOWS = ((50, 1.0), (1000, 60.0))
#: sends per second to one chat or user
CHAT_PER_SECOND = 5
MSG_TYPES = frozenset(
    {"text", "post", "image", "file", "audio", "media", "sticker", "interactive", "share_chat",
     "share_user", "system"}
)  # fmt: skip
#: our reading of a card's limit on elements (not a documented figure)
MAX_CARD_ELEMENTS = 50


class Refused(Exception):
    def __init__(self, code: int, msg: str, *, status: int = 400, reset: int | None = None):
        super().__init__(f"{code} {msg}")
        self.code, self.msg, self.status, self.reset = code, msg, status, reset


@dataclass
class Chat:
    """A chat the app's bot may post to: a group (``oc_…``) or a user's (``ou_…``, p2p)."""

    id: str
    kind: str  # "group" or "p2p"
    #: the bot is a member (groups) or the user is within the app's availability (p2p)
    reachable: bool = True
    #: accepted messages, in order: {"message_id", "msg_type", "content" (parsed), "uuid"}
    sent: list[Json] = field(default_factory=list)
    window: deque[float] = field(default_factory=deque)


@dataclass
class Delivery:
    """One event pushed over the long connection and what came of it."""

    event: Json
    message_id: str
    #: the decoded ack payloads ({"code", "data", …}) the client sent back
    acks: list[Json] = field(default_factory=list)
    pushes: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def answer(self) -> Json | None:
        """The handler's answer carried by the last ack (a card press's toast), if any."""
        if not self.acks or not self.acks[-1].get("data"):
            return None
        data: Json = json.loads(base64.b64decode(self.acks[-1]["data"]))
        return data


class FakeFeishuApp:
    """The double: ``async with FakeFeishuApp() as fs:``, then point the SDK and the adapter
    at ``fs.url``. One app (``app_id``/``app_secret``), its bot ``bot_open_id``."""

    def __init__(
        self,
        *,
        app_id: str = "cli_digest_test",
        app_secret: str = "app-secret-for-tests",
        verification_token: str = "verification-token",
        encrypt_key: str = "encrypt-key-for-tests",
        bot_open_id: str = "ou_bot000000000000000000000000000",
        ping_interval: int = 120,
        reconnect_interval: int = 1,
        rate_limits: bool = True,
        latency: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``latency``: seconds each send is answered late, after it took effect."""
        self.app_id, self.app_secret = app_id, app_secret
        self.verification_token, self.encrypt_key = verification_token, encrypt_key
        self.bot_open_id = bot_open_id
        self.ping_interval, self.reconnect_interval = ping_interval, reconnect_interval
        self.rate_limits, self.latency, self.clock = rate_limits, latency, clock
        self.chats: dict[str, Chat] = {}
        self.tokens: dict[str, float] = {}
        self.connections: list[web.WebSocketResponse] = []
        self.connected = asyncio.Event()
        self.deliveries: dict[str, Delivery] = {}
        self.pings = 0
        self._pinged = asyncio.Event()
        self._changed = asyncio.Event()
        #: (path, code) of every answer of the send API
        self.answers: list[tuple[str, int]] = []
        self.unanswered = 0
        #: sends that took effect and whose answer is still held back (``latency``): a
        #: client killed now never learns of them
        self.held = 0
        #: sends whose ``uuid`` Feishu already had (within the hour): {"uuid", "chat_id",
        #: "message_id"} of the message sent before, which they got back instead of a new one
        self.replays: list[Json] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._app_window: deque[float] = deque()
        self._uuids: dict[str, tuple[float, Json]] = {}
        self._seq = 0
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.fail_sends: list[tuple[str, int]] = []  # (kind, count) faults, see fail_next
        #: the app's state, as ``bot/v3/info`` reports it: its bot ability on, and the app's
        #: ``activate_status`` (2: enabled in the tenant)
        self.bot_ability = True
        self.activate_status = 2
        #: connections the endpoint allows before EXCEED_CONN_LIMIT (Feishu: 50)
        self.max_connections = MAX_CONNECTIONS
        #: the long connection's address the endpoint hands out (None: this double's own)
        self.ws_base: str | None = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post(ENDPOINT, self._endpoint)
        app.router.add_get("/ws", self._ws)
        app.router.add_post(TOKEN_PATH, self._token)
        app.router.add_post(MESSAGES, self._send)
        app.router.add_get(BOT_INFO, self._bot_info)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for ws in list(self.connections):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---------------------------------------------------------------- control

    def add_chat(self, chat_id: str, kind: str = "group", *, reachable: bool = True) -> Chat:
        chat = Chat(chat_id, kind, reachable)
        self.chats[chat_id] = chat
        return chat

    def sent(self, chat_id: str) -> list[Json]:
        return list(self.chats[chat_id].sent)

    def fail_next(self, kind: str, count: int = 1) -> None:
        """The next ``count`` sends fail as ``kind``: ``server_error`` (HTTP 500),
        ``rate_limited`` (429, 99991400, reset 1 s), ``internal`` (230001 "Internal Error") or
        ``token`` (99991663)."""
        self.fail_sends.append((kind, count))

    async def wait_connected(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            await self.connected.wait()

    async def wait_until_answered(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            await self._idle.wait()

    async def wait_for_messages(
        self,
        chat_id: str,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[Json]:
        """Wait until ``chat_id`` holds at least ``count`` messages; all of them."""
        async with asyncio.timeout(timeout):
            while len(self.chats[chat_id].sent) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.sent(chat_id)

    async def wait_pinged(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            await self._pinged.wait()

    # ---------------------------------------------------------------- events

    def message_event(
        self, chat_id: str, sender: str, text: str, *, mention_bot: bool = False
    ) -> Json:
        """An ``im.message.receive_v1`` event: ``sender`` (an open_id) wrote ``text`` in
        ``chat_id`` (a p2p chat: its id is the sender's open_id here, as the bot sees it)."""
        chat = self.chats[chat_id]
        mentions = []
        if mention_bot:
            text = "@_user_1 " + text
            mentions.append(
                {"key": "@_user_1", "id": {"open_id": self.bot_open_id, "union_id": "on_bot",
                 "user_id": ""}, "name": "AI 技术日报", "tenant_key": "tenant"}
            )  # fmt: skip
        message = {
            "message_id": f"om_{os.urandom(8).hex()}",
            "root_id": "", "parent_id": "", "create_time": str(int(time.time() * 1000)),
            "update_time": str(int(time.time() * 1000)),
            "chat_id": f"oc_p2p_{sender}" if chat.kind == "p2p" else chat_id,
            "chat_type": chat.kind, "message_type": "text",
            "content": json.dumps({"text": text}, ensure_ascii=False),
            "mentions": mentions,
        }  # fmt: skip
        sender_ids = {"open_id": sender, "union_id": f"on_{sender[3:]}", "user_id": ""}
        event = {"sender": {"sender_id": sender_ids, "sender_type": "user",
                            "tenant_key": "tenant"}, "message": message}  # fmt: skip
        return self._envelope("im.message.receive_v1", event)

    def card_event(self, operator: str, value: Json, *, chat_id: str, message_id: str) -> Json:
        """A ``card.action.trigger`` callback: ``operator`` pressed a button whose ``value``
        (an object) is given, on ``message_id`` in ``chat_id``."""
        event = {
            "operator": {"tenant_key": "tenant", "user_id": "", "open_id": operator,
                         "union_id": f"on_{operator[3:]}"},
            "token": f"c-{os.urandom(8).hex()}",
            "action": {"value": value, "tag": "button"},
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        }  # fmt: skip
        return self._envelope("card.action.trigger", event)

    def menu_event(self, operator: str, event_key: str) -> Json:
        """An ``application.bot.menu_v6`` event: ``operator`` chose a bot-menu item."""
        if not 1 <= len(event_key) <= 30:
            raise ValueError("a menu item's event_key is 1-30 characters")
        event = {
            "operator": {"operator_name": "reader", "operator_id": {
                "union_id": f"on_{operator[3:]}", "user_id": "", "open_id": operator}},
            "event_key": event_key, "timestamp": str(int(time.time())),
        }  # fmt: skip
        return self._envelope("application.bot.menu_v6", event)

    def _envelope(self, event_type: str, event: Json) -> Json:
        header = {
            "event_id": os.urandom(16).hex(), "event_type": event_type,
            "create_time": str(int(time.time() * 1000)), "token": self.verification_token,
            "app_id": self.app_id, "tenant_key": "tenant",
        }  # fmt: skip
        return {"schema": "2.0", "header": header, "event": event}

    async def push(self, event: Json, *, parts: int = 1) -> Delivery:
        """Push ``event`` over one of the app's connections (at random), in ``parts`` frames,
        and push it again every 3 s while it is not acked (at most 3 times)."""
        if not self.connections:
            raise RuntimeError("no long connection is open")
        delivery = Delivery(event, message_id=os.urandom(8).hex())
        self.deliveries[delivery.message_id] = delivery
        payload = json.dumps(event, ensure_ascii=False).encode()
        for _ in range(3):
            ws = random.choice(self.connections)
            await self._push_once(ws, delivery, payload, parts)
            try:
                async with asyncio.timeout(ACK_SECONDS):
                    await delivery.done.wait()
                return delivery
            except TimeoutError:
                continue
        return delivery

    async def _push_once(
        self, ws: web.WebSocketResponse, d: Delivery, payload: bytes, parts: int
    ) -> None:
        d.pushes += 1
        size = -(-len(payload) // parts)
        chunks = [payload[i : i + size] for i in range(0, len(payload), size)] or [b""]
        trace = os.urandom(8).hex()
        for seq, chunk in enumerate(chunks):
            self._seq += 1
            frame = frames.Frame(
                seq_id=self._seq, log_id=self._seq, service=1, method=frames.DATA,
                headers=[("type", "event"), ("message_id", d.message_id), ("sum", str(len(chunks))),
                         ("seq", str(seq)), ("trace_id", trace)],
                payload=chunk,
            )  # fmt: skip
            await ws.send_bytes(frames.encode(frame))

    async def post_callback(
        self,
        session: aiohttp.ClientSession,
        url: str,
        event: Json,
        *,
        encrypt: bool = True,
        sign: str | None = None,
    ) -> tuple[int, Json]:
        """POST ``event`` to an HTTP callback as Feishu does (encrypted and signed, see the
        module doc; ``sign`` overrides the signature); the status and the JSON answer."""
        raw = json.dumps(event, ensure_ascii=False).encode()
        body = json.dumps({"encrypt": self.encrypt(raw)}).encode() if encrypt else raw
        timestamp, nonce = str(int(time.time())), os.urandom(8).hex()
        signature = sign or self.signature(timestamp, nonce, body)
        headers = {
            "Content-Type": "application/json",
            "X-Lark-Request-Timestamp": timestamp,
            "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": signature,
        }
        async with session.post(url, data=body, headers=headers, timeout=3) as resp:
            text = await resp.text()
            return resp.status, (json.loads(text) if text else {})

    def verification_event(self, challenge: str = "challenge-1234") -> Json:
        return {"challenge": challenge, "token": self.verification_token,
                "type": "url_verification"}  # fmt: skip

    def encrypt(self, plaintext: bytes) -> str:
        key = hashlib.sha256(self.encrypt_key.encode()).digest()
        iv = os.urandom(16)
        pad = 16 - len(plaintext) % 16
        data = plaintext + bytes([pad]) * pad
        return base64.b64encode(iv + AES.new(key, AES.MODE_CBC, iv).encrypt(data)).decode()

    def signature(self, timestamp: str, nonce: str, body: bytes) -> str:
        return hashlib.sha256((timestamp + nonce + self.encrypt_key).encode() + body).hexdigest()

    # ---------------------------------------------------------------- long connection

    async def _endpoint(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            # the code the SDK names AUTH_FAILED (lark_oapi/ws/const.py; its client raises
            # ClientException for it); the service's own answer is on no page we found
            return web.json_response({"code": AUTH_FAILED, "msg": "auth failed"})
        if len(self.connections) >= self.max_connections:
            return web.json_response({"code": EXCEED_CONN_LIMIT, "msg": "exceed connection limit"})
        device = os.urandom(8).hex()
        base = self.ws_base or f"ws://127.0.0.1:{self.port}"
        url = f"{base}/ws?device_id={device}&service_id=1"
        config = {"ReconnectCount": -1, "ReconnectInterval": self.reconnect_interval,
                  "ReconnectNonce": 0, "PingInterval": self.ping_interval}  # fmt: skip
        return web.json_response(
            {"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": config}}
        )

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        if "device_id" not in request.query or "service_id" not in request.query:
            raise web.HTTPForbidden()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections.append(ws)
        self.connected.set()
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.BINARY:
                    await ws.close(code=1003, message=b"binary frames only")
                    break
                await self._client_frame(ws, frames.decode(msg.data))
        finally:
            self.connections.remove(ws)
            if not self.connections:
                self.connected.clear()
        return ws

    async def _client_frame(self, ws: web.WebSocketResponse, frame: frames.Frame) -> None:
        kind = frame.header("type")
        if frame.method == frames.CONTROL and kind == "ping":
            self.pings += 1
            self._pinged.set()
            config = {"ReconnectCount": -1, "ReconnectInterval": self.reconnect_interval,
                      "ReconnectNonce": 0, "PingInterval": self.ping_interval}  # fmt: skip
            pong = frames.Frame(
                service=frame.service, method=frames.CONTROL, headers=[("type", "pong")],
                payload=json.dumps(config).encode(),
            )  # fmt: skip
            await ws.send_bytes(frames.encode(pong))
        elif frame.method == frames.DATA:
            delivery = self.deliveries.get(frame.header("message_id") or "")
            if delivery is None or frame.payload is None:
                return
            delivery.acks.append(json.loads(frame.payload))
            if delivery.acks[-1].get("code") == 200:
                delivery.done.set()

    # ---------------------------------------------------------------- sending

    async def _token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("app_id") != self.app_id:
            return web.json_response({"code": 10003, "msg": "invalid param"})
        if body.get("app_secret") != self.app_secret:
            return web.json_response({"code": 10014, "msg": "app secret invalid"})
        token = f"t-{os.urandom(12).hex()}"
        self.tokens[token] = self.clock() + TOKEN_SECONDS
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": TOKEN_SECONDS}
        )

    def _authorised(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ")
        return auth.startswith("Bearer ") and self.tokens.get(token, 0) >= self.clock()

    async def _bot_info(self, request: web.Request) -> web.Response:
        """https://open.larkoffice.com/document/ukTMukTMukTM/uAjMxEjLwITMx4CMyETM.md: the bot's
        ``activate_status`` and open_id; "需要启用机器人能力" (what it answers without the
        ability is not documented: 230006, as the send API, is our assumption)."""
        if not self._authorised(request):
            return web.json_response(
                {"code": 99991663, "msg": "Invalid access token for authorization"}, status=400
            )
        if not self.bot_ability:
            return web.json_response(
                {"code": 230006, "msg": "Bot ability is not activated."}, status=400
            )
        bot = {"activate_status": self.activate_status, "app_name": "AI 技术日报", "avatar_url": "",
               "ip_white_list": [], "open_id": self.bot_open_id}  # fmt: skip
        return web.json_response({"code": 0, "msg": "ok", "bot": bot})

    async def _send(self, request: web.Request) -> web.Response:
        self.unanswered += 1
        self._idle.clear()
        try:
            answer = self._accept(request, await request.read())
            if self.latency:
                self.held += 1
                try:
                    await asyncio.sleep(self.latency)
                finally:
                    self.held -= 1
            return web.json_response({"code": 0, "msg": "success", "data": answer})
        except Refused as r:
            self.answers.append((request.path, r.code))
            headers = {"x-ogw-ratelimit-reset": str(r.reset)} if r.reset is not None else None
            return web.json_response({"code": r.code, "msg": r.msg}, status=r.status,
                                     headers=headers)  # fmt: skip
        finally:
            self.unanswered -= 1
            if not self.unanswered:
                self._idle.set()

    def _accept(self, request: web.Request, raw: bytes) -> Json:
        self._fault()
        if not self._authorised(request):
            raise Refused(99991663, "Invalid access token for authorization", status=400)
        id_type = request.query.get("receive_id_type")
        if id_type not in ("chat_id", "open_id", "user_id", "union_id", "email"):
            raise Refused(230001, "invalid receive_id_type")
        body = json.loads(raw)
        content, msg_type = body.get("content"), body.get("msg_type")
        if msg_type not in MSG_TYPES or not isinstance(content, str):
            raise Refused(230001, "invalid msg_type or content")
        limit = TEXT_LIMIT if msg_type == "text" else CARD_LIMIT
        if len(raw) > limit:
            raise Refused(230025, "The length of the message content reaches its limit.")
        uuid = body.get("uuid")
        if uuid is not None and (not isinstance(uuid, str) or len(uuid) > 50):
            raise Refused(230001, "invalid uuid")
        now = self.clock()
        if uuid and uuid in self._uuids and now - self._uuids[uuid][0] < 3600:
            self.answers.append((request.path, 0))
            before = self._uuids[uuid][1]  # the message sent before: nothing new is created
            self.replays.append(
                {"uuid": uuid, "chat_id": before["chat_id"], "message_id": before["message_id"]}
            )
            return before
        chat = self._chat(id_type, str(body.get("receive_id", "")))
        parsed = json.loads(content)
        if msg_type == "interactive":
            _check_card(parsed)
        self._check_rates(chat, now)
        sender = {"id": self.app_id, "id_type": "app_id", "sender_type": "app"}
        data = {
            "message_id": f"om_{os.urandom(12).hex()}",
            "chat_id": chat.id,
            "msg_type": msg_type,
            "create_time": str(int(time.time() * 1000)),
            "sender": sender,
        }
        self._changed.set()
        chat.sent.append({"message_id": data["message_id"], "msg_type": msg_type,
                          "content": parsed, "uuid": uuid})  # fmt: skip
        if uuid:
            self._uuids[uuid] = (now, data)
        self.answers.append((request.path, 0))
        return data

    def _chat(self, id_type: str, receive_id: str) -> Chat:
        chat = self.chats.get(receive_id)
        if chat is None or (id_type == "chat_id") != receive_id.startswith("oc_"):
            raise Refused(230001, "Your request contains an invalid request parameter, "
                          "ext=invalid receive_id.")  # fmt: skip
        if not chat.reachable:
            if chat.kind == "group":
                raise Refused(230002, "The bot can not be outside the group.")
            raise Refused(230013, "Bot has NO availability to this user.")
        return chat

    def _fault(self) -> None:
        if not self.fail_sends:
            return
        kind, count = self.fail_sends[0]
        self.fail_sends[0] = (kind, count - 1)
        if count <= 1:
            self.fail_sends.pop(0)
        if kind == "server_error":
            raise Refused(-1, "internal error", status=500)
        if kind == "rate_limited":
            raise Refused(99991400, "request trigger frequency limit", status=429, reset=1)
        if kind == "internal":  # the 230001 troubleshooting page's "Internal Error" row
            raise Refused(230001, "Internal Error")
        if kind == "token":
            self.tokens.clear()
            raise Refused(99991663, "Invalid access token for authorization")

    def _check_rates(self, chat: Chat, now: float) -> None:
        if not self.rate_limits:
            return
        window = self._app_window
        while window and window[0] <= now - 60:
            window.popleft()
        for count, seconds in APP_WINDOWS:
            if sum(1 for t in window if t > now - seconds) >= count:
                raise Refused(99991400, "request trigger frequency limit", status=429, reset=1)
        recent = chat.window
        while recent and recent[0] <= now - 1.0:
            recent.popleft()
        if len(recent) >= CHAT_PER_SECOND:
            raise Refused(230020, "This operation triggers the frequency limit.")
        window.append(now)
        recent.append(now)


def _check_card(card: Any) -> None:
    """What a card must be for Feishu to draw it (our strict reading): elements a list of
    known tags, texts strings, button values objects (the SDKs take only objects)."""
    bad = Refused(230099, "Failed to create card content")
    if not isinstance(card, dict) or not isinstance(card.get("elements"), list):
        raise bad
    if len(card["elements"]) > MAX_CARD_ELEMENTS:
        raise bad
    header = card.get("header")
    if header is not None and not isinstance(header.get("title", {}).get("content"), str):
        raise bad
    for element in card["elements"]:
        tag = element.get("tag") if isinstance(element, dict) else None
        if tag == "div":
            text = element.get("text", {})
            if text.get("tag") not in ("plain_text", "lark_md") or not isinstance(
                text.get("content"), str
            ):
                raise bad
        elif tag == "action":
            for button in element.get("actions", []):
                if button.get("tag") != "button" or not isinstance(
                    button.get("text", {}).get("content"), str
                ):
                    raise bad
                if "value" in button and not isinstance(button["value"], dict):
                    raise bad
        elif tag not in ("hr", "note", "markdown"):
            raise bad
