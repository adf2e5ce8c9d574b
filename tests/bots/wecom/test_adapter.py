"""The WeCom adapter end to end: real httpx against the loopback double, errors translated."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from bots.wecom.adapter import WeComAdapter
from bots.wecom.settings import WeComSettings
from bots.wecom.spec import WECOM_LIMITS
from digest_core.errors import TargetGone
from digest_core.models import Issue, Item
from digest_core.platform import Platform, Target, TargetKind
from digest_core.rendering import Message
from tests.bots.workchat_helpers import NOW, clock, load_golden_issue
from tests.fakes.wecom_api import FakeWeCom

KEY = "693a91f6-7b1c-4bc4-97a0-0ec2f1fa5aaa"
TARGET = Target("wecom", "ai-team", TargetKind.GROUP)


@pytest.fixture
async def wecom() -> AsyncIterator[FakeWeCom]:
    async with FakeWeCom(clock=NOW.timestamp) as fake:
        fake.add_robot("ai-team", KEY)
        yield fake


def make_adapter(fake: FakeWeCom, *, key: str = KEY, **kw: object) -> WeComAdapter:
    settings = WeComSettings(
        targets=["ai-team"],
        webhooks={
            "ai-team": SecretStr(f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={key}")
        },
        api_base=fake.url,
        **kw,  # type: ignore[arg-type]
    )
    return WeComAdapter(settings, clock=clock(), limits=WECOM_LIMITS)


async def test_the_bundled_issue_arrives_in_order(wecom: FakeWeCom) -> None:
    adapter = make_adapter(wecom)
    assert isinstance(adapter, Platform)
    messages = adapter.render(load_golden_issue())
    async with adapter:
        ids = [await adapter.send(TARGET, m) for m in messages]
    assert wecom.sent("ai-team") == [m.payload for m in messages]
    assert len(set(ids)) == len(ids)
    assert wecom.robot("ai-team").pings == []


async def test_a_wrong_key_is_target_gone_naming_the_target_only(wecom: FakeWeCom) -> None:
    async with make_adapter(wecom, key="00000000-0000-0000-0000-000000000000") as adapter:
        with pytest.raises(TargetGone) as err:
            await adapter.send(TARGET, adapter.notice("hello")[0])
    text = str(err.value)
    assert "ai-team" in text and "webhook key is invalid" in text and "93000" in text
    assert KEY not in text and "00000000-0000" not in text


def test_the_paced_limits_stay_under_20_a_minute() -> None:
    rate = WECOM_LIMITS.for_kind(TargetKind.GROUP)
    assert rate.burst + rate.per_second * 60 <= 20


async def test_a_long_issue_is_never_refused_for_size() -> None:
    paragraph = "很长的段落，" * 1300 + "结束。"
    item = Item(title="长", paragraphs=(paragraph,), links=("https://example.org/a",))
    issue = Issue(date=NOW.date(), headline=item, briefs=(item,))
    async with FakeWeCom(clock=NOW.timestamp, rate_limits=False) as fake:
        fake.add_robot("ai-team", KEY)
        async with make_adapter(fake) as adapter:
            messages = adapter.render(issue)
            for m in messages:
                await adapter.send(TARGET, m)
        assert len(fake.sent("ai-team")) == len(messages) > 4


async def test_alerts_go_to_the_alert_target(wecom: FakeWeCom) -> None:
    async with make_adapter(wecom, alert_target="ai-team") as adapter:
        await adapter.alert_admins("no issue file for today <@all>")
    shown = adapter.preview(Message(wecom.sent("ai-team")[0]))
    assert "no issue file for today <@all>" in shown
    assert wecom.robot("ai-team").pings == []


async def test_no_key_reaches_the_log(wecom: FakeWeCom, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with make_adapter(wecom) as adapter:
        await adapter.send(TARGET, adapter.notice("y")[0])
    assert caplog.records
    assert not any(KEY in r.getMessage() for r in caplog.records)
