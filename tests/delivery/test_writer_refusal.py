"""One state change the database refuses (not a transient error) fails alone: the other sends of
its batch are still recorded, so the next delivery does not send them twice."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from sqlalchemy.exc import DBAPIError

from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.platform import PartKey, PlatformLimits, Rate, Target
from digest_core.rendering import Message
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets
from tests.delivery.test_ledger_trouble import wait_for

TARGETS = 20
#: the target whose message id is longer than the ledger's column (String(128))
ODD = "c7"


@dataclass
class LongIdPlatform(FakePlatform):
    """A FakePlatform that answers one target's sends with a message id too long to record."""

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        message_id = await super().send(target, message, key=key)
        return "9" * 200 if target.id == ODD else message_id


async def test_a_refused_record_does_not_take_its_batch_with_it(pg_url: str) -> None:
    clock = SystemClock()
    # every first part finishes at once, so their records share the writer's batches
    platform = LongIdPlatform(
        clock, limits=PlatformLimits(overall=Rate(1000.0, 100), per_target={}), latency=0.02
    )
    targets, messages = make_targets(TARGETS), make_messages(2)
    async with Ledger.open(pg_url, clock=clock) as ledger:
        engine = DeliveryEngine(ledger, clock=clock, max_in_flight=TARGETS)
        with pytest.raises(DBAPIError, match="too long"):
            await asyncio.wait_for(
                engine.deliver(make_issue().ref, platform, messages, targets), 30
            )
        await wait_for(lambda: not ledger.busy, "the writer")
        rows = await ledger.records(make_issue().ref, platform="fake", limit=1000)
    state = {(r.target, r.part): r.state for r in rows}
    sent = {(s.target.id, s.message.payload["part"]) for s in platform.sent}
    assert (ODD, 0) in sent and state[(ODD, 0)] is not PartState.SENT
    unrecorded = [k for k in sent - {(ODD, 0)} if state[k] is not PartState.SENT]
    assert not unrecorded, f"sent and not recorded (sent again by the next run): {unrecorded}"
