"""The one answer to "what is new" for readers (issue #25): :meth:`Visibility.public` over the
embargo, with early publishes, held days and late releases."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from digest_core.publishing.embargo import Embargo
from digest_core.subscriptions.delivery import FOLLOW_WINDOW, Visibility
from digest_core.testing import ManualClock

SHANGHAI = ZoneInfo("Asia/Shanghai")
D26, D27, D28, D29 = (dt.date(2026, 11, d) for d in (26, 27, 28, 29))
DAYS = [D26, D27, D28, D29]


def at(day: dt.date, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=SHANGHAI)


def rule(now: dt.datetime) -> tuple[Embargo, Visibility, ManualClock]:
    clock = ManualClock(now.astimezone(dt.UTC), autoadvance=False)
    embargo = Embargo(zone=SHANGHAI, post_time=dt.time(8), clock=clock)
    return embargo, Visibility(embargo), clock


def public(visibility: Visibility, **when: dt.datetime) -> list[dt.date]:
    return list(visibility.public(DAYS, **when))


def test_an_early_publish_is_new_whatever_its_date() -> None:
    embargo, visibility, clock = rule(at(D27, 9))
    since = clock.now() - FOLLOW_WINDOW
    assert public(visibility) == [D27, D26]
    assert public(visibility, since=since) == [D27]  # the 26th came out 25 h ago
    # an admin publishes the 29th (two days ahead) at 20:00: public and new from then
    clock.advance(11 * 3600)
    assert embargo.published_early(D29, clock.now())
    assert public(visibility, since=since) == [D29, D27]
    assert public(visibility, at=at(D27, 19, 59), since=since) == [D27]
    # the 28th's own post time then makes it new too; the 27th drops out after 24 h
    assert public(visibility, at=at(D28, 8), since=at(D28, 8) - FOLLOW_WINDOW) == [
        D29,
        D28,
    ]
    assert public(visibility, at=at(D28, 8), since=at(D27, 20)) == [D28]


def test_a_held_day_is_not_public_until_released_and_is_new_from_then() -> None:
    embargo, visibility, clock = rule(at(D27, 7))
    assert embargo.hold(D27) and embargo.held(D27)
    clock.advance(2 * 3600)  # 09:00: its post time has passed, held still
    assert public(visibility) == [D26] and not embargo.visible(D27)
    assert "the editors have not released it" in embargo.not_yet(D27)
    assert embargo.latest_visible() == D26
    # released at 09:00 (a late approval's post): public from then, and new then
    assert embargo.release(D27, clock.now())
    assert embargo.publish_time(D27) == clock.now()
    assert public(visibility, since=at(D27, 8, 30)) == [D27]
    # a day later it is still new to a look back from then, though its post time is older
    # than the look back starts (the scan's early stop must not miss it)
    later = at(D28, 8, 30)
    assert public(visibility, at=later, since=at(D27, 8, 45)) == [D28, D27]
    assert not embargo.release(D27, clock.now())  # once
    assert not embargo.hold(D27)  # public: stays so


def test_an_early_publish_cannot_be_held() -> None:
    embargo, visibility, clock = rule(at(D27, 7))
    assert embargo.published_early(D28, clock.now())
    assert not embargo.hold(D28) and not embargo.held(D28)
    assert public(visibility) == [D28, D26]


def test_a_day_released_after_the_next_days_post_is_new_then() -> None:
    # the 26th, held, is approved only at 10:00 on the 27th (after the 27th came out)
    embargo, visibility, clock = rule(at(D26, 7))
    assert embargo.hold(D26)
    clock.advance(27 * 3600)
    assert public(visibility) == [D27]
    assert embargo.release(D26, clock.now())
    assert public(visibility, since=at(D27, 9)) == [D26]
    assert public(visibility, since=at(D27, 7)) == [D27, D26]
    assert public(visibility) == [D27, D26]
