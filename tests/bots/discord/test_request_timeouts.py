"""The adapter's requests run under its own request timeout alone: aiohttp arms no timer of
its own for them (issue #24, item 5), and a slow answer is still cut off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp.client
import pytest

from digest_core.errors import TransientError
from digest_core.platform import Target
from digest_core.rendering import Message
from tests.bots.discord.harness import CHANNELS, fake_discord, make_settings, running_bot


async def test_sends_and_edits_arm_no_timer_of_aiohttps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (also a guard: discord.py hands the keyword to aiohttp, whose request takes it)
    totals: list[float | None] = []

    class Recorded(aiohttp.client.TimeoutHandle):
        """aiohttp's timeout of one request, recording the total it was given."""

        def __init__(self, loop: Any, timeout: float | None, *args: Any, **kwargs: Any) -> None:
            totals.append(timeout)
            super().__init__(loop, timeout, *args, **kwargs)

    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, receive=False) as (_, adapter):
            monkeypatch.setattr(aiohttp.client, "TimeoutHandle", Recorded)
            target = Target("discord", str(CHANNELS[0]))
            sent = await adapter.send(target, Message({"content": "before"}))
            await adapter.edit(target, sent, Message({"content": "after"}))
        assert totals == [None, None]
        [stored] = fake.messages(CHANNELS[0])
        assert stored.content == "after"


async def test_a_slow_answer_is_cut_off_at_the_request_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, request_timeout_seconds=0.02)
        fake.fail_next(CHANNELS[0], "slow", delay=0.1)
        async with running_bot(settings, receive=False) as (_, adapter):
            with pytest.raises(TransientError, match="no answer within the request timeout"):
                await adapter.send(Target("discord", str(CHANNELS[0])), Message({"content": "x"}))
        assert fake.messages(CHANNELS[0]) == []
