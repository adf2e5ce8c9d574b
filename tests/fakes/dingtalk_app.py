"""Loopback double of a DingTalk app robot's side of DingTalk (aiohttp on 127.0.0.1).

Written from DingTalk's published documentation; dingtalk-stream's own client checks it
(tests/bots/dingtalk/test_app.py):

- **Stream mode** (https://open.dingtalk.com/document/direction/stream-mode-protocol-access-
  description): ``POST /v1.0/gateway/connections/open`` with ``{clientId, clientSecret,
  subscriptions: [{type, topic}], ua, localIp}`` answers ``{endpoint, ticket}``; the client
  opens ``endpoint?ticket=…`` (a ticket is good once). Frames are JSON text: ``{specVersion,
  type: SYSTEM|EVENT|CALLBACK, headers: {appId, connectionId, contentType, messageId, time,
  topic}, data: <a JSON string>}``; the client acks each with ``{code, headers: {messageId,
  contentType}, message, data}``; a robot message (topic ``/v1.0/im/bot/messages/get``) not
  acked is pushed again; a SYSTEM ``ping`` must be acked; SYSTEM ``disconnect`` asks the
  client to reconnect.
- **HTTP callback** (https://open.dingtalk.com/document/orgapp/receive-message): the robot's
  message POSTed with headers ``timestamp`` (ms) and ``sign`` = base64(HMAC-SHA256(key = app
  secret, message = timestamp + "\\n" + app secret)); a timestamp more than an hour off is
  not to be trusted.
- **Sending** (https://open.dingtalk.com/document/orgapp/the-robot-sends-a-group-message,
  …/chatbots-send-one-on-one-chat-messages-in-batches): ``POST /v1.0/oauth2/accessToken``
  (``expireIn`` 7200), then with ``x-acs-dingtalk-access-token``: ``POST
  /v1.0/robot/groupMessages/send`` ``{robotCode, openConversationId, msgKey, msgParam}`` and
  ``POST /v1.0/robot/oToMessages/batchSend`` ``{robotCode, userIds (≤ 20), msgKey,
  msgParam}`` (users over their limit come back in ``flowControlledStaffIdList``, unknown
  ones in ``invalidStaffIdList``). msgKeys: ``sampleText``, ``sampleMarkdown`` ({title,
  text}), ``sampleActionCard`` ({title, text, singleTitle, singleURL}), ``sampleActionCard2``…``5``
  ({title, text, actionTitleN, actionURLN}). Errors are
  HTTP 400/401/403 with ``{code, message}`` (``InvalidAuthentication``,
  ``invalidParameter.*``, ``Forbidden.AccessDenied.*``), 429 ``Throttling``. Limits (ours, as
  for custom robots; not verified for app robots): 20 messages a minute to one conversation
  or user, markdown text 5,000 characters.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import aiohttp
from aiohttp import web

Json = dict[str, Any]

OPEN = "/v1.0/gateway/connections/open"
TOKEN = "/v1.0/oauth2/accessToken"
GROUP_SEND = "/v1.0/robot/groupMessages/send"
OTO_SEND = "/v1.0/robot/oToMessages/batchSend"
BOT_TOPIC = "/v1.0/im/bot/messages/get"
ACK_SECONDS = 3.0
PER_MINUTE = 20
TEXT_LIMIT = 5_000
MSG_KEYS = {
    "sampleText": ("content",),
    "sampleMarkdown": ("title", "text"),
    "sampleActionCard": ("title", "text", "singleTitle", "singleURL"),
    **{
        f"sampleActionCard{n}": ("title", "text", *(f"action{k}{i}" for i in range(1, n + 1)
                                                    for k in ("Title", "URL")))
        for n in range(2, 6)
    },
}  # fmt: skip


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}")
        self.status, self.code, self.message = status, code, message


@dataclass
class Conversation:
    """A group (``cid…``, the robot in it or not) or a user (a staff id) the robot may write to."""

    id: str
    kind: str  # "group" or "user"
    reachable: bool = True
    #: accepted messages: {"msgKey", "msgParam" (parsed)}
    sent: list[Json] = field(default_factory=list)
    window: deque[float] = field(default_factory=deque)


@dataclass
class Push:
    """One frame pushed to the client and its acks."""

    frame: Json
    acks: list[Json] = field(default_factory=list)
    pushes: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class FakeDingTalkApp:
    """``async with FakeDingTalkApp() as dt:``; point the SDK at ``dt.url``."""

    def __init__(
        self,
        *,
        client_id: str = "dingdigesttest",
        client_secret: str = "dingtalk-secret-for-tests",
        rate_limits: bool = True,
        latency: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_id, self.client_secret = client_id, client_secret
        self.robot_code = client_id
        self.rate_limits, self.latency, self.clock = rate_limits, latency, clock
        self.conversations: dict[str, Conversation] = {}
        self.tickets: set[str] = set()
        self.tokens: dict[str, float] = {}
        self.subscriptions: list[Json] = []
        self.connections: list[web.WebSocketResponse] = []
        self.connected = asyncio.Event()
        self.pushes: dict[str, Push] = {}
        self.unanswered = 0
        #: sends that took effect and whose answer is still held back (``latency``)
        self.held = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        #: the endpoint the gateway hands out (None: this double's own)
        self.endpoint_base: str | None = None

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post(OPEN, self._open)
        app.router.add_get("/connect", self._ws)
        app.router.add_post(TOKEN, self._token)
        app.router.add_post(GROUP_SEND, self._group_send)
        app.router.add_post(OTO_SEND, self._oto_send)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
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

    def add(self, conversation_id: str, kind: str, *, reachable: bool = True) -> Conversation:
        conv = Conversation(conversation_id, kind, reachable)
        self.conversations[conversation_id] = conv
        return conv

    def sent(self, conversation_id: str) -> list[Json]:
        return list(self.conversations[conversation_id].sent)

    async def wait_connected(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            await self.connected.wait()

    async def wait_until_answered(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout):
            await self._idle.wait()

    async def wait_for_messages(
        self,
        conversation_id: str,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[Json]:
        async with asyncio.timeout(timeout):
            while len(self.conversations[conversation_id].sent) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.sent(conversation_id)

    # ---------------------------------------------------------------- messages to the robot

    def robot_message(self, sender: str, text: str, *, group: str | None = None) -> Json:
        """What the robot receives when ``sender`` (a staff id) writes ``text`` to it
        privately, or @-mentions it in ``group``."""
        now = int(time.time() * 1000)
        conversation = group or f"cid_private_{sender}"
        return {
            "conversationId": conversation, "chatbotCorpId": "ding-corp",
            "chatbotUserId": "$:LWCP_v1:$robot", "msgId": f"msg{os.urandom(8).hex()}",
            "senderNick": "reader", "isAdmin": False, "senderStaffId": sender,
            "sessionWebhookExpiredTime": now + 3_600_000, "createAt": now,
            "senderCorpId": "ding-corp", "conversationType": "2" if group else "1",
            "senderId": f"$:LWCP_v1:${sender}", "robotCode": self.robot_code,
            "sessionWebhook": f"{self.url}/robot/sendBySession?session=x",
            "text": {"content": f" {text}" if group else text}, "msgtype": "text",
            "isInAtList": bool(group),
        }  # fmt: skip

    async def push(self, data: Json, *, topic: str = BOT_TOPIC, kind: str = "CALLBACK") -> Push:
        """Push ``data`` to a connected client; again every 3 s while not acked (3 times)."""
        if not self.connections:
            raise RuntimeError("no stream connection is open")
        message_id = os.urandom(8).hex()
        frame = {
            "specVersion": "1.0", "type": kind,
            "headers": {"appId": self.client_id, "connectionId": "conn-1",
                        "contentType": "application/json", "messageId": message_id,
                        "time": str(int(time.time() * 1000)), "topic": topic},
            "data": json.dumps(data, ensure_ascii=False),
        }  # fmt: skip
        push = self.pushes[message_id] = Push(frame)
        for _ in range(3):
            push.pushes += 1
            await self.connections[-1].send_str(json.dumps(frame, ensure_ascii=False))
            try:
                async with asyncio.timeout(ACK_SECONDS):
                    await push.done.wait()
                return push
            except TimeoutError:
                continue
        return push

    def sign(self, timestamp: str) -> str:
        key = self.client_secret.encode()
        digest = hmac.new(key, f"{timestamp}\n{self.client_secret}".encode(), hashlib.sha256)
        return base64.b64encode(digest.digest()).decode()

    async def post_callback(
        self, session: aiohttp.ClientSession, url: str, data: Json, *, sign: str | None = None
    ) -> int:
        """POST a robot message to an HTTP callback as DingTalk does; the status."""
        timestamp = str(int(time.time() * 1000))
        headers = {"timestamp": timestamp, "sign": sign or self.sign(timestamp)}
        async with session.post(url, json=data, headers=headers, timeout=3) as resp:
            return resp.status

    # ---------------------------------------------------------------- stream

    async def _open(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("clientId") != self.client_id or body.get("clientSecret") != self.client_secret:
            return web.json_response(
                {"code": "InvalidAuthentication", "message": "clientId or clientSecret invalid"},
                status=401,
            )
        self.subscriptions = list(body.get("subscriptions") or [])
        ticket = os.urandom(12).hex()
        self.tickets.add(ticket)
        base = self.endpoint_base or f"ws://127.0.0.1:{self.port}"
        return web.json_response({"endpoint": f"{base}/connect",
                                  "ticket": ticket})  # fmt: skip

    async def _ws(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self.tickets:
            raise web.HTTPUnauthorized()
        self.tickets.discard(ticket)  # good once
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections.append(ws)
        self.connected.set()
        try:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    self._ack(json.loads(msg.data))
        finally:
            self.connections.remove(ws)
            if not self.connections:
                self.connected.clear()
        return ws

    def _ack(self, ack: Json) -> None:
        push = self.pushes.get(str((ack.get("headers") or {}).get("messageId")))
        if push is None:
            return
        push.acks.append(ack)
        if ack.get("code") == 200:
            push.done.set()

    # ---------------------------------------------------------------- sending

    async def _token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("appKey") != self.client_id or body.get("appSecret") != self.client_secret:
            return web.json_response(
                {"code": "invalidClientIdOrSecret", "message": "无效的clientId或者clientSecret"},
                status=400,
            )
        token = os.urandom(16).hex()
        self.tokens[token] = self.clock() + 7200
        return web.json_response({"accessToken": token, "expireIn": 7200})

    async def _serve(self, request: web.Request, oto: bool) -> web.Response:
        self.unanswered += 1
        self._idle.clear()
        try:
            answer = self._accept(request, await request.json(), oto)
            if self.latency:
                self.held += 1
                try:
                    await asyncio.sleep(self.latency)
                finally:
                    self.held -= 1
            return web.json_response(answer)
        except Refused as r:
            return web.json_response({"code": r.code, "message": r.message}, status=r.status)
        finally:
            self.unanswered -= 1
            if not self.unanswered:
                self._idle.set()

    async def _group_send(self, request: web.Request) -> web.Response:
        return await self._serve(request, oto=False)

    async def _oto_send(self, request: web.Request) -> web.Response:
        return await self._serve(request, oto=True)

    def _accept(self, request: web.Request, body: Json, oto: bool) -> Json:
        token = request.headers.get("x-acs-dingtalk-access-token", "")
        if self.tokens.get(token, 0) < self.clock():
            raise Refused(401, "InvalidAuthentication", "不合法的access_token")
        if body.get("robotCode") != self.robot_code:
            raise Refused(400, "invalidParameter.robotCode", "robotCode不合法")
        key, raw = body.get("msgKey"), body.get("msgParam")
        if key not in MSG_KEYS or not isinstance(raw, str):
            raise Refused(400, "invalidParameter.msgKey", "msgKey或msgParam不合法")
        param = json.loads(raw)
        if not isinstance(param, dict) or set(param) != set(MSG_KEYS[key]):
            raise Refused(400, "invalidParameter.msgParam", "msgParam与msgKey不匹配")
        if len(str(param.get("text", param.get("content", "")))) > TEXT_LIMIT:
            raise Refused(400, "invalidParameter.msgParam.length", "消息内容超长")
        now = self.clock()
        if oto:
            users = body.get("userIds")
            if not isinstance(users, list) or not 1 <= len(users) <= 20:
                raise Refused(400, "invalidParameter.userIds", "userIds 不合法")
            invalid, limited = [], []
            for user in users:
                conv = self.conversations.get(user)
                if conv is None or conv.kind != "user" or not conv.reachable:
                    invalid.append(user)
                elif not self._within(conv, now):
                    limited.append(user)
                else:
                    self._record(conv, key, param, now)
            return {"processQueryKey": os.urandom(8).hex(), "invalidStaffIdList": invalid,
                    "flowControlledStaffIdList": limited}  # fmt: skip
        conv = self.conversations.get(str(body.get("openConversationId")))
        if conv is None or conv.kind != "group":
            raise Refused(400, "invalidParameter.openConversationId", "群不存在")
        if not conv.reachable:
            raise Refused(403, "Forbidden.AccessDenied.RobotNotInGroup", "机器人不在群内")
        if not self._within(conv, now):
            raise Refused(429, "Throttling", "发送过于频繁")
        self._record(conv, key, param, now)
        return {"processQueryKey": os.urandom(8).hex()}

    def _within(self, conv: Conversation, now: float) -> bool:
        if not self.rate_limits:
            return True
        while conv.window and conv.window[0] <= now - 60:
            conv.window.popleft()
        return len(conv.window) < PER_MINUTE

    def _record(self, conv: Conversation, key: str, param: Json, now: float) -> None:
        conv.window.append(now)
        conv.sent.append({"msgKey": key, "msgParam": param})
        self._changed.set()
