"""The dashboard's ledger reads and counts (schema 11), on SQLite and PostgreSQL: counts add
up across batches, the audit log pages by who, what and day, the audience's history, and a
day's latest delivery per platform (its totals, its troubled targets first, its timeline)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.ledger.preferences import Format
from digest_core.errors import Rejected
from digest_core.platform import PlatformLimits, Rate, TargetKind
from digest_core.testing import (
    FakePlatform,
    ManualClock,
    make_issue,
    make_messages,
    make_targets,
)

DAY = dt.date(2026, 11, 27)
FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(dt.datetime(2026, 11, 27, 1, 0, tzinfo=dt.UTC))


async def test_counts_add_up_across_batches(ledger: Ledger) -> None:
    await ledger.add_engagement({(DAY, "telegram", "command", "today"): 2})
    await ledger.add_engagement({(DAY, "telegram", "command", "today"): 3,
                            (DAY, "discord", "section", "2026-11-27:briefs"): 1})  # fmt: skip
    await ledger.add_clicks({(DAY, "headline", 1, "telegram", DAY): 4})
    later = DAY + dt.timedelta(days=1)
    await ledger.add_clicks(
        {(DAY, "headline", 1, "telegram", DAY): 1, (DAY, "brief-2", 1, "discord", later): 2}
    )
    assert await ledger.engagement("command", since=DAY) == [(DAY, "telegram", "today", 5)]
    assert await ledger.engagement("section", since=DAY, prefix="2026-11-27:") == [
        (DAY, "discord", "2026-11-27:briefs", 1)
    ]
    assert await ledger.engagement("section", since=DAY, prefix="2026-11-2_:") == []  # no LIKE
    assert await ledger.clicks(issue=DAY) == [
        (DAY, "headline", 1, "telegram", 5),
        (DAY, "brief-2", 1, "discord", 2),
    ]
    assert await ledger.clicks(since=DAY + dt.timedelta(days=1)) == [
        (DAY, "brief-2", 1, "discord", 2)
    ]


async def test_the_audit_log_pages_by_who_what_and_day(ledger: Ledger, clock: ManualClock) -> None:
    for n in range(30):
        platform, action = ("dashboard", "repost") if n % 2 == 0 else ("telegram", "approve")
        await ledger.record_audit(platform, str(n % 3), action, allowed=True, outcome=str(n))
        clock.advance(3600)
    page = await ledger.audit_page(limit=10)
    assert [e.outcome for e in page] == [str(n) for n in range(29, 19, -1)]
    older = await ledger.audit_page(limit=10, before_id=page[-1].id)
    assert [e.outcome for e in older] == [str(n) for n in range(19, 9, -1)]
    mine = await ledger.audit_page(who="telegram:1", limit=50)
    assert {(e.platform, e.user_id) for e in mine} == {("telegram", "1")} and len(mine) == 5
    assert len(await ledger.audit_page(who="1", limit=50)) == 10  # any platform
    assert {e.action for e in await ledger.audit_page(action="approve", limit=50)} == {"approve"}
    since = dt.datetime(2026, 11, 27, 1, tzinfo=dt.UTC) + dt.timedelta(hours=24)
    day = await ledger.audit_page(since=since, until=since + dt.timedelta(hours=3), limit=50)
    assert [e.outcome for e in day] == ["26", "25", "24"]
    assert await ledger.audit_actions() == ["approve", "repost"]


async def test_the_audience_history(ledger: Ledger, clock: ManualClock) -> None:
    await ledger.subscribe("telegram", "1")
    await ledger.subscribe("discord", "9")  # came and went before the range: not in its base
    await ledger.unsubscribe("discord", "9")
    clock.advance(86400)
    await ledger.subscribe("telegram", "2")
    await ledger.subscribe("discord", "3")
    clock.advance(86400)
    await ledger.unsubscribe("telegram", "1")
    await ledger.set_preference("telegram", "2", at=dt.time(7, 30), format=Format.COMPACT)
    await ledger.follow("telegram", "2", "缓存")
    base, rows = await ledger.subscriber_days(since=DAY + dt.timedelta(days=1))
    assert base == {"telegram": 1}  # the first reader, there before the range
    assert rows == [
        ("discord", DAY + dt.timedelta(days=1), 1, 0),
        ("telegram", DAY + dt.timedelta(days=1), 1, 0),
        ("telegram", DAY + dt.timedelta(days=2), 0, 1),
    ]
    choices = await ledger.choices()
    assert ("telegram", "compact", 1) in choices["formats"]
    assert ("telegram", "07", 1) in choices["hours"]
    assert choices["follows"] == [("telegram", "", 1)]
    assert choices["words"] == [("telegram", "缓存", 1)]


async def test_a_days_latest_delivery_troubled_targets_first(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, name="telegram", limits=FAST)
    targets = make_targets(5, platform="telegram")
    platform.always(targets[3].id, Rejected("no"))
    engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
    issue = make_issue(DAY)
    await engine.deliver(issue.ref, platform, make_messages(2), targets)
    [latest] = await ledger.latest_deliveries(DAY)
    assert latest.platform == "telegram" and latest.done
    assert latest.totals["targets"] == 5 and latest.totals["sent"] == 8
    assert latest.totals["failed"] == 2 and latest.totals["pending"] == 0  # both its parts
    first = latest.targets[0]
    assert (
        first.target == targets[3].id
        and first.failed == 2
        and first.kind == TargetKind.PRIVATE.value
    )
    assert {t.target for t in latest.targets} == {t.id for t in targets}
    seconds = await ledger.timeline(latest.delivery_id)
    assert sum(n for _, n in seconds) == 8
    assert await ledger.latest_deliveries(DAY + dt.timedelta(days=1)) == []


async def test_deactivations_counted_by_reason(ledger: Ledger, clock: ManualClock) -> None:
    blocked = "TargetGone: Forbidden: bot was blocked by the user"
    chats = make_targets(4, platform="telegram")
    for target in chats[:3]:
        await ledger.subscribe("telegram", target.id)
    await ledger.mark_gone(chats[0], reason=blocked)
    clock.advance(86400)
    since = clock.now()
    await ledger.mark_gone(chats[1], reason=blocked)
    await ledger.mark_gone(chats[2], reason=blocked)
    await ledger.mark_gone(chats[3], reason="TargetGone: Bad Request: chat not found")
    await ledger.move_target(chats[3], make_targets(5, platform="telegram")[4])
    await ledger.reactivate(chats[2])  # back: no longer counted
    assert await ledger.deactivation_reasons(since=since) == [
        ("telegram", blocked, False, 1),
        ("telegram", "moved to " + make_targets(5, platform="telegram")[4].id, True, 1),
    ]
