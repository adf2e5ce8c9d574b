"""Whether a failed HTTP request may have reached the server (httpx and aiohttp errors)."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def answer_lost(exc: BaseException | None) -> bool:
    """True when ``exc`` (or the error it was raised from) broke the connection after the
    request was written, while waiting for the answer: the server may have acted on it, so
    the send's outcome is unknown (a resend may be a duplicate).

    False for failures before the request left (connecting, a pooled connection, writing it)
    and for anything that is not a connection failure: those are safe to send again.
    Timeouts are left to the caller (each adapter already tells a read timeout apart).
    """
    seen = 0
    while exc is not None and seen < 5:  # the SDK's own error first, then its causes
        if _after_send(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _after_send(exc: BaseException) -> bool:
    import httpx

    if isinstance(exc, httpx.ReadError | httpx.RemoteProtocolError):
        return True
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiohttp comes with the discord extra
        return False
    if isinstance(exc, aiohttp.ClientConnectorError):
        return False  # connecting failed: nothing was sent
    # the server closed the connection or reset it while we read its answer
    return isinstance(
        exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientOSError
    )
