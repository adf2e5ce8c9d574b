"""The Resumer on a manual clock: waiting posts tried with capped backoff inside the day's
catch-up window (admins told once at its end), alerts queued until a platform takes them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from digest_core.delivery import DeliveryReport, TargetReport
from digest_core.delivery.resuming import Resumer
from digest_core.errors import TransientError
from digest_core.platform import Target, TargetKind
from digest_core.publishing.schedule import PostState
from digest_core.testing import ManualClock, make_issue

DAY = dt.date(2026, 11, 27)
POST_AT = dt.datetime(2026, 11, 27, 0, 0, tzinfo=dt.UTC)
WINDOW = dt.timedelta(hours=1)
TARGET = Target("fake", "c0", TargetKind.CHANNEL)


class Day:
    """A day whose post keeps leaving one part waiting (the platform is down) until ``up``."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.posts: list[dt.datetime] = []
        self.alerts: list[str] = []
        self.up = False

    async def state(self, day: dt.date) -> PostState:
        if day != DAY:  # yesterday's post was done
            return PostState.DONE
        return PostState.DONE if self.up and self.posts else PostState.PARTIAL

    async def post(self, day: dt.date) -> Sequence[DeliveryReport]:
        self.posts.append(self.clock.now())
        waiting = 0 if self.up else 1
        due = None if self.up else self.clock.now()
        errors = () if self.up else ("part 0: TransientError: down; due at …",)
        report = TargetReport(TARGET, sent=1 - waiting, waiting=waiting, due=due, errors=errors)
        return [DeliveryReport(make_issue().ref, "fake", 1, 1, [report], [])]

    async def waiting(self, day: dt.date) -> Sequence[tuple[str | None, str]]:
        return [("TransientError: down; due at 2026-11-27T00:00:00+00:00", "c0")]

    async def alert(self, text: str) -> None:
        self.alerts.append(text)


def resumer_for(
    clock: ManualClock, day: Day, send_alert: object = None, *, busy: bool = False
) -> Resumer:
    async def refuse(platform: str, text: str) -> None:
        raise TransientError("unreachable", platform=platform)

    return Resumer(
        clock=clock,
        window=lambda d: (POST_AT + (d - DAY), POST_AT + (d - DAY) + WINDOW),
        today=lambda: DAY,
        state=day.state,
        post=day.post,
        waiting=day.waiting,
        busy=lambda d: busy,
        send_alert=send_alert or refuse,  # type: ignore[arg-type]
        alert=day.alert,
        base=1.0,
        cap=30.0,
    )


async def _ticks(resumer: Resumer, clock: ManualClock, until: dt.datetime) -> None:
    """Run the resumer's ticks, the clock jumping to each next wake, until ``until``."""
    while clock.now() < until:
        await resumer.tick()
        clock.advance(max(resumer._next_wake(), 0.5))


async def test_a_waiting_post_is_tried_with_capped_backoff_until_it_completes() -> None:
    clock = ManualClock(POST_AT + dt.timedelta(minutes=5))
    day = Day(clock)
    resumer = resumer_for(clock, day)
    await _ticks(resumer, clock, POST_AT + dt.timedelta(minutes=20))
    gaps = [(b - a).total_seconds() for a, b in zip(day.posts, day.posts[1:], strict=False)]
    assert len(day.posts) > 5
    assert gaps == sorted(gaps) and max(gaps) <= 30.0 + 0.5  # exponential, capped
    assert resumer.days[DAY].parts == 1 and "down" in resumer.describe(dt.UTC)[0]
    day.up = True
    await _ticks(resumer, clock, clock.now() + dt.timedelta(seconds=31))
    assert DAY not in resumer.days and resumer.describe(dt.UTC) == []
    assert day.alerts == []


async def test_at_the_end_of_the_window_admins_are_told_once_and_retries_stop() -> None:
    clock = ManualClock(POST_AT + dt.timedelta(minutes=50))
    day = Day(clock)
    resumer = resumer_for(clock, day)
    await _ticks(resumer, clock, POST_AT + WINDOW + dt.timedelta(minutes=5))
    [told] = day.alerts
    assert "catch-up window" in told and f"/repost {DAY}" in told
    assert all(at <= POST_AT + WINDOW for at in day.posts)


async def test_an_alert_nobody_got_is_queued_and_sent_once_the_platform_answers() -> None:
    clock = ManualClock(POST_AT)
    day = Day(clock)
    day.up = True
    got: list[str] = []
    down = True

    async def send(platform: str, text: str) -> None:
        if down:
            raise TransientError("connection refused", platform=platform)
        got.append(text)

    resumer = resumer_for(clock, day, send)
    resumer.queue_alert("fake", "the ledger answers again", "connection refused")
    await _ticks(resumer, clock, POST_AT + dt.timedelta(seconds=20))
    assert got == [] and len(resumer.alerts) == 1
    assert "alert queued for fake admins" in resumer.describe(dt.UTC)[0]
    down = False
    await _ticks(resumer, clock, clock.now() + dt.timedelta(seconds=31))
    assert got == ["the ledger answers again"] and resumer.alerts == []


async def test_a_day_being_posted_here_is_left_to_that_post_and_looked_at_later() -> None:
    clock = ManualClock(POST_AT + dt.timedelta(minutes=5))
    day = Day(clock)
    resumer = resumer_for(clock, day, busy=True)  # the day's post runs in this process
    await resumer.tick()
    assert day.posts == [] and resumer._next_wake() >= resumer.delay(0)
