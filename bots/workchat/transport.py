"""The one HTTP transport of the webhook platforms, and their error translation skeleton."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import Any, Self

import httpx

from bots.network import tls_context
from bots.outcome import answer_lost
from digest_core.port import (
    DeliveryError,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    TargetGone,
    TransientError,
)

log = logging.getLogger(__name__)

#: A 429 or a frequency-limit code without a usable wait gets this many seconds.
DEFAULT_RETRY_AFTER = 60.0
#: A 5xx body is quoted in errors up to this many characters.
QUOTE_CHARS = 200


class Outcome(Enum):
    """What a platform's error code means for delivery."""

    RATE_LIMITED = "rate limited"  # wait, then send the same part again
    GONE = "gone"  # the robot, its token or its signature no longer works: stop sending there
    REJECTED = "rejected"  # the payload was refused: a bug, never retried
    TRANSIENT = "transient"  # the platform's own trouble: retry with backoff


@dataclass(frozen=True)
class ErrorRule:
    """One documented error code: what it means and, for admins, what to do."""

    outcome: Outcome
    meaning: str
    #: RATE_LIMITED: seconds to wait (the platform's penalty), else DEFAULT_RETRY_AFTER
    retry_after: float | None = None


def translate(
    code: int,
    message: str,
    table: Mapping[int, ErrorRule],
    *,
    platform: str,
    target: str,
    scale: float = 1.0,
) -> DeliveryError:
    """The error for a non-zero ``code`` answered by ``platform`` for ``target`` (a name).

    Codes not in ``table`` are :class:`Rejected` (the platform refused, and we do not know
    that retrying helps). ``message`` is the platform's text, quoted for diagnosis. ``scale``
    divides the rule's wait (a time-compressed double).
    """
    rule = table.get(code)
    quoted = f"{code} {message[:QUOTE_CHARS]!r}"
    if rule is None:
        return Rejected(f"refused with {quoted}", platform=platform, target=target)
    detail = f"{rule.meaning} ({quoted})"
    if rule.outcome is Outcome.RATE_LIMITED:
        wait = rule.retry_after if rule.retry_after is not None else DEFAULT_RETRY_AFTER
        return RateLimited(detail, retry_after=wait / scale, platform=platform, target=target)
    if rule.outcome is Outcome.GONE:
        return TargetGone(detail, platform=platform, target=target)
    if rule.outcome is Outcome.TRANSIENT:
        return TransientError(detail, platform=platform, target=target)
    return Rejected(detail, platform=platform, target=target)


class RedactSecrets(logging.Filter):
    """Replaces secrets (webhook tokens, keys) in log records with ``<secret>``: httpx logs
    every request URL at INFO, and DingTalk's and WeCom's URLs carry the token."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<secret>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


class StartStop:
    """``async with x``: ``await x.start()`` on entry, ``await x.stop()`` on exit."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


class WebhookTransport(StartStop):
    """An ``httpx.AsyncClient`` that posts JSON to webhooks and translates transport failures.

    Use as an async context manager (or :meth:`start`/:meth:`stop`, both idempotent). Errors
    never carry the URL (it holds a secret): they name the platform and the target name only.
    """

    def __init__(self, *, platform: str, timeout: float, secrets: Iterable[str] = ()) -> None:
        self.platform = platform
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self._redactor = RedactSecrets(secrets)

    async def start(self) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(
                verify=tls_context(),
                timeout=httpx.Timeout(self.timeout),
                headers={"Content-Type": "application/json; charset=utf-8"},
                follow_redirects=False,
            )
            logging.getLogger("httpx").addFilter(self._redactor)

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
            logging.getLogger("httpx").removeFilter(self._redactor)

    async def post(self, url: str, body: bytes, *, target: str) -> tuple[int, dict[str, Any]]:
        """POST ``body`` to ``url``; return the HTTP status and the JSON answer (any status
        below 500 but 429). See :meth:`request`."""
        return await self.request("POST", url, body, target=target)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes | None,
        *,
        target: str,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Send ``body`` to ``url`` with ``method`` (and ``headers``); return the HTTP status
        and the JSON answer (any status below 500 but 429).

        Raises:
            TransientError: not started, a network failure or timeout, a 5xx, or an answer
                that is not a JSON object.
            RateLimited: HTTP 429 (``Retry-After``, Feishu's ``x-ogw-ratelimit-reset``, or
                DEFAULT_RETRY_AFTER).
        """
        if self._client is None:
            raise TransientError("not started", platform=self.platform, target=target)
        try:
            response = await self._client.request(method, url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            # ``from None``: httpx's exception holds the request, whose URL is a secret
            raise TransientError(
                f"no answer within {self.timeout:g} s ({type(exc).__name__}); the message may "
                "have arrived and will be sent again",
                platform=self.platform,
                target=target,
            ) from None
        except httpx.HTTPError as exc:
            if answer_lost(exc):
                raise OutcomeUnknown(
                    f"connection cut before the answer ({type(exc).__name__}); the message "
                    "may have arrived and will be sent again",
                    platform=self.platform,
                    target=target,
                ) from None
            raise TransientError(
                f"network error: {type(exc).__name__}", platform=self.platform, target=target
            ) from None
        if response.status_code == 429:
            wait = retry_after(response.headers)
            raise RateLimited(
                f"HTTP 429, wait {wait:g} s",
                retry_after=wait,
                platform=self.platform,
                target=target,
            )
        if response.status_code >= 500:
            raise TransientError(
                f"HTTP {response.status_code}: {response.text[:QUOTE_CHARS]!r}",
                platform=self.platform,
                target=target,
            )
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise TransientError(
                f"HTTP {response.status_code} without a JSON object: "
                f"{response.text[:QUOTE_CHARS]!r}",
                platform=self.platform,
                target=target,
            )
        return response.status_code, data


def retry_after(headers: Mapping[str, str]) -> float:
    """Seconds to wait from ``Retry-After`` (in seconds) or Feishu's ``x-ogw-ratelimit-reset``
    (https://open.feishu.cn/document/server-docs/api-call-guide/frequency-control);
    DEFAULT_RETRY_AFTER when neither is a number."""
    for name in ("retry-after", "x-ogw-ratelimit-reset"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            continue
    return DEFAULT_RETRY_AFTER
