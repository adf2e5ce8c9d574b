"""The adapter's HTTP requests to the Bot API: PTB's ``HTTPXRequest`` with JSON bodies.

PTB form-encodes every request (``application/x-www-form-urlencoded``); percent-encoding an
issue's 4 kB of Chinese text in Python took about a millisecond of CPU per message, a JSON
body a few microseconds. The Bot API takes both (https://core.telegram.org/bots/api#making-requests).
Requests with files still go as PTB sends them (multipart).
"""

from __future__ import annotations

import json

import httpx
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import HTTPXRequest, RequestData
from telegram.request._baserequest import BaseRequest

_JSON = {"Content-Type": "application/json", "User-Agent": HTTPXRequest.USER_AGENT}


class JsonRequest(HTTPXRequest):
    """``HTTPXRequest`` sending parameters as one JSON body (files: as PTB does)."""

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
        client = self._client
        if client.is_closed:
            raise RuntimeError("This HTTPXRequest is not initialized!")
        default = client.timeout
        timeout = httpx.Timeout(
            connect=default.connect
            if isinstance(connect_timeout, DefaultValue)
            else connect_timeout,
            read=default.read if isinstance(read_timeout, DefaultValue) else read_timeout,
            write=default.write if isinstance(write_timeout, DefaultValue) else write_timeout,
            pool=default.pool if isinstance(pool_timeout, DefaultValue) else pool_timeout,
        )
        # the form's fields as they are (each value a string, objects JSON-encoded), so the
        # Bot API reads them as it reads a form: the same request in a cheaper body
        body = json.dumps(request_data.json_parameters, separators=(",", ":")).encode()
        # (the errors as HTTPXRequest.do_request raises them)
        try:
            res = await client.request(
                method=method, url=url, headers=_JSON, timeout=timeout, content=body
            )
        except httpx.TimeoutException as err:
            if isinstance(err, httpx.PoolTimeout):
                raise TimedOut(
                    message=(
                        "Pool timeout: All connections in the connection pool are occupied. "
                        "Request was *not* sent to Telegram. Consider adjusting the connection "
                        "pool size or the pool timeout."
                    )
                ) from err
            raise TimedOut from err
        except httpx.HTTPError as err:
            raise NetworkError(f"httpx.{err.__class__.__name__}: {err}") from err
        return res.status_code, res.content
