"""The daily post's decisions: catch-up window, late files, deadline, DST, never twice."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from zoneinfo import ZoneInfo

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from digest_core.errors import DeliveryBusy
from digest_core.publishing.schedule import JOB_ID, DailyPoster, Outcome, PostState, ScheduleConfig
from digest_core.testing import ManualClock

SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")


class World:
    """The poster's callbacks over plain data: which files exist, what the ledger says."""

    def __init__(self, clock: ManualClock, *, zone: dt.tzinfo = SHANGHAI, at: str = "08:00"):
        self.files: set[dt.date] = set()
        self.states: dict[dt.date, PostState] = {}
        self.posted: list[dt.date] = []
        self.alerts: list[str] = []
        hour, minute = map(int, at.split(":"))
        self.poster = DailyPoster(
            ScheduleConfig(zone=zone, post_time=dt.time(hour, minute)),
            clock=clock,
            has_issue=lambda d: d in self.files,
            state=self._state,
            post=self._post,
            alert=self._alert,
        )

    async def _state(self, day: dt.date) -> PostState:
        return self.states.get(day, PostState.NONE)

    async def _post(self, day: dt.date) -> None:
        self.posted.append(day)
        self.states[day] = PostState.DONE

    async def _alert(self, text: str) -> None:
        self.alerts.append(text)


def clock_at(local: str, zone: dt.tzinfo = SHANGHAI) -> ManualClock:
    naive = dt.datetime.fromisoformat(local)
    return ManualClock(naive.replace(tzinfo=zone).astimezone(dt.UTC), autoadvance=False)


DAY = dt.date(2026, 11, 30)


async def test_posts_today_once_even_when_triggered_twice() -> None:
    w = World(clock_at("2026-11-30 08:00"))
    w.files.add(DAY)
    assert await w.poster.run_due() is Outcome.POSTED
    assert await w.poster.run_due() is Outcome.ALREADY
    assert w.posted == [DAY]


async def test_missing_file_waits_then_gives_up_at_deadline_and_alerts() -> None:
    clock = clock_at("2026-11-30 08:00")
    w = World(clock)
    w.files.add(DAY - dt.timedelta(days=1))  # yesterday's issue exists; must not be posted
    assert await w.poster.run_due() is Outcome.WAITING
    clock.advance(3 * 3600)
    assert await w.poster.run_due(DAY) is Outcome.WAITING
    clock.advance(3600)  # 12:00, the 4 h deadline
    assert await w.poster.run_due(DAY) is Outcome.GAVE_UP
    assert w.posted == []
    assert len(w.alerts) == 1 and str(DAY) in w.alerts[0]


async def test_late_file_is_posted_when_it_arrives_before_the_deadline() -> None:
    clock = clock_at("2026-11-30 08:00")
    w = World(clock)
    assert await w.poster.run_due() is Outcome.WAITING
    clock.advance(600)
    w.files.add(DAY)
    assert await w.poster.run_due(DAY) is Outcome.POSTED
    assert w.posted == [DAY]


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        ("2026-11-30 07:59", []),  # not due yet: the cron will do it
        ("2026-11-30 09:30", [(DAY, Outcome.POSTED)]),  # 1.5 h late: within 6 h
        ("2026-11-30 14:00", [(DAY, Outcome.POSTED)]),  # exactly 6 h
        ("2026-11-30 14:01", [(DAY, Outcome.MISSED)]),  # beyond the window: reported only
    ],
)
async def test_catch_up_window(now: str, expected: list[tuple[dt.date, Outcome]]) -> None:
    w = World(clock_at(now))
    w.files.add(DAY)
    assert await w.poster.catch_up() == expected
    assert w.posted == [d for d, o in expected if o is Outcome.POSTED]
    if any(o is Outcome.MISSED for _, o in expected):
        assert w.alerts and "/repost 2026-11-30" in w.alerts[0]
        assert w.poster.notes


async def test_catch_up_never_repeats_a_post_in_the_ledger() -> None:
    w = World(clock_at("2026-11-30 09:00"))
    w.files.add(DAY)
    w.states[DAY] = PostState.DONE
    assert await w.poster.catch_up() == []
    assert w.posted == []


async def test_catch_up_resumes_a_partial_post_within_the_window() -> None:
    w = World(clock_at("2026-11-30 09:00"))
    w.files.add(DAY)
    w.states[DAY] = PostState.PARTIAL
    assert await w.poster.catch_up() == [(DAY, Outcome.POSTED)]


async def test_catch_up_shortly_after_midnight_covers_yesterday() -> None:
    # post_time 23:30; restarted at 00:10 the next day: yesterday's post is 40 min late
    w = World(clock_at("2026-12-01 00:10"), at="23:30")
    w.files.add(DAY)
    assert await w.poster.catch_up() == [(DAY, Outcome.POSTED)]


def test_post_at_on_dst_days() -> None:
    w = World(ManualClock(autoadvance=False), zone=BERLIN, at="02:30")
    # spring forward (2026-03-29): 02:30 does not exist; due at 03:30 CEST, like the cron
    spring = w.poster.post_at(dt.date(2026, 3, 29))
    assert spring.astimezone(dt.UTC) == dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)
    # fall back (2026-10-25): 02:30 happens twice; the first one counts
    fall = w.poster.post_at(dt.date(2026, 10, 25))
    assert fall.astimezone(dt.UTC) == dt.datetime(2026, 10, 25, 0, 30, tzinfo=dt.UTC)


async def test_dst_fall_back_double_fire_posts_once() -> None:
    day = dt.date(2026, 10, 25)
    clock = ManualClock(dt.datetime(2026, 10, 25, 0, 30, tzinfo=dt.UTC), autoadvance=False)
    w = World(clock, zone=BERLIN, at="02:30")
    w.files.add(day)
    assert await w.poster.run_due() is Outcome.POSTED
    clock.advance(3600)  # 02:30 again, now CET: APScheduler fires a second time
    assert clock.now().astimezone(BERLIN).date() == day
    assert await w.poster.run_due() is Outcome.ALREADY
    assert w.posted == [day]


async def test_installed_cron_job_fires_at_post_time_in_the_zone() -> None:
    w = World(ManualClock(autoadvance=False), zone=BERLIN, at="02:30")
    scheduler = AsyncIOScheduler(timezone=BERLIN)
    w.poster.install(scheduler)
    job = scheduler.get_job(JOB_ID)
    assert job is not None
    trigger = job.trigger
    before_spring = dt.datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN)
    spring = trigger.get_next_fire_time(None, before_spring)
    assert spring.astimezone(dt.UTC) == dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)
    summer = trigger.get_next_fire_time(spring, spring + dt.timedelta(seconds=1))
    assert summer.astimezone(dt.UTC) == dt.datetime(2026, 3, 30, 0, 30, tzinfo=dt.UTC)
    # re-installing replaces the job instead of adding a second one
    w.poster.install(scheduler)
    assert len(scheduler.get_jobs()) == 1


def test_next_post_is_today_before_post_time_and_tomorrow_after() -> None:
    w = World(clock_at("2026-11-30 07:00"))
    assert w.poster.next_post() == dt.datetime(2026, 11, 30, 8, 0, tzinfo=SHANGHAI)
    w2 = World(clock_at("2026-11-30 08:00"))
    assert w2.poster.next_post() == dt.datetime(2026, 12, 1, 8, 0, tzinfo=SHANGHAI)


async def test_first_start_reports_nothing_older_than_the_window() -> None:
    w = World(clock_at("2026-11-30 20:00"))
    w.files.update({DAY, DAY - dt.timedelta(days=1)})
    assert await w.poster.catch_up(report_missed=False) == []
    assert w.alerts == [] and w.posted == []


async def test_a_trigger_running_late_past_midnight_posts_the_due_day() -> None:
    # a 23:30 post whose trigger only runs at 00:10 is still the previous day's post
    w = World(clock_at("2026-12-01 00:10"), at="23:30")
    w.files.update({DAY, DAY + dt.timedelta(days=1)})
    assert await w.poster.run_due() is Outcome.POSTED
    assert w.posted == [DAY]


async def test_another_process_delivering_means_look_again_later() -> None:
    clock = clock_at("2026-11-30 08:00")
    w = World(clock)
    w.files.add(DAY)

    async def busy(day: dt.date) -> None:
        raise DeliveryBusy("telegram", holder="other:1:x", expires_at=clock.now())

    w.poster._post = busy
    assert await w.poster.run_due() is Outcome.WAITING
    assert w.alerts == []


async def test_stop_ends_a_trigger_still_running() -> None:
    w = World(clock_at("2026-11-30 08:00"))
    w.files.add(DAY)
    never = asyncio.Event()

    async def stuck_state(day: dt.date) -> PostState:
        await never.wait()  # e.g. a ledger query when shutdown begins
        return PostState.NONE

    w.poster._state = stuck_state
    trigger = asyncio.create_task(w.poster._triggered())
    await asyncio.sleep(0.01)
    await asyncio.wait_for(w.poster.stop(), 1)
    assert trigger.cancelled() and w.posted == []


async def test_a_shutdown_during_a_scheduled_post_ends_its_job_without_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """APScheduler logs whatever a job raises, a cancellation too, as an ERROR with its
    traceback: every SIGTERM during a scheduled post printed one (the fault suite's
    sigterm-rerun). The job the scheduler runs ends quietly when :meth:`stop` cuts it short."""
    caplog.set_level(logging.INFO, logger="digest_core.publishing.schedule")
    w = World(clock_at("2026-11-30 08:00"))
    w.files.add(DAY)
    asked = asyncio.Event()
    never = asyncio.Event()

    async def stuck_state(day: dt.date) -> PostState:
        asked.set()
        await never.wait()  # a post under way when shutdown begins
        return PostState.NONE

    w.poster._state = stuck_state
    scheduler = AsyncIOScheduler(timezone=SHANGHAI)
    w.poster.install(scheduler)
    scheduler.start()
    try:
        job = scheduler.get_job(JOB_ID)
        assert job is not None
        job.modify(next_run_time=dt.datetime.now(SHANGHAI))  # due now
        scheduler.wakeup()
        await asyncio.wait_for(asked.wait(), 5)
        await asyncio.wait_for(w.poster.stop(), 1)
        # the job's end is reported by the scheduler's own task: let it run
        for _ in range(3):
            await asyncio.sleep(0)
    finally:
        scheduler.shutdown(wait=False)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert any("stopped by the shutdown" in r.getMessage() for r in caplog.records)
    assert w.posted == []
