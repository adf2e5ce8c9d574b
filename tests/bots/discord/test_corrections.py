"""Corrections edited in place and pins through the real discord.py client and the double."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from bots.discord.cli import sync_commands
from digest_core.models import Issue
from digest_core.rendering import Part, RenderOptions, render
from digest_core.rendering import discord as discord_render
from tests.bots.discord.harness import (
    CHANNELS,
    GUILD,
    READER,
    TWO_PARTS,
    clock_on,
    fake_discord,
    make_settings,
    running_bot,
)
from tests.fakes.discord_api import FakeDiscord

BRIEF = "单根“针”的检索测试已经很难拉开模型差距。"
MARK = "已更正 / corrected 09:00"


def _payloads(issue: Issue) -> list[dict[str, object]]:
    options = RenderOptions(buttons=True)
    return [m.payload for m in render(issue, discord_render, Part.ALL, options=options)]


def _rewrite(archive: Path, old: str, new: str) -> None:
    path = archive / f"{TWO_PARTS}.txt"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _requests(fake: FakeDiscord, route: str) -> int:
    return fake.counters.requests[route]


PATCH = "PATCH /channels/{channel_id}/messages/{message_id}"
DELETE = "DELETE /channels/{channel_id}/messages/{message_id}"
POST = "POST /channels/{channel_id}/messages"


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_changed_brief_is_edited_in_place_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, clock=clock_on(TWO_PARTS)) as (service, _):
            [posted] = await service.post(TWO_PARTS)
            assert posted.ok
            old = _payloads(service.archive.on(TWO_PARTS))
            _rewrite(settings.archive_dir, BRIEF, "单根“针”的检索测试已经无法拉开差距。")
            service.archive.refresh(full=True)
            new = _payloads(service.archive.on(TWO_PARTS))
            changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
            assert len(changed) == 1
            creates = _requests(fake, POST)

            [report] = await service.correct(TWO_PARTS)

            assert report.ok and report.edited == len(CHANNELS) and report.added == 0
            assert _requests(fake, POST) == creates  # nothing new
            for channel in CHANNELS:
                messages = fake.messages(channel)
                assert len(messages) == len(old)
                for i, message in enumerate(messages):
                    if i in changed:
                        assert len(message.edits) == 1
                        assert MARK in message.content
                        assert message.embeds == [{"type": "rich", **e} for e in new[i]["embeds"]]  # type: ignore[attr-defined]
                    else:
                        assert message.edits == []
            patches = _requests(fake, PATCH)

            [again] = await service.correct(TWO_PARTS)

            assert again.changed == 0 and again.ok
            assert _requests(fake, PATCH) == patches and _requests(fake, POST) == creates


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_removed_part_is_deleted_and_the_keyboard_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, clock=clock_on(TWO_PARTS)) as (service, _):
            await service.post(TWO_PARTS)
            path = settings.archive_dir / f"{TWO_PARTS}.txt"
            lines = path.read_text(encoding="utf-8").split("\n")
            # the headline keeps its first paragraph only: the issue fits one message
            start = lines.index("重点") + 2
            end = next(i for i in range(start, len(lines)) if lines[i].startswith("https://"))
            path.write_text("\n".join(lines[: start + 1] + lines[end:]), encoding="utf-8")
            service.archive.refresh(full=True)
            assert len(_payloads(service.archive.on(TWO_PARTS))) == 1

            [report] = await service.correct(TWO_PARTS)

            assert report.ok and report.removed == len(CHANNELS)
            for channel in CHANNELS:
                [left] = fake.messages(channel)
                assert left.components  # the buttons are on the one message left
                assert len(fake.messages(channel, include_deleted=True)) == 2
            deletes = _requests(fake, DELETE)
            [again] = await service.correct(TWO_PARTS)
            assert again.changed == 0 and _requests(fake, DELETE) == deletes


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_pins_follow_the_day_and_a_missing_permission_is_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    denied = CHANNELS[2]
    async with fake_discord() as fake:
        fake.set_bot_permissions(denied, 0)
        settings = make_settings(tmp_path, monkeypatch, fake, pin=True)
        async with running_bot(settings, clock=clock_on(TWO_PARTS)) as (service, _):
            alerts: list[str] = []

            async def alert(text: str) -> None:
                alerts.append(text)

            service.pins._alert = alert
            await service.post(TWO_PARTS - dt.timedelta(days=1))
            yesterday = {c: fake.messages(c)[0].id for c in CHANNELS}
            assert [m.id for m in fake.pinned(CHANNELS[0])] == [yesterday[CHANNELS[0]]]

            await service.post(TWO_PARTS)

            for channel in CHANNELS[:2]:
                today = next(m for m in fake.messages(channel) if m.id > yesterday[channel])
                assert [m.id for m in fake.pinned(channel)] == [today.id]
            assert fake.pinned(denied) == []
            assert len(alerts) == 1 and str(denied) in alerts[0]
            pins = _requests(fake, "PUT /channels/{channel_id}/messages/pins/{message_id}")
            await service.post(TWO_PARTS)
            assert len(alerts) == 1
            # the two permitted channels are pinned again (idempotent); the denied one is not
            after = _requests(fake, "PUT /channels/{channel_id}/messages/pins/{message_id}")
            assert after - pins == 2


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_dm_subscriber_in_the_compact_format_is_corrected_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    title, new_title = (
        "梯度累积与学习率：换了累积步数，别忘了重调预热",
        "梯度累积与学习率：改了累积步数，记得重调预热",
    )
    options = RenderOptions(buttons=True)
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, command_burst=100)
        await sync_commands(settings.discord)
        async with running_bot(settings, clock=clock_on(TWO_PARTS)) as (service, adapter):
            record = await fake.run_slash_command(
                GUILD, CHANNELS[0], READER, "subscribe", {"format": "compact"}
            )
            await record.wait_for_callback()
            [subscriber] = await service.ledger.subscribers("discord")
            dm = int(subscriber.id)
            [posted] = await service.post(TWO_PARTS)
            assert posted.ok
            [before] = fake.messages(dm)  # the compact issue: one message
            old_full = _payloads(service.archive.on(TWO_PARTS))
            _rewrite(settings.archive_dir, title, new_title)
            service.archive.refresh(full=True)
            issue = service.archive.on(TWO_PARTS)
            [compact] = render(issue, discord_render, Part.TOC, options=options)
            new_full = _payloads(issue)
            changed = [i for i, (a, b) in enumerate(zip(old_full, new_full, strict=True)) if a != b]
            creates = _requests(fake, POST)

            [report] = await service.correct(TWO_PARTS)

            assert report.ok and report.added == 0 and report.removed == 0
            assert report.edited == len(CHANNELS) * len(changed) + 1
            assert _requests(fake, POST) == creates  # nothing new, in the DM either
            [after] = fake.messages(dm)
            assert after.id == before.id and len(after.edits) == 1
            assert MARK in after.content and new_title in after.content
            # the compact message, marked: not a part of the full issue (embeds)
            assert after.content == adapter.corrected(compact, MARK).payload["content"]
            assert not after.embeds and after.components
            for channel in CHANNELS:
                for i, message in enumerate(fake.messages(channel)):
                    assert len(message.edits) == (1 if i in changed else 0)
            patches = _requests(fake, PATCH)

            [again] = await service.correct(TWO_PARTS)

            assert again.changed == 0 and again.ok
            assert _requests(fake, PATCH) == patches and _requests(fake, POST) == creates
