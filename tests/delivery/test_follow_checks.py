"""The ledger's record of the issues considered for follows (issue #25), on SQLite and
PostgreSQL: once per (platform, issue date), kept across a restart."""

from __future__ import annotations

import datetime as dt

from digest_core.delivery import Ledger
from digest_core.testing import ManualClock

D27, D28 = dt.date(2026, 11, 27), dt.date(2026, 11, 28)


async def test_an_issue_considered_for_follows_is_recorded_once(ledger_url: str) -> None:
    clock = ManualClock(dt.datetime(2026, 11, 27, 1, tzinfo=dt.UTC), autoadvance=False)
    async with Ledger.open(ledger_url, clock=clock) as ledger:
        assert await ledger.follows_checked("telegram", [D27, D28]) == set()
        assert await ledger.check_follows("telegram", D27, "rev1")
        assert not await ledger.check_follows("telegram", D27, "rev2")  # a correction: once
        assert await ledger.check_follows("discord", D28, "rev1")  # per platform
        assert await ledger.follows_checked("telegram", [D27, D28]) == {D27}
        assert await ledger.follows_checked("telegram", []) == set()
    async with Ledger.open(ledger_url, clock=clock) as ledger:  # a restart remembers
        assert await ledger.follows_checked("discord", [D27, D28]) == {D28}
        assert await ledger.follows_checked("telegram", [D27]) == {D27}
