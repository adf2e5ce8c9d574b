"""The adapter's HTTP requests to the Bot API: JSON bodies over aiohttp, files over PTB's httpx.

PTB form-encodes every request (``application/x-www-form-urlencoded``); percent-encoding an
issue's 4 kB of Chinese text in Python took about a millisecond of CPU per message, a JSON
body a few microseconds. The Bot API takes both (https://core.telegram.org/bots/api#making-requests).

A request without files goes over an aiohttp session (its HTTP parser and headers are C):
httpx and httpcore, pure Python with anyio under them, cost about 2 ms of the bot's CPU per
``sendMessage`` on the loopback (benchmarks/telegram_fanout.py), aiohttp a fraction of that.
Requests with files still go as PTB sends them (multipart, over ``HTTPXRequest``'s client),
and the timeouts of both are the ``httpx.Timeout`` PTB's request was built with.

Deliveries skip PTB's building of each request (:class:`EncodedJson`: the body encoded by
the caller, :class:`bots.telegram.wire.SendBodies`, a message's fields once for all its chats)
and, with ``message_id_only``, its decoding of the whole answer: a sent message comes back as
the whole Message, its text included (about 40 us of ``json.loads`` per answer of a 4 kB
issue part, for the one id the ledger keeps). Both still go through ``BaseRequest.post``, so
every answer that is not a 2xx is PTB's own exception, as for any other call.
"""

from __future__ import annotations

import json
import re
import ssl
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import HTTPXRequest, RequestData
from telegram.request._baserequest import BaseRequest
from yarl import URL

from bots.network import tls_context

_JSON = {"Content-Type": "application/json", "User-Agent": HTTPXRequest.USER_AGENT}

#: TimedOut's message for a request that never got a connection (as HTTPXRequest's)
POOL_TIMEOUT_MESSAGE = (
    "Pool timeout: All connections in the connection pool are occupied. Request was *not* "
    "sent to Telegram. Consider adjusting the connection pool size or the pool timeout."
)


class ClientClosed(RuntimeError):
    """A request refused before anything was sent: the client is closed (the adapter is
    stopping) or not yet open. PTB passes it on as the cause of a ``NetworkError``."""


def shared_tls() -> dict[str, ssl.SSLContext]:
    """``httpx_kwargs`` for an ``HTTPXRequest`` whose client uses the process's shared TLS
    context (:func:`bots.network.tls_context`)."""
    return {"verify": tls_context()}


#: the start of a Bot API answer whose result is a Message (its first field: the Bot API server
#: writes ``message_id`` first), with whitespace wherever JSON allows it
_MESSAGE_ID = re.compile(
    rb"[ \t\n\r]*".join([
        rb"\{", rb'"ok"', rb":", rb"true", rb",", rb'"result"', rb":", rb"\{",
        rb'"message_id"', rb":", rb"(-?[0-9]+)", rb"[,}]",
    ])
)  # fmt: skip


def encode_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (what JSON is on the wire: a Chinese character is 3
    bytes, where ``\\uXXXX`` took 6); text that UTF-8 cannot carry (a lone surrogate) is
    escaped instead, as ``json.dumps`` does by default."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def message_id_answer(payload: bytes) -> bytes:
    """A successful answer whose result is a Message, as ``{"ok":true,"result":{"message_id":N}}``
    (parsed in a microsecond, where the whole Message took tens); any other answer as it is."""
    found = _MESSAGE_ID.match(payload)
    if found is None:
        return payload
    return b'{"ok":true,"result":{"message_id":%s}}' % found[1]


# (RequestData is final for type checkers only; BaseRequest.post takes a RequestData, and
# JsonRequest.do_request is the one that receives it; test_request.py sends it over sockets)
class EncodedJson(RequestData):  # type: ignore[misc]
    """A call whose body is JSON encoded already, sent by :class:`JsonRequest` as it is.

    ``message_id_only``: the caller reads nothing of the answer's result but ``message_id``
    (a send whose id the ledger records), so a successful answer is cut down to that before
    PTB parses it. Passed to ``BaseRequest.post`` like PTB's own ``RequestData`` (PTB's
    handling of the answer, errors included, stays PTB's); no files, no parameters of its own.
    """

    __slots__ = ("body", "message_id_only")

    def __init__(self, body: bytes, *, message_id_only: bool = False) -> None:
        super().__init__()
        self.body = body
        self.message_id_only = message_id_only


class JsonRequest(HTTPXRequest):
    """``HTTPXRequest`` sending parameters as one JSON body over aiohttp (files: as PTB does).

    Timeouts, from the ``httpx.Timeout`` of the request (``_client.timeout``): ``connect``
    bounds opening a connection (aiohttp's ``sock_connect``), ``pool`` plus ``connect`` the
    wait for a free one and opening it (aiohttp's ``connect``), ``read`` each wait for the
    answer's bytes (``sock_read``); aiohttp has no write timeout (a JSON body of a few kB goes
    into the socket's buffer at once). Proxies come from the environment, as httpx reads them
    (``HTTPS_PROXY``, ``NO_PROXY``; looked up once per host); TLS uses the system's CAs.
    """

    def __init__(
        self,
        *,
        connection_pool_size: int,
        connect_timeout: float,
        read_timeout: float,
        write_timeout: float,
        pool_timeout: float,
    ) -> None:
        super().__init__(
            connection_pool_size=connection_pool_size,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            pool_timeout=pool_timeout,
            httpx_kwargs=shared_tls(),
        )
        self._pool_size = connection_pool_size
        self._session: aiohttp.ClientSession | None = None
        self._timeout = _aiohttp_timeout(connect_timeout, read_timeout, pool_timeout)
        #: scheme://host:port -> its proxy from the environment and the proxy's credentials
        self._proxies: dict[str, tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    async def initialize(self) -> None:
        await super().initialize()
        if self._session is None or self._session.closed:
            # (in the running loop: an aiohttp connector belongs to the loop it is made in)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                timeout=self._timeout,
                headers=_JSON,
                skip_auto_headers=("Accept-Encoding",),
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        try:
            await super().shutdown()
        finally:
            if session is not None and not session.closed:
                await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if isinstance(request_data, EncodedJson):
            status, payload = await self._send_json(
                url, method, request_data.body, read_timeout, connect_timeout, pool_timeout
            )
            if request_data.message_id_only and 200 <= status <= 299:
                return status, message_id_answer(payload)
            return status, payload
        if request_data is None or request_data.contains_files:
            return await super().do_request(
                url,
                method,
                request_data,
                read_timeout=read_timeout,
                write_timeout=write_timeout,
                connect_timeout=connect_timeout,
                pool_timeout=pool_timeout,
            )
        # the form's fields as they are (each value a string, objects JSON-encoded), so the
        # Bot API reads them as it reads a form: the same request in a cheaper body
        body = encode_json(request_data.json_parameters)
        return await self._send_json(url, method, body, read_timeout, connect_timeout, pool_timeout)

    async def _send_json(
        self,
        url: str,
        method: str,
        body: bytes,
        read_timeout: ODVInput[float],
        connect_timeout: ODVInput[float],
        pool_timeout: ODVInput[float],
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise ClientClosed("This JsonRequest is not initialized!")
        timeout = self._timeout
        if not (
            isinstance(read_timeout, DefaultValue)
            and isinstance(connect_timeout, DefaultValue)
            and isinstance(pool_timeout, DefaultValue)
        ):
            timeout = self._timeouts_of(read_timeout, connect_timeout, pool_timeout)
        return await self._send(session, method, url, body, timeout)

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes,
        limits: aiohttp.ClientTimeout,
    ) -> tuple[int, bytes]:
        """One request; its errors as HTTPXRequest raises them (TimedOut, NetworkError)."""
        try:
            proxy, auth = self._proxy(url)
            async with session.request(
                method, url, data=body, timeout=limits, proxy=proxy, proxy_auth=auth
            ) as res:
                return res.status, await res.read()
        except aiohttp.ConnectionTimeoutError as err:  # no connection: it never left
            raise TimedOut(message=POOL_TIMEOUT_MESSAGE) from err
        except TimeoutError as err:  # the answer did not come in time
            raise TimedOut from err
        except aiohttp.ClientConnectorError as err:  # refused, unresolved: it never left
            # from the socket's own error, as HTTPXRequest's were: the operator reads the same
            # reason as before ("connection refused", "cannot resolve the host name (...)")
            raise NetworkError(f"aiohttp.{err.__class__.__name__}: {err}") from err.os_error
        except aiohttp.ClientError as err:
            raise NetworkError(f"aiohttp.{err.__class__.__name__}: {err}") from err

    def _timeouts_of(
        self,
        read: ODVInput[float],
        connect: ODVInput[float],
        pool: ODVInput[float],
    ) -> aiohttp.ClientTimeout:
        default = self._client.timeout
        return _aiohttp_timeout(
            default.connect if isinstance(connect, DefaultValue) else connect,
            default.read if isinstance(read, DefaultValue) else read,
            default.pool if isinstance(pool, DefaultValue) else pool,
        )

    def _proxy(self, url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The proxy the environment names for ``url``'s host (None: none), as httpx reads
        it; looked up once per host (aiohttp's trust_env reads the environment per request)."""
        end = url.find("/", url.find("//") + 2)
        where = url if end < 0 else url[:end]
        known = self._proxies.get(where)
        if known is None:
            try:
                known = get_env_proxy_for_url(URL(where))
            except LookupError:
                known = (None, None)
            self._proxies[where] = known
        return known


def _aiohttp_timeout(
    connect: float | None, read: float | None, pool: float | None
) -> aiohttp.ClientTimeout:
    both = None if connect is None or pool is None else connect + pool
    return aiohttp.ClientTimeout(total=None, connect=both, sock_connect=connect, sock_read=read)
