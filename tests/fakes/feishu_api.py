"""Loopback double of Feishu/Lark custom-bot webhooks (aiohttp on 127.0.0.1).

As https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot describes: POST
``/open-apis/bot/v2/hook/<token>``; with signing, ``timestamp`` (seconds, within an hour) and
``sign`` = base64(HMAC-SHA256(key = timestamp + "\\n" + secret, message = "")) in the body,
else code 19021; bodies over 20 KB refused; 100 per minute and 5 per second per robot, else
code 11232. 9499 "Bad Request" answers a malformed body (the guide's example) and 19001 an
unknown token (public reports of real answers); that an oversize body also gets 9499 is our
assumption (not verified).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable
from typing import Any, ClassVar

from aiohttp import web

from tests.fakes.workchat_base import FakeWebhookService, Json, Refused, Robot, serve_main

HOOK = "/open-apis/bot/v2/hook/"
MSG_TYPES = frozenset({"text", "post", "image", "share_chat", "interactive"})
POST_TAGS = frozenset({"text", "a", "at", "img"})
_AT_ALL = re.compile(r"<at\s+user_id\s*=\s*[\"']?all[\"']?", re.IGNORECASE)


class FakeFeishu(FakeWebhookService):
    """Feishu custom bots; see the module doc."""

    WINDOWS: ClassVar[tuple[tuple[int, float], ...]] = ((5, 1.0), (100, 60.0))
    FRESHNESS: ClassVar[float] = 3600.0
    BODY_LIMIT: ClassVar[int] = 20_000
    NAME: ClassVar[str] = "feishu"

    def routes(self, app: web.Application) -> None:
        app.router.add_post(HOOK + "{token}", self._send)

    async def _send(self, request: web.Request) -> web.Response:
        return await self.handle(request, request.match_info["token"])

    def answer(self, code: int, msg: str) -> Json:
        if code == 0:
            return {"code": 0, "msg": "success", "data": {}, "StatusCode": 0,
                    "StatusMessage": "success", "Extra": None}  # fmt: skip
        return {"code": code, "msg": msg, "data": {}}

    def codes(self) -> dict[str, tuple[int, str]]:
        return {
            "unknown": (19001, "param invalid: incoming webhook access token invalid"),
            "rate": (11232, "frequency limited psm[lark.oapi.app_platform_runtime]"),
            "busy": (2200, "Internal Error"),
            "too_long": (9499, "Bad Request"),
            "bad_json": (9499, "Bad Request"),
        }

    def check_signature(self, request: web.Request, body: Json, robot: Robot) -> None:
        if robot.secret is None:
            return
        refused = Refused(19021, "sign match fail or timestamp is not within one hour from "
                          "current time")  # fmt: skip
        timestamp, sign = body.get("timestamp"), body.get("sign")
        if not isinstance(timestamp, str | int) or not isinstance(sign, str):
            raise refused
        try:
            seconds = int(timestamp)
        except ValueError:
            raise refused from None
        if abs(self.clock() - seconds) > self.FRESHNESS:
            raise refused
        key = f"{seconds}\n{robot.secret}".encode()
        expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        if not hmac.compare_digest(expected, sign):
            raise refused

    def check_payload(self, body: Json) -> None:
        bad = Refused(9499, "Bad Request")
        if body.get("msg_type") not in MSG_TYPES or not isinstance(body.get("content"), dict):
            raise bad
        if body["msg_type"] != "post":
            return
        post = body["content"].get("post")
        if not isinstance(post, dict) or not post:
            raise bad
        for lang in post.values():
            lines = lang.get("content") if isinstance(lang, dict) else None
            if not isinstance(lines, list):
                raise bad
            for line in lines:
                if not isinstance(line, list):
                    raise bad
                for element in line:
                    _check_element(element)

    def pings(self, body: Json) -> list[str]:
        found: list[str] = []
        if body.get("msg_type") == "text":
            text = str(body["content"].get("text", ""))
            found += [m.group() for m in _AT_ALL.finditer(text)]
        if body.get("msg_type") == "post":
            for lang in body["content"]["post"].values():
                for line in lang["content"]:
                    found += [f"<at {e.get('user_id')}>" for e in line if e.get("tag") == "at"]
        return found


def _check_element(element: Any) -> None:
    bad = Refused(9499, "Bad Request")
    if not isinstance(element, dict) or element.get("tag") not in POST_TAGS:
        raise bad
    if element["tag"] in ("text", "a") and not isinstance(element.get("text"), str):
        raise bad
    if element["tag"] == "a" and not str(element.get("href", "")).startswith(
        ("http://", "https://")
    ):
        raise bad


def main(argv: Iterable[str] | None = None) -> None:
    serve_main(FakeFeishu, argv, __doc__ or "")


if __name__ == "__main__":
    main()
