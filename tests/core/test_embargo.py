"""The embargo rule and its archive view, and the editor's day on the console (issue #10)."""

from __future__ import annotations

import datetime as dt
import io
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.archive import Archive
from digest_core.commands import ADMIN, Request, Status
from digest_core.errors import IssueNotFound
from digest_core.publishing.embargo import Embargo
from digest_core.rendering import preview
from digest_core.service.root import DigestService
from digest_core.testing import ManualClock
from tests.samples import SAMPLE_ARCHIVE

SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY = dt.date(2026, 11, 27)


def at(day: dt.date, hour: int, minute: int = 0, zone: dt.tzinfo = SHANGHAI) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone).astimezone(dt.UTC)


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    folder = tmp_path / "archive"
    shutil.copytree(SAMPLE_ARCHIVE, folder)
    return Archive(folder, index=False)


def test_publish_time_is_the_post_time_or_an_earlier_early_publish() -> None:
    clock = ManualClock(at(DAY, 7), autoadvance=False)
    embargo = Embargo(zone=SHANGHAI, post_time=dt.time(8), clock=clock)
    assert embargo.publish_time(DAY) == at(DAY, 8)
    assert not embargo.visible(DAY) and embargo.visible(DAY, admin=True)
    assert embargo.visible(DAY - dt.timedelta(days=1))
    assert embargo.latest_visible() == DAY - dt.timedelta(days=1)
    assert embargo.published_early(DAY, clock.now())
    assert embargo.visible(DAY) and embargo.latest_visible() == DAY
    assert not embargo.published_early(DAY, clock.now() + dt.timedelta(minutes=1))  # no later
    clock.advance(3600 * 2)
    assert not embargo.published_early(DAY, clock.now())  # public already: not early


def test_a_post_time_skipped_by_dst_publishes_when_the_cron_fires() -> None:
    zone = ZoneInfo("America/New_York")
    spring = dt.date(2026, 3, 8)  # 02:00 → 03:00
    clock = ManualClock(at(spring, 3, 15, zone), autoadvance=False)
    embargo = Embargo(zone=zone, post_time=dt.time(2, 30), clock=clock)
    assert embargo.publish_time(spring).astimezone(zone).hour == 3
    assert not embargo.visible(spring)
    clock.advance(30 * 60)
    assert embargo.visible(spring)


def test_the_view_holds_back_embargoed_days_everywhere(archive: Archive) -> None:
    clock = ManualClock(at(DAY, 9), autoadvance=False)
    embargo = Embargo(zone=SHANGHAI, post_time=dt.time(8), clock=clock)
    reader, admin = embargo.view(archive), embargo.view(archive, admin=True)
    tomorrow, after = DAY + dt.timedelta(days=1), DAY + dt.timedelta(days=2)
    assert reader.latest().date == DAY and admin.latest().date == max(archive.dates())
    with pytest.raises(IssueNotFound, match="还没有发布"):
        reader.on(tomorrow)
    assert reader.dates()[-1] == DAY and [e.date for e in reader.list()][-1] == DAY
    assert reader.search("提示词模板") == [] and admin.search("提示词模板")
    # an admin published the day after tomorrow early: tomorrow stays embargoed
    embargo.published_early(after, clock.now())
    assert reader.latest().date == after
    assert reader.latest(on_or_before=tomorrow).date == DAY  # skips the embargoed gap
    assert tomorrow not in reader.dates() and after in reader.dates()
    with pytest.raises(IssueNotFound):
        reader.on(tomorrow)
    assert all(hit.date != tomorrow for hit in reader.search("模型", limit=50))
    assert reader.search("提示词模板") == []


def test_a_missing_day_never_names_an_embargoed_one_as_the_nearest(archive: Archive) -> None:
    (archive.root / f"{DAY}.txt").unlink()
    archive.refresh(full=True)
    embargo = Embargo(zone=SHANGHAI, post_time=dt.time(8), clock=ManualClock(at(DAY, 9)))
    with pytest.raises(IssueNotFound) as caught:
        embargo.view(archive).on(DAY)
    assert "2026-11-26" in str(caught.value) and "2026-11-28" not in str(caught.value)
    with pytest.raises(IssueNotFound, match="2026-11-28"):
        embargo.view(archive, admin=True).on(DAY)


def test_neighbours_skip_embargoed_and_broken_days(archive: Archive) -> None:
    clock = ManualClock(at(DAY, 9), autoadvance=False)
    embargo = Embargo(zone=SHANGHAI, post_time=dt.time(8), clock=clock)
    reader, admin = embargo.view(archive), embargo.view(archive, admin=True)
    before, tomorrow = DAY - dt.timedelta(days=1), DAY + dt.timedelta(days=1)
    assert reader.neighbours(DAY) == (before, None)  # 11-28 exists but is embargoed
    assert admin.neighbours(DAY) == (before, tomorrow)
    assert reader.neighbours(before) == (None, DAY)
    # the day after tomorrow published early: tomorrow (still embargoed) is stepped over
    after = DAY + dt.timedelta(days=2)
    embargo.published_early(after, clock.now())
    assert reader.neighbours(DAY) == (before, after)
    # a file that never loaded is no neighbour (one that broke later serves its last good
    # version, as the archive does): the next served one is
    broken = before - dt.timedelta(days=1)
    (archive.root / f"{broken}.txt").write_text("not an issue\n", encoding="utf-8")
    archive.refresh(full=True)
    assert archive.entries()[0][0] == broken
    assert admin.neighbours(before) == (None, DAY)
    assert admin.neighbours(broken) == (None, before)


# ---------------------------------------------------------------- the console


@pytest.fixture
async def console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[DigestService, io.StringIO, ManualClock]]:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    folder = tmp_path / "archive"
    shutil.copytree(SAMPLE_ARCHIVE, folder)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{folder}"\ndatabase_url = "sqlite+aiosqlite:///{tmp_path}/l.db"\n'
        '[schedule]\npost_time = "08:00"\nrequire_approval = true\nreview_time = "06:30"\n',
        encoding="utf-8",
    )
    settings = load_settings(cfg)
    assert settings.schedule.before_post(settings.schedule.review_time, default_hours=2) == (
        dt.timedelta(minutes=90)
    )
    out = io.StringIO()
    clock = ManualClock(at(DAY, 7), autoadvance=False)
    async with open_service(settings, clock=clock, out=out) as service:
        yield service, out, clock


def _req(command: str, *args: str, admin: bool = True) -> Request:
    return Request(
        command, args, platform="console", user="op", capabilities=ADMIN if admin else frozenset()
    )


async def test_the_editors_day_on_the_console(
    console: tuple[DigestService, io.StringIO, ManualClock],
) -> None:
    service, out, clock = console
    # the review: the preview and the commands to type
    assert await service.publishing.review(DAY) == {"console": 1}
    assert f"/approve {DAY} " in out.getvalue() and "待批准" in out.getvalue()
    # a reader cannot preview; the operator can, and sees the post
    refused = await service.commands.handle(_req("preview", str(DAY), admin=False))
    assert refused.status is Status.REFUSED
    shown = await service.commands.handle(_req("preview", str(DAY)))
    assert "KV 缓存为什么要分页" in "\n".join(
        preview(m, service.platforms["console"].flavor) for m in shown.messages
    )
    # post time without approval: held, alerted, nothing posted
    clock.advance(3600)
    await service.poster.run_due(DAY)
    assert "⚠ alert" in out.getvalue() and "等待批准" in out.getvalue()
    assert await service.post_state(DAY) == "none"
    # approving late posts at once
    reply = await service.commands.handle(_req("approve", str(DAY)))
    assert "立即推送" in preview(reply.messages[0], service.platforms["console"].flavor)
    assert await service.post_state(DAY) == "done"
    [status_reply] = (await service.commands.handle(_req("status"))).messages
    assert f"{DAY + dt.timedelta(days=1)}: 就绪，待批准" in str(status_reply.payload)


async def test_review_and_missing_alert_jobs_and_reminders_of_a_held_post(
    console: tuple[DigestService, io.StringIO, ManualClock],
) -> None:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    service, out, clock = console
    scheduler = AsyncIOScheduler(timezone=SHANGHAI)
    service.publishing.install(scheduler)
    fields = {
        job.id: {f.name: str(f) for f in job.trigger.fields}
        for job in scheduler.get_jobs()
        if job.id in ("review", "missing-alert")
    }
    assert scheduler.get_job("embargo-refresh") is not None  # other processes' early publishes
    assert (fields["review"]["hour"], fields["review"]["minute"]) == ("6", "30")
    assert (fields["missing-alert"]["hour"], fields["missing-alert"]["minute"]) == ("5", "0")
    clock.advance(3600)  # 08:00, unapproved
    assert not await service.publishing.gate(DAY)
    [reminder] = [j for j in scheduler.get_jobs() if j.id == f"held-{DAY}"]
    assert reminder.trigger.run_date == clock.now() + dt.timedelta(minutes=30)
    alerts = out.getvalue().count("等待批准")
    assert await service.publishing.remind(DAY)  # still held: alerted again
    assert out.getvalue().count("等待批准") == alerts + 1
    await service.commands.handle(_req("approve", str(DAY)))
    assert not await service.publishing.remind(DAY)  # approved (and posted): no more
