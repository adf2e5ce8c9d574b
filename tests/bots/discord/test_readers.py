"""Readers' own terms end to end on Discord (issue #12 item 6): the same preferences and
follows through slash commands, delivered by DM under the same rules."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bots.discord.cli import sync_commands
from digest_core.rendering import Part, render
from digest_core.rendering import discord as discord_render
from digest_core.testing import SettableClock
from tests.bots.discord.harness import (
    CHANNELS,
    GUILD,
    READER,
    TWO_PARTS,
    fake_discord,
    make_settings,
    running_bot,
)

BERLIN = ZoneInfo("Europe/Berlin")
SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY = TWO_PARTS  # 2026-11-27: the issue whose brief mentions 蒸馏
HEADLINE = "KV 缓存为什么要分页"


def at(day: dt.date, hh: int, mm: int, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hh, mm, 30, tzinfo=zone)


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock(at(DAY, 9, 0, SHANGHAI))


@pytest.fixture
async def bot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: SettableClock) -> Any:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, command_burst=100)
        await sync_commands(settings.discord)
        async with running_bot(settings, clock=clock) as (service, adapter):
            yield fake, service, adapter


async def slash(fake: Any, name: str, options: dict[str, Any] | None = None) -> str:
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, name, options or {})
    await record.wait_for_callback()
    message = record.original if record.original is not None else record.followups[0]
    assert message.ephemeral
    return str(message.content)


async def test_a_dm_subscriber_gets_the_issue_once_at_their_time_in_their_format(
    bot: Any, clock: SettableClock
) -> None:
    fake, service, _ = bot
    assert "Europe/Berlin" in await slash(fake, "zone", {"name": "Europe/Berlin"})
    text = await slash(fake, "subscribe", {"time": "21:00", "format": "headline"})
    assert "21:00" in text and "只看重点 / headline" in text
    [subscriber] = await service.ledger.subscribers("discord")
    dm = int(subscriber.id)
    # the channel post at the digest's time leaves the timed subscriber out
    await service.post(DAY)
    assert fake.messages(dm) == []
    assert await service.deliver_personal() == []

    clock.set(at(DAY, 21, 0, BERLIN))
    [report] = await service.deliver_personal()
    headline = render(
        service.archive.on(DAY), discord_render, Part.HEADLINE, options=_.post_options
    )
    assert report.sent == len(headline) == len(fake.messages(dm))
    assert HEADLINE in str(fake.messages(dm)[0].embeds)
    assert await service.deliver_personal() == []
    # a change of format after delivery sends nothing again that day
    await slash(fake, "subscribe", {"time": "22:00", "format": "full"})
    clock.set(at(DAY, 22, 0, BERLIN))
    assert await service.deliver_personal() == []
    assert len(fake.messages(dm)) == len(headline)


async def test_follows_and_settings_buttons_by_slash_command(
    bot: Any, clock: SettableClock
) -> None:
    fake, service, _ = bot
    clock.set(at(DAY, 7, 0, SHANGHAI))  # the 27th is not out until 08:00
    assert "已关注“蒸馏”" in await slash(fake, "follow", {"word": "蒸馏"})
    assert "蒸馏" in await slash(fake, "following")
    assert await service.deliver_personal() == []
    clock.set(at(DAY, 8, 1, SHANGHAI))
    reports = await service.deliver_personal()
    assert [(r.platform, r.sent) for r in reports] == [("discord~follow", 1)]
    [dm] = await service.ledger.followers("discord")  # the reader's DM channel
    assert fake.channel(int(dm))["recipients"][0]["id"] == str(READER)
    [alert] = fake.messages(int(dm))
    assert "“蒸馏”" in alert.content and "2026-11-27" in alert.content
    assert await service.deliver_personal() == []

    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "settings", {})
    await record.wait_for_callback()
    shown = record.original
    assert shown is not None and "蒸馏" in shown.content
    buttons = {b["label"]: b["custom_id"] for row in shown.components for b in row["components"]}
    pressed = await fake.press_button(CHANNELS[0], shown.id, buttons["精简"], READER)
    await pressed.wait_for_callback()
    assert pressed.original is not None and "精简 / compact" in pressed.original.content
    pref = await service.ledger.preference("discord", dm)
    assert pref.format == "compact" and pref.subscribed
