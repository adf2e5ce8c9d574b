"""The per-user flood limit of the core, keyed by any platform's user ids."""

from __future__ import annotations

from digest_core.commands.flood import UserRateLimiter, Verdict
from digest_core.testing import ManualClock


def test_users_of_different_platforms_have_their_own_buckets() -> None:
    clock = ManualClock(autoadvance=False)
    limiter = UserRateLimiter(burst=2, window=4.0, clock=clock)
    assert [limiter.check(("a", "7")) for _ in range(4)] == [
        Verdict.ALLOW, Verdict.ALLOW, Verdict.WARN, Verdict.DROP
    ]  # fmt: skip
    assert limiter.check(("b", "7")) is Verdict.ALLOW  # same id, another platform
    assert limiter.check(7) is Verdict.ALLOW
    clock.advance(2.0)
    assert limiter.check(("a", "7")) is Verdict.ALLOW
    assert "2" in limiter.slow_down() and "4 s" in limiter.slow_down()
