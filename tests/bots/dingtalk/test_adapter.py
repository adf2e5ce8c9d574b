"""The DingTalk adapter end to end: real httpx against the loopback double, errors translated."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from bots.dingtalk.adapter import DingTalkAdapter
from bots.dingtalk.settings import DingTalkSettings
from bots.dingtalk.spec import DINGTALK_LIMITS
from digest_core.errors import TargetGone
from digest_core.models import Issue, Item
from digest_core.platform import Platform, Target, TargetKind
from digest_core.rendering import Message
from tests.bots.workchat_helpers import NOW, clock, load_golden_issue
from tests.fakes.dingtalk_api import FakeDingTalk

TOKEN = "7f3a9c0e1b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"
SECRET = "SECfakeSigningSecretForLoopbackTests0123456789abcdef"
TARGET = Target("dingtalk", "ai-team", TargetKind.GROUP)


@pytest.fixture
async def dingtalk() -> AsyncIterator[FakeDingTalk]:
    async with FakeDingTalk(clock=NOW.timestamp) as fake:
        fake.add_robot("ai-team", TOKEN, SECRET)
        yield fake


def make_adapter(fake: FakeDingTalk, *, secret: str = SECRET, **kw: object) -> DingTalkAdapter:
    settings = DingTalkSettings(
        targets=["ai-team"],
        webhooks={
            "ai-team": SecretStr(f"https://oapi.dingtalk.com/robot/send?access_token={TOKEN}")
        },
        secrets={"ai-team": SecretStr(secret)},
        api_base=fake.url,
        **kw,  # type: ignore[arg-type]
    )
    return DingTalkAdapter(settings, clock=clock(), limits=DINGTALK_LIMITS)


async def test_the_bundled_issue_arrives_in_order(dingtalk: FakeDingTalk) -> None:
    adapter = make_adapter(dingtalk)
    assert isinstance(adapter, Platform)
    assert adapter.channel_targets() == [TARGET]
    messages = adapter.render(load_golden_issue())
    async with adapter:
        ids = [await adapter.send(TARGET, m) for m in messages]
    assert dingtalk.sent("ai-team") == [m.payload for m in messages]
    assert len(set(ids)) == len(ids) and all(i.startswith("dingtalk:ai-team:") for i in ids)
    assert dingtalk.robot("ai-team").pings == []


async def test_a_wrong_secret_is_target_gone_naming_the_target_only(dingtalk: FakeDingTalk) -> None:
    async with make_adapter(dingtalk, secret="SECnot-the-secret") as adapter:
        with pytest.raises(TargetGone) as err:
            await adapter.send(TARGET, adapter.notice("hello")[0])
    text = str(err.value)
    assert "ai-team" in text and "加签 secret" in text and "310000" in text
    assert TOKEN not in text and SECRET not in text and "not-the-secret" not in text


async def test_a_missing_signature_is_refused_when_the_robot_signs(dingtalk: FakeDingTalk) -> None:
    settings = DingTalkSettings(
        targets=["ai-team"], webhooks={"ai-team": SecretStr(TOKEN)}, api_base=dingtalk.url
    )
    async with DingTalkAdapter(settings, clock=clock(), limits=DINGTALK_LIMITS) as adapter:
        with pytest.raises(TargetGone, match="310000"):
            await adapter.send(TARGET, adapter.notice("hello")[0])


async def test_a_stale_timestamp_is_refused() -> None:
    async with FakeDingTalk(clock=lambda: NOW.timestamp() - 3700) as fake:
        fake.add_robot("ai-team", TOKEN, SECRET)
        async with make_adapter(fake) as adapter:
            with pytest.raises(TargetGone, match="invalid timestamp"):
                await adapter.send(TARGET, adapter.notice("hello")[0])


def test_the_paced_limits_stay_under_20_a_minute() -> None:
    rate = DINGTALK_LIMITS.for_kind(TargetKind.GROUP)
    assert rate.burst + rate.per_second * 60 <= 20


async def test_a_removed_robot_is_target_gone(dingtalk: FakeDingTalk) -> None:
    dingtalk.remove_robot("ai-team")
    async with make_adapter(dingtalk) as adapter:
        with pytest.raises(TargetGone, match="access token is unknown"):
            await adapter.send(TARGET, adapter.notice("hello")[0])


async def test_a_long_issue_is_never_refused_for_size() -> None:
    paragraph = "很长的段落，" * 1300 + "结束。"
    item = Item(title="长", paragraphs=(paragraph,) * 2, links=("https://example.org/a",))
    issue = Issue(date=NOW.date(), headline=item, briefs=(item,))
    async with FakeDingTalk(clock=NOW.timestamp, rate_limits=False) as fake:
        fake.add_robot("ai-team", TOKEN, SECRET)
        async with make_adapter(fake) as adapter:
            messages = adapter.render(issue)
            for m in messages:
                await adapter.send(TARGET, m)
        assert len(fake.sent("ai-team")) == len(messages) > 2


async def test_alerts_go_to_the_alert_target(dingtalk: FakeDingTalk) -> None:
    async with make_adapter(dingtalk, alert_target="ai-team") as adapter:
        await adapter.alert_admins("no issue file for today @all")
    shown = adapter.preview(Message(dingtalk.sent("ai-team")[0]))
    assert "no issue file for today @all" in shown
    assert dingtalk.robot("ai-team").pings == []


async def test_no_token_reaches_the_log(
    dingtalk: FakeDingTalk, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with make_adapter(dingtalk) as adapter:
        await adapter.send(TARGET, adapter.notice("y")[0])
    assert caplog.records
    assert not any(TOKEN in r.getMessage() for r in caplog.records)
