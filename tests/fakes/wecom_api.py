"""Loopback double of WeCom (企业微信) group-robot webhooks (aiohttp on 127.0.0.1).

As https://developer.work.weixin.qq.com/document/path/91770 describes: POST
``/cgi-bin/webhook/send?key=<key>``, no signature; ``markdown.content`` at most 4096 bytes of
UTF-8; at most 20 messages a minute per robot, else errcode 45009 "api freq out of limit"; an
unknown key gets errcode 93000 "invalid webhook url". ``<@userid>`` in markdown mentions a
member. An oversize message gets 40058 as real answers quoted in public code show; the codes
for an empty (44004) or unknown-type (40008) message are not verified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar

from aiohttp import web

from tests.fakes.workchat_base import FakeWebhookService, Json, Refused, serve_main

SEND = "/cgi-bin/webhook/send"
CONTENT_LIMIT = 4096
TEXT_LIMIT = 2048
MSG_TYPES = frozenset({"text", "markdown", "markdown_v2", "image", "news", "file", "voice",
                       "template_card"})  # fmt: skip
_MENTION = re.compile(r"<@(?!\u200b)[^>\s]+>")


class FakeWeCom(FakeWebhookService):
    """WeCom group robots; see the module doc."""

    WINDOWS: ClassVar[tuple[tuple[int, float], ...]] = ((20, 60.0),)
    BODY_LIMIT: ClassVar[int] = 1_000_000
    NAME: ClassVar[str] = "wecom"

    def routes(self, app: web.Application) -> None:
        app.router.add_post(SEND, self._send)

    async def _send(self, request: web.Request) -> web.Response:
        return await self.handle(request, request.query.get("key"))

    def answer(self, code: int, msg: str) -> Json:
        return {"errcode": code, "errmsg": msg}

    def codes(self) -> dict[str, tuple[int, str]]:
        return {
            "unknown": (93000, "invalid webhook url, hint: [fake]"),
            "rate": (45009, "api freq out of limit, hint: [fake]"),
            "busy": (-1, "system busy"),
            "too_long": (40058, "invalid Request Parameter"),
            "bad_json": (40058, "invalid Request Parameter"),
        }

    def check_payload(self, body: Json) -> None:
        msgtype = body.get("msgtype")
        if msgtype not in MSG_TYPES:
            raise Refused(40008, "invalid message type")
        if msgtype in ("markdown", "text"):
            part = body.get(msgtype)
            content = part.get("content") if isinstance(part, dict) else None
            if not isinstance(content, str) or not content:
                raise Refused(44004, "empty content")
            limit = CONTENT_LIMIT if msgtype == "markdown" else TEXT_LIMIT
            if len(content.encode()) > limit:
                raise Refused(
                    40058,
                    f"{msgtype}.content exceed max length {limit}. Invalid input invalid "
                    "Request Parameter, hint: [fake]",
                )

    def pings(self, body: Json) -> list[str]:
        msgtype = body.get("msgtype")
        part = body.get(msgtype) if isinstance(msgtype, str) else None
        if not isinstance(part, dict):
            return []
        found = [m.group() for m in _MENTION.finditer(str(part.get("content", "")))]
        found += [f"@{m}" for m in part.get("mentioned_list", [])]
        found += [f"@{m}" for m in part.get("mentioned_mobile_list", [])]
        return found


def main(argv: Iterable[str] | None = None) -> None:
    serve_main(FakeWeCom, argv, __doc__ or "")


if __name__ == "__main__":
    main()
