"""WeCom through the core's delivery engine and a real SQLite ledger, against the double.

The registry that will make the service render with this platform's renderer is not there
yet; the engine takes rendered messages, so these tests drive it directly: pacing under the
documented rate, a frequency code deferring one target, and a rerun sending only what is
missing.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bots.wecom.adapter import WeComAdapter
from bots.wecom.settings import WeComSettings
from bots.wecom.spec import WECOM_LIMITS
from digest_core.clock import SystemClock
from digest_core.delivery import Backoff, DeliveryEngine
from digest_core.delivery.ledger import Ledger
from digest_core.loading import load_issue
from digest_core.testing import scaled_limits
from tests.bots.workchat_helpers import ARCHIVE
from tests.fakes.proxy import FaultProxy
from tests.fakes.wecom_api import FakeWeCom

#: the double's windows and the adapter's rates run 60 times faster: "20 a minute" is
#: "20 a second", so the tests take a moment, not minutes
SCALE = 60.0
NAMES = ("ai-team", "research")


@pytest.fixture
async def wecom() -> AsyncIterator[FakeWeCom]:
    async with FakeWeCom(scale=SCALE) as fake:
        for n, name in enumerate(NAMES):
            fake.add_robot(name, f"key-{name}-{n:04d}")
        yield fake


def adapter_for(fake: FakeWeCom, *, api_base: str | None = None) -> WeComAdapter:
    settings = WeComSettings(
        targets=list(NAMES),
        webhooks={robot.name: SecretStr(robot.token) for robot in fake.robots.values()},
        api_base=api_base or fake.url,
    )
    return WeComAdapter(
        settings, clock=SystemClock(), limits=scaled_limits(WECOM_LIMITS, SCALE), time_scale=SCALE
    )


def engine_for(ledger: Ledger) -> DeliveryEngine:
    backoff = Backoff(base=0.01, cap=0.05, max_attempts=3)
    return DeliveryEngine(ledger, clock=SystemClock(), rng=random.Random(1), backoff=backoff)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_long_issue_reaches_every_group_paced_under_the_limit(
    wecom: FakeWeCom, tmp_path: Path
) -> None:
    issue = load_issue(ARCHIVE / "2026-11-27.txt")  # the longest bundled issue
    adapter = adapter_for(wecom)
    # more parts than the window allows (20), so only pacing keeps them from 45009
    messages = adapter.render(issue) + [adapter.notice(f"补充 {n}")[0] for n in range(18)]
    assert len(messages) == 25
    url = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
    async with Ledger.open(url, clock=SystemClock()) as ledger, adapter:
        report = await engine_for(ledger).deliver(
            issue.ref, adapter, messages, adapter.channel_targets()
        )
    assert report.ok and report.sent == len(messages) * len(NAMES)
    for name in NAMES:
        assert wecom.sent(name) == [m.payload for m in messages]
    assert [code for _, code in wecom.answers] == [0] * len(messages) * len(NAMES)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_frequency_code_defers_only_its_group(wecom: FakeWeCom, tmp_path: Path) -> None:
    issue = load_issue(ARCHIVE / "2026-11-30.txt")
    adapter = adapter_for(wecom)
    messages = adapter.render(issue)
    wecom.fail_next("research", "rate_limited")  # someone else's posts used the robot's minute
    async with (
        Ledger.open(f"sqlite+aiosqlite:///{tmp_path}/ledger.db", clock=SystemClock()) as ledger,
        adapter,
    ):
        report = await engine_for(ledger).deliver(
            issue.ref, adapter, messages, adapter.channel_targets()
        )
    assert report.ok
    assert (("research", 45009)) in wecom.answers
    for name in NAMES:
        assert wecom.sent(name) == [m.payload for m in messages]


async def test_an_answer_cut_after_the_post_arrived_is_counted_possibly_twice(
    wecom: FakeWeCom, tmp_path: Path
) -> None:
    """The connection reset after the webhook got the message (a real proxy cuts the
    answer): the outcome is unknown, so the resend is counted as possibly twice."""
    issue = load_issue(ARCHIVE / "2026-11-30.txt")
    async with FaultProxy(wecom.port) as proxy:
        adapter = adapter_for(wecom, api_base=proxy.url)
        messages = adapter.render(issue)
        proxy.cut_answers(1, only=b"POST")
        url = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
        async with Ledger.open(url, clock=SystemClock()) as ledger, adapter:
            report = await engine_for(ledger).deliver(
                issue.ref, adapter, messages, adapter.channel_targets()
            )
    assert proxy.cut == 1 and report.ok
    assert report.maybe_twice == 1
    got = [len(wecom.sent(name)) for name in NAMES]
    assert sorted(got) == [len(messages), len(messages) + 1]  # the one duplicate, counted


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_rerun_sends_only_what_is_missing(wecom: FakeWeCom, tmp_path: Path) -> None:
    issue = load_issue(ARCHIVE / "2026-11-27.txt")
    url = f"sqlite+aiosqlite:///{tmp_path}/ledger.db"
    adapter = adapter_for(wecom)
    messages = adapter.render(issue)
    # the first run sends two parts; the second finds "research" failing on every attempt
    async with Ledger.open(url, clock=SystemClock()) as ledger, adapter:
        engine = engine_for(ledger)
        first = await engine.deliver(issue.ref, adapter, messages[:2], adapter.channel_targets())
        assert first.ok
        wecom.fail_next("research", "server_error", count=100)
        second = await engine.deliver(issue.ref, adapter, messages, adapter.channel_targets())
        assert not second.ok
    assert len(wecom.sent("research")) == 2
    wecom.clear_faults()
    # a new process (a new ledger on the same file) sends the rest, each part once
    async with (
        Ledger.open(url, clock=SystemClock(), owner="second") as ledger,
        adapter_for(wecom) as again,
    ):
        third = await engine_for(ledger).deliver(
            issue.ref, again, messages, again.channel_targets()
        )
    assert third.ok
    for name in NAMES:
        assert wecom.sent(name) == [m.payload for m in messages]
