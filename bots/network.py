"""Reaching servers: the TLS context every HTTP client of the process shares, and failures to
reach a server (DNS, refused, reset, timeout) as one short reason for people."""

from __future__ import annotations

import functools
import logging
import socket
import ssl
from collections.abc import Iterator

log = logging.getLogger(__name__)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every httpx client of the process shares (``verify=tls_context()``),
    made as httpx makes its own (``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` from the environment,
    else certifi's CAs).

    Loading a CA bundle takes 12-40 ms of CPU; httpx did it again for every client it built
    (two per Telegram bot, one per work-chat transport and doctor, again after each restart of
    one), a context shared does it once.
    """
    import httpx

    return httpx.create_ssl_context()


def network_reason(exc: BaseException) -> str | None:
    """Why a server could not be reached, in a few words, when ``exc`` or an exception it was
    raised from is an aiohttp, httpx or socket connection failure; None for anything else
    (an HTTP error answer, a bug). The most specific reason in the chain wins (httpx's
    "All connection attempts failed" hides a refused connection)."""
    general: str | None = None
    for error in _chain(exc):
        reason, specific = _reason(error)
        if reason is not None and specific:
            return reason
        general = general or reason
    return general


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _reason(error: BaseException) -> tuple[str | None, bool]:
    """(the reason, whether it is specific) for one exception of a chain."""
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - discord.py brings it
        aiohttp = None  # type: ignore[assignment]
    try:
        import httpx
    except ImportError:  # pragma: no cover - python-telegram-bot brings it
        httpx = None  # type: ignore[assignment]
    if aiohttp is not None:
        if isinstance(error, aiohttp.ClientConnectorDNSError):
            return f"cannot resolve {error.host} ({_os_reason(error.os_error)})", True
        if isinstance(error, aiohttp.ClientConnectorError):
            where = f"{error.host}:{error.port}"
            return f"cannot connect to {where} ({_os_reason(error.os_error)})", True
        if isinstance(error, aiohttp.ServerTimeoutError):
            return "no answer in time", True
        if isinstance(error, aiohttp.ClientConnectionError):
            return str(error) or type(error).__name__, False
    if httpx is not None:
        if isinstance(error, httpx.TimeoutException):
            return "no answer in time", True
        if isinstance(error, httpx.TransportError):
            return str(error) or type(error).__name__, False
    if isinstance(error, socket.gaierror):
        return f"cannot resolve the host name ({_os_reason(error)})", True
    if isinstance(error, ssl.SSLError):
        return f"TLS failed ({error.reason or error})", True
    if isinstance(error, TimeoutError):
        return "no answer in time", True
    if isinstance(error, ConnectionError):
        return _os_reason(error), True
    return None, False


def _os_reason(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return error.strerror or str(error) or type(error).__name__
