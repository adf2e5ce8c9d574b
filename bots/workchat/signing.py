"""Webhook signatures of Feishu and DingTalk custom bots (WeCom's group robot has none)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse


def feishu_sign(secret: str, timestamp: int) -> str:
    """Feishu/Lark: ``timestamp + "\\n" + secret`` is the HMAC-SHA256 *key*, the message is
    empty, the digest is base64-encoded. ``timestamp`` is in seconds; both go in the JSON body
    as ``"timestamp"`` (a string) and ``"sign"``.

    https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot (签名校验)
    """
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode("ascii")


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk: HMAC-SHA256 keyed by ``secret`` over ``timestamp + "\\n" + secret``,
    base64-encoded. ``timestamp_ms`` is in milliseconds. The returned value is *not* yet
    URL-encoded: :func:`dingtalk_query` encodes it once for the ``sign`` query parameter.

    https://open.dingtalk.com/document/orgapp/customize-robot-security-settings (加签)
    """
    digest = hmac.new(
        secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256
    ).digest()
    return base64.b64encode(digest).decode("ascii")


def dingtalk_query(access_token: str, secret: str | None, timestamp_ms: int) -> str:
    """The query string of a DingTalk robot send: ``access_token`` and, with a secret,
    ``timestamp`` and the URL-encoded ``sign``."""
    params = {"access_token": access_token}
    if secret:
        params["timestamp"] = str(timestamp_ms)
        params["sign"] = dingtalk_sign(secret, timestamp_ms)
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote_plus)
