"""The create routes: discord.py's Route of each channel made once, its URL parsed once
(issue #24, item 5), and the requests the same as with a Route made for every send."""

from __future__ import annotations

from pathlib import Path

import pytest
import yarl
from discord.http import Route

from bots.discord.adapter import CreateRoutes
from digest_core.platform import Target
from digest_core.rendering import Message
from tests.bots.discord.harness import CHANNELS, fake_discord, make_settings, running_bot

CREATE = "POST /channels/{channel_id}/messages"


def test_a_route_is_discord_pys_with_its_url_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Route, "BASE", "http://127.0.0.1:9/api/v10")
    routes = CreateRoutes()
    route = routes.route(42)
    made = Route("POST", "/channels/{channel_id}/messages", channel_id=42)
    assert route.url == yarl.URL(made.url)  # what aiohttp makes of discord.py's string
    assert (route.method, route.key, route.major_parameters) == (
        made.method,
        made.key,
        made.major_parameters,
    )
    assert routes.route(42) is route
    assert routes.route(43) is not route


def test_routes_follow_the_api_base(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = CreateRoutes()
    monkeypatch.setattr(Route, "BASE", "http://127.0.0.1:9/api/v10")
    before = routes.route(42)
    monkeypatch.setattr(Route, "BASE", "http://127.0.0.1:10/api/v10")
    after = routes.route(42)
    assert str(after.url) == "http://127.0.0.1:10/api/v10/channels/42/messages"
    assert str(before.url) == "http://127.0.0.1:9/api/v10/channels/42/messages"


def test_only_the_newest_channels_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CreateRoutes, "SIZE", 3)
    routes = CreateRoutes()
    first = routes.route(1)
    for channel in range(2, 10):
        routes.route(channel)
    assert len(routes._routes) == 3
    assert routes.route(9) is routes.route(9)
    assert routes.route(1) is not first


async def test_sends_reach_each_channel_through_its_kept_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # over real sockets: the second send to a channel goes by the route the first one made
    async with fake_discord(rate_scale=0.02) as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, receive=False) as (_, adapter):
            for round_ in ("one", "two"):
                for channel in CHANNELS:
                    await adapter.send(
                        Target("discord", str(channel)), Message({"content": round_})
                    )
        for channel in CHANNELS:
            assert [m.content for m in fake.messages(channel)] == ["one", "two"]
        assert fake.counters.requests[CREATE] == 2 * len(CHANNELS)


async def test_a_bot_pointed_at_another_api_posts_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two runs of one process against two servers: the second run's sends reach the second
    # (one set of routes for both, as in one adapter: those kept from the first run name the
    # first server's address)
    routes = CreateRoutes()
    async with fake_discord(rate_scale=0.02) as first, fake_discord(rate_scale=0.02) as second:
        for fake, text in ((first, "to the first"), (second, "to the second")):
            run = tmp_path / text.replace(" ", "-")
            run.mkdir()
            settings = make_settings(run, monkeypatch, fake)
            async with running_bot(settings, receive=False) as (_, adapter):
                adapter._routes = routes
                await adapter.send(Target("discord", str(CHANNELS[0])), Message({"content": text}))
        assert [m.content for m in first.messages(CHANNELS[0])] == ["to the first"]
        assert [m.content for m in second.messages(CHANNELS[0])] == ["to the second"]
