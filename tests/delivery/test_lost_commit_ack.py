"""A commit that reached PostgreSQL but whose answer was cut (a real proxy drops the connection
after the server's COMMIT): the writer's retry finds its own claims done instead of taking them
for another delivery's, so nothing is left unsent."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.health import RetryPolicy
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets
from tests.delivery.test_ledger_trouble import wait_for
from tests.pg import HOST, PgServer

#: the tag of the server's CommandComplete message for a COMMIT
COMMIT_DONE = b"COMMIT\x00"


class CuttingProxy:
    """A TCP proxy in front of PostgreSQL that, while armed, closes the client's connection in
    place of forwarding the server's answer to a COMMIT (the commit is done; the client does
    not know)."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.cuts = 0
        self.cut = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(HOST, self.upstream)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, answers: bool) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while chunk := await src.read(65536):
                    if answers and self.cuts > 0 and COMMIT_DONE in chunk:
                        self.cuts -= 1
                        self.cut += 1
                        break
                    dst.write(chunk)
                    await dst.drain()
            for w in (writer, up_writer):
                w.close()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))


@pytest.fixture
async def proxy(pg_server: PgServer) -> AsyncIterator[CuttingProxy]:
    found = CuttingProxy(pg_server.port)
    await found.start()
    try:
        yield found
    finally:
        await found.stop()


async def test_a_claim_whose_commit_answer_was_lost_is_still_sent(
    pg_server: PgServer, proxy: CuttingProxy
) -> None:
    name = pg_server.create_database()
    url = f"postgresql+asyncpg://postgres@{HOST}:{proxy.port}/{name}"
    clock = SystemClock()
    platform = FakePlatform(
        clock, limits=PlatformLimits(overall=Rate(1000.0, 100), per_target={}), latency=0.02
    )
    targets, messages = make_targets(60), make_messages(3)
    try:
        async with Ledger.open(url, clock=clock) as ledger:
            ledger.retry_policy = RetryPolicy(base=0.02, cap=0.1)
            engine = DeliveryEngine(ledger, clock=clock, max_in_flight=8)
            post = asyncio.create_task(
                engine.deliver(make_issue().ref, platform, messages, targets)
            )
            await wait_for(lambda: len(platform.sent) >= 20, "some sends")
            proxy.cuts = 6  # the writer's next commits: claims and records among them
            await wait_for(lambda: proxy.cuts == 0 or post.done(), "the cuts")
            report = await asyncio.wait_for(post, 60)
    finally:
        pg_server.drop_database(name)
    assert proxy.cut == 6
    sent = Counter((s.target.id, s.message.payload["part"]) for s in platform.sent)
    assert report.in_progress == 0, "parts left to 'another delivery' that was this one"
    assert len(sent) == len(targets) * len(messages), "parts lost"
    assert max(sent.values()) == 1
    assert report.ok
