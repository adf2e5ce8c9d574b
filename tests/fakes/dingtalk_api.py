"""Loopback double of DingTalk custom-robot webhooks (aiohttp on 127.0.0.1).

As https://open.dingtalk.com/document/orgapp/custom-robot-access and
https://open.dingtalk.com/document/orgapp/customize-robot-security-settings describe: POST
``/robot/send?access_token=<token>``; with 加签, ``timestamp`` (milliseconds, within an hour)
and ``sign`` = URL-encoded base64(HMAC-SHA256(key = secret, message = timestamp + "\\n" +
secret)) in the query, else errcode 310000; ``markdown`` needs ``title`` and ``text``; 20
messages a minute per robot, then errcode 130101 for 10 minutes. The 20,000-byte body limit
(errcode 460101) and 300001 for an unknown token are as developers report them (not verified).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from typing import ClassVar

from aiohttp import web

from tests.fakes.workchat_base import FakeWebhookService, Json, Refused, Robot, serve_main

SEND = "/robot/send"
MSG_TYPES = frozenset({"text", "link", "markdown", "actionCard", "feedCard"})


class FakeDingTalk(FakeWebhookService):
    """DingTalk custom robots; see the module doc."""

    WINDOWS: ClassVar[tuple[tuple[int, float], ...]] = ((20, 60.0),)
    PENALTY: ClassVar[float] = 600.0
    FRESHNESS: ClassVar[float] = 3600.0
    BODY_LIMIT: ClassVar[int] = 20_000
    NAME: ClassVar[str] = "dingtalk"

    def routes(self, app: web.Application) -> None:
        app.router.add_post(SEND, self._send)

    async def _send(self, request: web.Request) -> web.Response:
        return await self.handle(request, request.query.get("access_token"))

    def answer(self, code: int, msg: str) -> Json:
        return {"errcode": code, "errmsg": msg}

    def codes(self) -> dict[str, tuple[int, str]]:
        return {
            "unknown": (300001, "token is not exist"),
            "rate": (130101, "send too fast, exceed 20 times per minute"),
            "busy": (-1, "系统繁忙"),
            "too_long": (460101, "message too long, exceed 20000 bytes"),
            "bad_json": (40035, "缺少参数 json"),
        }

    def check_signature(self, request: web.Request, body: Json, robot: Robot) -> None:
        if robot.secret is None:
            return
        timestamp, sign = request.query.get("timestamp"), request.query.get("sign")
        if timestamp is None or sign is None or not timestamp.isdigit():
            raise Refused(310000, "sign not match")
        if abs(self.clock() * 1000 - int(timestamp)) > self.FRESHNESS * 1000:
            raise Refused(310000, "invalid timestamp")
        digest = hmac.new(
            robot.secret.encode(), f"{timestamp}\n{robot.secret}".encode(), hashlib.sha256
        ).digest()
        # aiohttp has already URL-decoded the query once, as DingTalk does
        if not hmac.compare_digest(base64.b64encode(digest).decode(), sign):
            raise Refused(310000, "sign not match")

    def check_payload(self, body: Json) -> None:
        msgtype = body.get("msgtype")
        if msgtype not in MSG_TYPES:
            raise Refused(40035, "缺少参数 json")
        if msgtype == "markdown":
            md = body.get("markdown")
            if not isinstance(md, dict) or not md.get("title") or not md.get("text"):
                raise Refused(40035, "缺少参数 markdown")
            if not isinstance(md["title"], str) or not isinstance(md["text"], str):
                raise Refused(40035, "缺少参数 markdown")

    def pings(self, body: Json) -> list[str]:
        at = body.get("at") or {}
        found = ["isAtAll"] if at.get("isAtAll") else []
        found += [f"@{m}" for m in at.get("atMobiles", []) + at.get("atUserIds", [])]
        return found


def main(argv: Iterable[str] | None = None) -> None:
    serve_main(FakeDingTalk, argv, __doc__ or "")


if __name__ == "__main__":
    main()
