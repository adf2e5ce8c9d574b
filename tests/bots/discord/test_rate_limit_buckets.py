"""discord.py's sweep of idle rate-limit buckets runs as the bucket count doubles (issue #24,
item 5): a post to many channels adds a bucket per channel, and discord.py swept them all at
every new one past 256."""

from __future__ import annotations

import discord.http
import pytest

from bots.discord.client import DigestClient
from bots.discord.settings import DiscordSettings

KEY = "POST /channels/{{channel_id}}/messages:{}"


async def test_idle_buckets_are_swept_and_sweeps_are_few(monkeypatch: pytest.MonkeyPatch) -> None:
    sweeps = 0
    sweep = discord.http.HTTPClient._try_clear_expired_ratelimits

    def counted(self: discord.http.HTTPClient) -> None:
        nonlocal sweeps
        sweeps += 1
        sweep(self)

    monkeypatch.setattr(discord.http.HTTPClient, "_try_clear_expired_ratelimits", counted)
    client = DigestClient(DiscordSettings(channels=["1"]))
    http = client.http
    try:
        for i in range(300):
            http.get_ratelimit(KEY.format(i))
        for i in range(100):  # idle for longer than discord.py's 5 minutes
            http._buckets[KEY.format(i)]._last_request -= 301
        for i in range(300, 5000):
            http.get_ratelimit(KEY.format(i))
        assert sweeps <= 6  # at 256, 512, 1024, 2048, 4096 buckets (was one per new bucket)
        assert not any(KEY.format(i) in http._buckets for i in range(100))
        assert all(KEY.format(i) in http._buckets for i in range(100, 5000))
    finally:
        await client.close()
