"""The editor's side end to end on Discord: embargo, admin preview, the approval gate.

The real discord.py client against the double; the wall clock is pinned and moved by the tests.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bots.discord.cli import sync_commands
from bots.registry import load_settings
from digest_core.rendering import Part, render
from digest_core.rendering import discord as discord_render
from digest_core.testing import PinnedClock
from tests.bots.discord.harness import (
    ADMIN_ROLE,
    ADMIN_USER,
    ALERTED,
    CHANNELS,
    GUILD,
    READER,
    TWO_PARTS,
    fake_discord,
    make_settings,
    running_bot,
)
from tests.fakes.discord_api import FakeDiscord, InteractionRecord, StoredMessage

TODAY = TWO_PARTS  # 2026-11-27: two messages on Discord
TOMORROW = TODAY + dt.timedelta(days=1)
ONLY_TOMORROW = "提示词模板"


class MovableClock(PinnedClock):
    """A pinned clock the test can move forward (wall time only)."""

    def advance(self, delta: dt.timedelta) -> None:
        self._start += delta


def at(day: dt.date, hour: int) -> MovableClock:
    """``hour``:00 in Asia/Shanghai (UTC+8) on ``day``."""
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    return MovableClock(start + dt.timedelta(hours=hour - 8))


def replies(record: InteractionRecord) -> list[StoredMessage]:
    out = [record.original] if record.original is not None else []
    return out + [m for m in record.followups if m is not record.original]


def text(record: InteractionRecord) -> str:
    return "\n".join(m.content for m in replies(record))


def dms(fake: FakeDiscord) -> list[StoredMessage]:
    """Every message in the bot's DM channels, in order."""
    channels = [c for c, data in fake._channels.items() if data.get("type") == 1]
    return sorted((m for c in channels for m in fake.messages(c)), key=lambda m: m.id)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    # (no test here is about Discord's rate limits: their windows shrunk, 5 messages a
    # channel per 0.1 s, so that a review's messages do not wait out the 5 s of the real one)
    async with fake_discord(rate_scale=0.02) as server:
        yield server


async def test_no_reader_surface_shows_a_future_issue_before_its_time(
    fake: FakeDiscord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path, monkeypatch, fake, command_burst=100)
    await sync_commands(settings.discord)
    async with running_bot(settings, clock=at(TODAY, 7)) as (_service, _):
        for name, options in [
            ("issue", {"date": str(TOMORROW)}),
            ("issue", {"date": str(TODAY)}),
            ("briefs", {"n": 1, "date": str(TOMORROW)}),
            ("briefs", {"date": str(TOMORROW)}),
        ]:
            record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, name, options)
            assert "的日报还没有发布" in text(record), (name, options, text(record))
        # /briefs takes a date (n and date: one brief of that day)
        record = await fake.run_slash_command(
            GUILD, CHANNELS[0], READER, "briefs", {"n": 2, "date": "2026-11-26"}
        )
        await record.wait_for(lambda r: bool(replies(r)))
        assert "数据加载上 GPU" in str([m.embeds for m in replies(record)])
        record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "today")
        assert f"今天（{TODAY}）的日报将于 08:00 发布" in text(record)
        record = await fake.run_slash_command(
            GUILD, CHANNELS[0], READER, "search", {"keyword": ONLY_TOMORROW}
        )
        assert str(TOMORROW) not in text(record) and "没有找到" in text(record)
        # autocomplete: readers see published dates only, admins every date
        record = await fake.run_autocomplete(
            GUILD, CHANNELS[0], READER, "issue", {"date": "2026"}, focused="date"
        )
        assert [c["value"] for c in record.choices] == ["2026-11-26"]
        record = await fake.run_autocomplete(
            GUILD, CHANNELS[0], ADMIN_USER, "issue", {"date": "2026"}, focused="date",
            member_roles=[ADMIN_ROLE],
        )  # fmt: skip
        assert record.choices[0]["value"] == "2026-11-30" and len(record.choices) == 5
        # a section button naming tomorrow (on an old or forged message)
        button = {"type": 2, "style": 2, "label": "重点", "custom_id": f"dg:{TOMORROW}:headline"}
        message = fake.add_message(
            CHANNELS[0], "x", components=[{"type": 1, "components": [button]}]
        )
        record = await fake.press_button(
            CHANNELS[0], message.id, button["custom_id"], READER, within=5
        )
        await record.wait_for(lambda r: bool(replies(r)))
        assert "还没有发布" in text(record) and "<think>" not in text(record)
        # an admin sees it
        record = await fake.run_slash_command(
            GUILD, CHANNELS[0], ADMIN_USER, "issue", {"date": str(TOMORROW)},
            member_roles=[ADMIN_ROLE],
        )  # fmt: skip
        await record.wait_for(lambda r: bool(replies(r)))
        assert any("think" in str(m.embeds) for m in replies(record))


async def test_preview_is_ephemeral_and_exactly_the_post_buttons_included(
    fake: FakeDiscord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path, monkeypatch, fake)
    await sync_commands(settings.discord)
    async with running_bot(settings, clock=at(TODAY, 9)) as (service, adapter):
        issue = service.archive.on(TOMORROW)
        want = render(issue, discord_render, Part.ALL, options=adapter.post_options)
        record = await fake.run_slash_command(
            GUILD, CHANNELS[0], ADMIN_USER, "preview", {"date": str(TOMORROW)},
            member_roles=[ADMIN_ROLE],
        )  # fmt: skip
        await record.wait_for(lambda r: len(replies(r)) >= 1 + len(want))
        head, *post = replies(record)
        assert all(m.ephemeral for m in (head, *post))
        assert "预览" in head.content and issue.revision in head.content
        assert [m.embeds for m in post] == [
            [{"type": "rich", **e} for e in m.payload.get("embeds", [])] for m in want
        ]
        ids = [b["custom_id"] for row in post[-1].components for b in row["components"]]
        assert ids == [b["custom_id"] for b in want[-1].payload["components"][0]["components"]]
        assert all(fake.messages(c) == [] for c in CHANNELS)
        assert await service.ledger.records(limit=1) == []
        refused = await fake.run_slash_command(
            GUILD, CHANNELS[0], READER, "preview", {"date": str(TOMORROW)}
        )
        assert "只有管理员" in text(refused)


def _approval_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeDiscord) -> Any:
    make_settings(tmp_path, monkeypatch, fake, admin_users=[ALERTED])
    config = tmp_path / "digest-bot.toml"
    body = config.read_text(encoding="utf-8")
    config.write_text(body.replace("[schedule]\n", "[schedule]\nrequire_approval = true\n"))
    return load_settings(config)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_the_approval_gate_holds_alerts_and_a_late_approval_posts(
    fake: FakeDiscord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _approval_settings(tmp_path, monkeypatch, fake)
    await sync_commands(settings.discord)
    clock = at(TODAY, 6)
    async with running_bot(settings, clock=clock) as (service, _):
        sent = await service.publishing.review(TODAY)
        assert sent == {"discord": 1}
        review = dms(fake)
        assert "待批准" in review[0].content
        [row] = review[-1].components
        approve, hold = (b["custom_id"] for b in row["components"])
        assert approve.startswith(f"ac:approve {TODAY} ") and hold.startswith(f"ac:hold {TODAY} ")
        # approved, then the file changes: the approval is void at post time
        dm = review[-1].channel_id
        pressed = await fake.press_button(dm, review[-1].id, approve, ALERTED)
        await pressed.wait_for(lambda r: bool(replies(r)))
        assert "已批准" in text(pressed)
        path = tmp_path / "archive" / f"{TODAY}.txt"
        path.write_text(path.read_text(encoding="utf-8").replace("分页", "分頁", 1))
        service.archive.refresh(full=True)
        clock.advance(dt.timedelta(hours=2))
        before = len(dms(fake))
        await service.poster.run_due(TODAY)
        assert all(fake.messages(c) == [] for c in CHANNELS)
        alert = "\n".join(m.content for m in dms(fake)[before:])
        assert "等待批准" in alert and "批准作废" in alert
        # the old button is refused; a reader's press is refused too
        again = await fake.press_button(dm, review[-1].id, approve, ALERTED)
        await again.wait_for(lambda r: bool(replies(r)))
        assert "文件已经改过" in text(again)
        # a late approval of the current revision posts at once
        fresh = await service.publishing.review(TODAY)
        assert fresh == {"discord": 1}
        last = dms(fake)[-1]
        new_approve = last.components[0]["components"][0]["custom_id"]
        assert new_approve != approve
        pressed = await fake.press_button(last.channel_id, last.id, new_approve, ALERTED)
        await pressed.wait_for(lambda r: "立即推送" in text(r), within=10)
        assert all(len(fake.messages(c)) == 2 for c in CHANNELS)
        decisions = await service.ledger.audit_log(actions=["approve"])
        assert [d.allowed for d in decisions] == [True, False, True]
