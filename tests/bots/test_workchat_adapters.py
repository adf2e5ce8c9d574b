"""Error translation of the Feishu, DingTalk and WeCom adapters: one table, run for each robot.

What differs per platform (codes, limits, a payload its API refuses) is a row; the tests are the
same. Each platform's own cases (signing, tokens, alerts) stay in tests/bots/<name>/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import pytest

from bots.workchat.adapter import WebhookAdapter
from digest_core.errors import RateLimited, Rejected, TargetGone, TransientError
from digest_core.platform import Target, TargetKind
from digest_core.rendering import Message
from tests.bots.dingtalk import test_adapter as dingtalk
from tests.bots.feishu import test_adapter as feishu
from tests.bots.wecom import test_adapter as wecom
from tests.bots.workchat_helpers import NOW
from tests.fakes.dingtalk_api import FakeDingTalk
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.wecom_api import FakeWeCom
from tests.fakes.workchat_base import FakeWebhookService


@dataclass(frozen=True)
class Robot:
    name: str
    #: the double, with the robot "ai-team" added
    double: Callable[[], AbstractAsyncContextManager[Any]]
    adapter: Callable[..., WebhookAdapter]
    #: the frequency limit: sends accepted at once, the wait asked for, the platform's code
    accepted: int
    retry_after: float
    limit_code: str
    #: a payload the platform refuses, and its code
    refused: dict[str, object]
    refused_code: str


def _feishu() -> AbstractAsyncContextManager[Any]:
    fake = FakeFeishu(clock=NOW.timestamp)
    fake.add_robot("ai-team", feishu.TOKEN, feishu.SECRET)
    return fake


def _dingtalk() -> AbstractAsyncContextManager[Any]:
    fake = FakeDingTalk(clock=NOW.timestamp)
    fake.add_robot("ai-team", dingtalk.TOKEN, dingtalk.SECRET)
    return fake


def _wecom() -> AbstractAsyncContextManager[Any]:
    fake = FakeWeCom(clock=NOW.timestamp)
    fake.add_robot("ai-team", wecom.KEY)
    return fake


ROBOTS = [
    Robot(
        "feishu", _feishu, feishu.make_adapter, accepted=5, retry_after=60.0, limit_code="11232",
        refused={"msg_type": "post", "content": {"post": 1}}, refused_code="9499",
    ),
    Robot(
        "dingtalk", _dingtalk, dingtalk.make_adapter, accepted=20, retry_after=600.0,
        limit_code="130101", refused={"msgtype": "markdown", "markdown": {}},
        refused_code="40035",
    ),
    Robot(
        "wecom", _wecom, wecom.make_adapter, accepted=20, retry_after=60.0, limit_code="45009",
        # 4098 bytes: over the 4096 the platform takes
        refused={"msgtype": "markdown", "markdown": {"content": "字" * 1366}},
        refused_code="40058",
    ),
]  # fmt: skip


@pytest.fixture(params=ROBOTS, ids=[r.name for r in ROBOTS])
def robot(request: pytest.FixtureRequest) -> Robot:
    row: Robot = request.param
    return row


@pytest.fixture
async def fake(robot: Robot) -> AsyncIterator[FakeWebhookService]:
    async with robot.double() as double:
        yield double


def target(robot: Robot) -> Target:
    return Target(robot.name, "ai-team", TargetKind.GROUP)


@pytest.mark.parametrize("kind", ["server_error", "busy"])
async def test_server_trouble_is_transient(
    robot: Robot, fake: FakeWebhookService, kind: str
) -> None:
    fake.fail_next("ai-team", kind)  # type: ignore[arg-type]
    async with robot.adapter(fake) as adapter:
        message = adapter.notice("hello")[0]
        with pytest.raises(TransientError) as err:
            await adapter.send(target(robot), message)
        assert not isinstance(err.value, RateLimited | TargetGone)
        await adapter.send(target(robot), message)  # the retry goes through
    assert len(fake.sent("ai-team")) == 1


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_timeout_is_transient(robot: Robot, fake: FakeWebhookService) -> None:
    fake.fail_next("ai-team", "slow", delay=0.4)
    async with robot.adapter(fake, request_timeout_seconds=0.1) as adapter:
        with pytest.raises(TransientError, match="no answer within"):
            await adapter.send(target(robot), adapter.notice("hello")[0])


async def test_the_frequency_limit_is_rate_limited(robot: Robot, fake: FakeWebhookService) -> None:
    async with robot.adapter(fake) as adapter:
        for n in range(robot.accepted):
            await adapter.send(target(robot), adapter.notice(f"n{n}")[0])
        with pytest.raises(RateLimited) as err:
            await adapter.send(target(robot), adapter.notice("one too many")[0])
    assert err.value.retry_after == robot.retry_after and robot.limit_code in str(err.value)
    assert len(fake.sent("ai-team")) == robot.accepted


async def test_a_refused_payload_is_rejected(robot: Robot, fake: FakeWebhookService) -> None:
    async with robot.adapter(fake) as adapter:
        with pytest.raises(Rejected, match=robot.refused_code):
            await adapter.send(target(robot), Message(robot.refused))
