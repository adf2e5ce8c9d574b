"""Telegram outages end to end: the real PTB Application behind a fault-injecting proxy in
front of the Bot API double (real sockets: refused connections, answers cut after the
request reached the server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bots.telegram.harness import (
    CHANNEL,
    TODAY,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.proxy import FaultProxy
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BY_NAME = -1009999  # the channel configured as @ai_digest
PARTS = 2  # the issue of TODAY is two messages on Telegram


@pytest.fixture
async def proxy(fake: FakeTelegram) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(fake.port) as p:
        yield p


async def test_an_answer_cut_after_the_request_arrived_is_counted_possibly_twice(
    fake: FakeTelegram, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(tmp_path, base_url=f"{proxy.url}/bot", channels=[str(CHANNEL)])
    async with running_bot(settings_for(path, fake, monkeypatch), fake, scale=100) as bot:
        proxy.cut_answers(1)
        [report] = await bot.service.post(TODAY)
    assert proxy.cut == 1
    # Telegram got the first part twice (the answer to the first send was lost) ...
    texts = [m.text for m in fake.sent(CHANNEL)]
    assert len(texts) == PARTS + 1 and texts[0] == texts[1]
    # ... and the delivery says so: the resend is counted as possibly twice
    assert (report.sent, report.maybe_twice, report.failed) == (PARTS, 1, 0)
    assert report.ok
