"""The key the engine gives ``Platform.send``: the ledger row's identity, stable across runs."""

from __future__ import annotations

import random
from pathlib import Path

from digest_core.delivery import Backoff, DeliveryEngine, Ledger
from digest_core.errors import TransientError
from digest_core.platform import PartKey, PlatformLimits, Rate, Target
from digest_core.testing import FakePlatform, ManualClock, make_issue, make_messages

REF = make_issue().ref
PARTS = make_messages(2)
FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})
A, B = Target("fake", "a"), Target("fake", "b")


def engine_for(ledger: Ledger, clock: ManualClock) -> DeliveryEngine:
    backoff = Backoff(base=0.01, cap=0.01, max_attempts=3)
    return DeliveryEngine(ledger, clock=clock, rng=random.Random(1), backoff=backoff)


def keys_by_call(platform: FakePlatform) -> list[tuple[str, PartKey | None]]:
    return [(t.id, k) for (t, _, _), k in zip(platform.calls, platform.keys, strict=True)]


async def test_every_send_names_its_part_and_a_retry_names_the_same(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    platform.script("b", TransientError("timeout", platform="fake", target="b"))
    report = await engine_for(ledger, clock).deliver(REF, platform, PARTS, [A, B])
    assert report.ok
    calls = keys_by_call(platform)
    expected = {t.id: [PartKey(REF.date, REF.revision, 1, t, p) for p in (0, 1)] for t in (A, B)}
    assert [k for t, k in calls if t == "a"] == expected["a"]
    # the failed attempt and its retry carry the same key (the row's), then part 1's
    assert [k for t, k in calls if t == "b"] == [expected["b"][0], *expected["b"]]


async def test_a_forced_repost_is_a_new_generation_so_new_keys(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = FakePlatform(clock, limits=FAST)
    engine = engine_for(ledger, clock)
    await engine.deliver(REF, platform, PARTS, [A])
    await engine.deliver(REF, platform, PARTS, [A], force=True)
    keys = [k for _, k in keys_by_call(platform)]
    assert [(k.generation, k.part) for k in keys if k is not None] == [
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]


async def test_a_rerun_resumes_a_part_left_in_flight_under_its_key(
    ledger_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    url = ledger_url
    # a run that died with part 0 of "a" in flight: claimed, never marked
    async with Ledger.open(url, clock=clock) as dead:
        plan = await dead.plan(REF, "fake", [A], len(PARTS))
        [row, _] = plan.targets[0].parts
        assert await dead.claim(row.id)
    platform = FakePlatform(clock, limits=FAST)
    async with Ledger.open(url, clock=clock, owner="second") as ledger:
        report = await engine_for(ledger, clock).deliver(REF, platform, PARTS, [A])
    assert report.ok
    assert platform.keys == [PartKey(REF.date, REF.revision, 1, A, p) for p in (0, 1)]
