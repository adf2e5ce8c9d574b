"""The Feishu adapter end to end: real httpx against the loopback double, errors translated."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from bots.feishu.adapter import FeishuAdapter
from bots.feishu.settings import FeishuSettings
from bots.feishu.spec import FEISHU_LIMITS
from digest_core.errors import RateLimited, TargetGone
from digest_core.platform import Platform, Target, TargetKind
from digest_core.rendering import Message
from digest_core.rendering.types import encode_body
from tests.bots.workchat_helpers import NOW, clock, load_golden_issue
from tests.fakes.feishu_api import FakeFeishu

TOKEN = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
SECRET = "fakeSigningSecretForLoopbackTests"


@pytest.fixture
async def feishu() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu(clock=NOW.timestamp) as fake:
        fake.add_robot("ai-team", TOKEN, SECRET)
        yield fake


def make_adapter(fake: FakeFeishu, *, secret: str = SECRET, **kw: object) -> FeishuAdapter:
    settings = FeishuSettings(
        targets=["ai-team"],
        webhooks={"ai-team": SecretStr(f"https://open.feishu.cn/open-apis/bot/v2/hook/{TOKEN}")},
        secrets={"ai-team": SecretStr(secret)},
        api_base=fake.url,
        **kw,  # type: ignore[arg-type]
    )
    return FeishuAdapter(settings, clock=clock(), limits=FEISHU_LIMITS)


TARGET = Target("feishu", "ai-team", TargetKind.GROUP)


def unsigned(body: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in body.items() if k not in ("timestamp", "sign")}


async def test_the_bundled_issue_arrives_in_order(feishu: FakeFeishu) -> None:
    adapter = make_adapter(feishu)
    assert isinstance(adapter, Platform)
    assert adapter.channel_targets() == [TARGET]
    messages = adapter.render(load_golden_issue())
    async with adapter:
        ids = [await adapter.send(TARGET, m) for m in messages]
    sent = feishu.sent("ai-team")
    assert [unsigned(b) for b in sent] == [m.payload for m in messages]
    assert all(b["timestamp"] == str(int(NOW.timestamp())) for b in sent)
    assert len(set(ids)) == len(ids) and all(i.startswith("feishu:ai-team:") for i in ids)
    assert feishu.robot("ai-team").pings == []


async def test_a_wrong_secret_is_target_gone_naming_the_target_only(feishu: FakeFeishu) -> None:
    async with make_adapter(feishu, secret="not-the-secret") as adapter:
        with pytest.raises(TargetGone) as err:
            await adapter.send(TARGET, adapter.notice("hello")[0])
    text = str(err.value)
    assert "ai-team" in text and "signing secret" in text
    assert TOKEN not in text and SECRET not in text and "not-the-secret" not in text
    assert feishu.sent("ai-team") == []


async def test_a_stale_timestamp_is_refused() -> None:
    # the double's clock is two hours ahead of the adapter's: the signature is stale
    async with FakeFeishu(clock=lambda: NOW.timestamp() + 7200) as fake:
        fake.add_robot("ai-team", TOKEN, SECRET)
        async with make_adapter(fake) as adapter:
            with pytest.raises(TargetGone, match="clock"):
                await adapter.send(TARGET, adapter.notice("hello")[0])


async def test_the_paced_limits_stay_under_the_documented_windows() -> None:
    rate = FEISHU_LIMITS.for_kind(TargetKind.GROUP)
    assert rate.burst + rate.per_second * 1 <= 5
    assert rate.burst + rate.per_second * 60 <= 100


async def test_a_removed_robot_or_unknown_name_is_target_gone(feishu: FakeFeishu) -> None:
    feishu.remove_robot("ai-team")
    async with make_adapter(feishu) as adapter:
        with pytest.raises(TargetGone, match="removed"):
            await adapter.send(TARGET, adapter.notice("hello")[0])
        with pytest.raises(TargetGone, match="no webhook is configured for target 'other'"):
            await adapter.send(Target("feishu", "other", TargetKind.GROUP), adapter.notice("x")[0])


async def test_a_long_issue_is_never_refused_for_size() -> None:
    from digest_core.models import Issue, Item

    paragraph = "很长的段落，" * 1300 + "结束。"
    item = Item(title="长", paragraphs=(paragraph,) * 3, links=("https://example.org/a",))
    issue = Issue(date=NOW.date(), headline=item, briefs=(item, item))
    async with FakeFeishu(clock=NOW.timestamp, rate_limits=False) as fake:
        fake.add_robot("ai-team", TOKEN, SECRET)
        async with make_adapter(fake) as adapter:
            messages = adapter.render(issue)
            for m in messages:
                await adapter.send(TARGET, m)
        assert len(fake.sent("ai-team")) == len(messages) > 2
        assert max(len(encode_body(b)) for b in fake.sent("ai-team")) <= FakeFeishu.BODY_LIMIT


async def test_alerts_go_to_the_alert_target_or_the_log(
    feishu: FakeFeishu, caplog: pytest.LogCaptureFixture
) -> None:
    async with make_adapter(feishu, alert_target="ai-team") as adapter:
        await adapter.alert_admins("no issue file for today")
    assert "no issue file for today" in adapter.preview(Message(feishu.sent("ai-team")[0]))
    async with make_adapter(feishu) as adapter:
        await adapter.alert_admins("logged only")
    assert len(feishu.sent("ai-team")) == 1


async def test_no_secret_reaches_the_log(
    feishu: FakeFeishu, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with make_adapter(feishu, secret="wrong-secret") as adapter:
        await adapter.alert_admins("x")  # fails (bad signature) and is logged
        with pytest.raises(TargetGone):
            await adapter.send(TARGET, adapter.notice("y")[0])
    assert caplog.records
    for record in caplog.records:
        assert TOKEN not in record.getMessage() and "wrong-secret" not in record.getMessage()


async def test_an_http_429_waits_as_the_gateway_says(feishu: FakeFeishu) -> None:
    feishu.fail_next("ai-team", "http_429")
    async with make_adapter(feishu) as adapter:
        with pytest.raises(RateLimited) as err:
            await adapter.send(TARGET, adapter.notice("hello")[0])
    assert err.value.retry_after == 7.0


async def test_the_message_id_is_stable_per_part(feishu: FakeFeishu) -> None:
    import dataclasses

    from digest_core.platform import PartKey

    key = PartKey(NOW.date(), "abc123", 1, TARGET, 0)
    async with make_adapter(feishu) as adapter:
        message = adapter.notice("hello")[0]
        first = await adapter.send(TARGET, message, key=key)
        again = await adapter.send(TARGET, message, key=key)  # a resend after a crash
        other = await adapter.send(TARGET, message, key=dataclasses.replace(key, part=1))
        oneoff = await adapter.send(TARGET, message)
    assert first == again == "feishu:ai-team:2026-11-30:abc123:1:0"
    assert other != first and oneoff.startswith("feishu:ai-team:oneoff:")
