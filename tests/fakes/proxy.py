"""A fault-injecting TCP proxy on 127.0.0.1 in front of a loopback double: it can go
unreachable (connection refused, open connections reset) and cut answers after a request
reached the server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from types import TracebackType
from typing import Self

log = logging.getLogger(__name__)

_CHUNK = 65536


class FaultProxy:
    """Relays bytes between clients and ``upstream_port`` over real sockets.

    ``go_down()`` closes the listening socket (new connections are refused) and resets every
    open connection; ``come_up()`` listens again on the same port. ``cut_answers(n, only=…)``
    makes the next ``n`` answers to requests containing ``only`` go unrelayed: the request
    reached the server (and took effect), and the client's connection is reset instead of
    getting the answer, as when a connection drops after the request was sent.
    """

    def __init__(self, upstream_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.host = host
        self.port = port
        #: answers cut so far
        self.cut = 0
        #: connections refused or reset while down: attempts that never got through
        self.resets = 0
        self._to_cut = 0
        self._only = b""
        self._server: asyncio.Server | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        await self.come_up()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.go_down()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def down(self) -> bool:
        return self._server is None

    async def come_up(self) -> None:
        """Listen (again, on the same port once it has one)."""
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def go_down(self) -> None:
        """Refuse new connections and reset the open ones."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for client, upstream in list(self._conns):
            _reset(client)
            _reset(upstream)
            self.resets += 1
        self._conns.clear()

    def cut_answers(self, times: int, *, only: bytes = b"/sendMessage") -> None:
        """Reset, instead of relaying, the next ``times`` answers to requests holding ``only``."""
        self._to_cut, self._only = times, only

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)
        except OSError:
            _reset(writer)
            return
        pair = (writer, up_writer)
        self._conns.add(pair)
        #: whether the request being answered is one to cut (the last request seen)
        state = {"cut": False}
        tasks = [
            asyncio.create_task(self._requests(reader, up_writer, state)),
            asyncio.create_task(self._answers(up_reader, writer, state, pair)),
        ]
        for task in tasks:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._conns.discard(pair)
        for w in pair:
            w.close()

    async def _requests(
        self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter, state: dict[str, bool]
    ) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(_CHUNK):
                if self._to_cut and self._only in data:
                    self._to_cut -= 1
                    state["cut"] = True
                upstream.write(data)
                await upstream.drain()
        with contextlib.suppress(OSError):
            upstream.write_eof()

    async def _answers(
        self,
        reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        state: dict[str, bool],
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(_CHUNK):
                if state["cut"]:
                    self.cut += 1
                    log.debug("proxy: cut an answer after the request reached the server")
                    _reset(client)
                    _reset(pair[1])
                    return
                client.write(data)
                await client.drain()
        client.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), as a dropped connection looks to the peer."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
