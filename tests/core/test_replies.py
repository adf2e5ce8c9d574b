"""Replies in the core: paced with the deliveries, short 429s waited out, nothing else retried."""

from __future__ import annotations

import pytest

from digest_core.commands.replies import MAX_REPLY_ATTEMPTS, MAX_REPLY_RETRY_AFTER, send_replies
from digest_core.delivery import Pacer
from digest_core.errors import OutcomeUnknown, RateLimited, TransientError
from digest_core.platform import PlatformLimits, Rate, Target, TargetKind
from digest_core.rendering import Message
from digest_core.testing import ManualClock

TARGET = Target("chat", "7", TargetKind.PRIVATE)
LIMITS = PlatformLimits(overall=Rate(30.0, 30), per_target={TargetKind.PRIVATE: Rate(1.0, 1)})


class Script:
    """One send per call: raises the next scripted error, else returns a new id."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[tuple[float, str]] = []
        self.clock = ManualClock()

    async def send(self, target: Target, message: Message) -> str:
        self.calls.append((self.clock.monotonic(), str(message.payload["text"])))
        if self.errors:
            raise self.errors.pop(0)
        return str(len(self.calls))


def limited(seconds: float) -> RateLimited:
    return RateLimited("429", retry_after=seconds, platform="chat", target="7")


async def test_replies_are_paced_per_target() -> None:
    script = Script()
    pacer = Pacer(LIMITS, now=script.clock.monotonic())
    messages = [Message({"text": "a"}), Message({"text": "b"})]
    ids = await send_replies(script.send, TARGET, messages, pacer=pacer, clock=script.clock)
    assert ids == ["1", "2"]
    # one message a second to a private chat: the second waited for its token
    assert [t for t, _ in script.calls] == [0.0, pytest.approx(1.0)]


async def test_a_short_429_is_waited_out_and_defers_the_target_for_deliveries_too() -> None:
    script = Script(limited(5.0))
    pacer = Pacer(LIMITS, now=script.clock.monotonic())
    ids = await send_replies(
        script.send, TARGET, [Message({"text": "a"})], pacer=pacer, clock=script.clock
    )
    assert ids == ["2"]
    assert [text for _, text in script.calls] == ["a", "a"]
    assert script.calls[1][0] >= 5.0  # not before Retry-After
    assert pacer.ready_at(TARGET, 0.0) >= 5.0  # the deliveries' pacer knows it too


@pytest.mark.parametrize(
    ("errors", "sends"),
    [
        ([limited(MAX_REPLY_RETRY_AFTER + 1)], 1),  # too long to wait for a reply
        ([limited(0.5)] * MAX_REPLY_ATTEMPTS, MAX_REPLY_ATTEMPTS),  # bounded
    ],
)
async def test_a_reply_gives_up_on_long_or_repeated_429s(
    errors: list[Exception], sends: int
) -> None:
    script = Script(*errors)
    pacer = Pacer(LIMITS, now=script.clock.monotonic())
    with pytest.raises(RateLimited):
        await send_replies(
            script.send, TARGET, [Message({"text": "a"})], pacer=pacer, clock=script.clock
        )
    assert len(script.calls) == sends


@pytest.mark.parametrize(
    "error",
    [
        TransientError("5xx", platform="chat", target="7"),
        OutcomeUnknown("timed out: may have arrived", platform="chat", target="7"),
    ],
)
async def test_nothing_but_a_429_is_retried_and_the_rest_is_not_attempted(
    error: Exception,
) -> None:
    script = Script(error)
    pacer = Pacer(LIMITS, now=script.clock.monotonic())
    messages = [Message({"text": "a"}), Message({"text": "b"})]
    with pytest.raises(type(error)):
        await send_replies(script.send, TARGET, messages, pacer=pacer, clock=script.clock)
    assert [text for _, text in script.calls] == ["a"]
