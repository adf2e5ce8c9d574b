"""Issue 24, item 5: sends recorded soon wait (a little) for a claim to share its transaction.

At a paced platform's rate the parts of a delivery come one at a time: each claim and each
record of a send was a transaction of its own, two per part. A queue holding only sends
recorded soon, that nobody waits for, is held up to ``LedgerState.linger`` real seconds for
an op someone waits for; a waiter of the sends, or the ledger closing, ends the wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from digest_core.delivery.ledger import Ledger, PartState, Recorded
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import (
    ManualClock,
    make_issue,
    make_targets,
    open_ledger,
    part_counts,
    scaled_limits,
    time_scaled_limits,
)

REF = make_issue().ref


@pytest.fixture
async def ledger(ledger_url: str) -> AsyncIterator[Ledger]:
    async with open_ledger(ManualClock(), ledger_url) as ledger:
        yield ledger


async def _planned(ledger: Ledger, targets: int) -> list[int]:
    plan = await ledger.plan(REF, "fake", make_targets(targets), 1)
    return [p.id for tp in plan.targets for p in tp.parts]


async def _until(predicate: Callable[[], bool]) -> None:
    """Until ``predicate()`` holds (the writer's state), yielding to the loop meanwhile."""
    for _ in range(10_000):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the writer never held the send")


def _linger(ledger: Ledger, seconds: float) -> None:
    ledger._state.linger = seconds  # (the state the ledger's collaborators share)


async def test_a_send_recorded_soon_shares_the_next_claims_transaction(ledger: Ledger) -> None:
    first, second = await _planned(ledger, 2)
    assert await ledger.claim(first)
    _linger(ledger, 3600.0)  # held until the claim comes, however long
    before = ledger.stats.transactions
    recorded = ledger.mark_sent_soon(first, "m1", linger=True)
    await _until(lambda: ledger._state.lingering)  # the writer holds the lone send
    assert not recorded.done.done()
    assert await asyncio.wait_for(ledger.claim(second), timeout=10)
    assert recorded.done.done() and recorded.error is None
    assert ledger.stats.transactions == before + 1  # the send and the claim: one transaction
    counts = await part_counts(ledger, REF)
    assert counts[PartState.SENT] == 1 and counts[PartState.IN_FLIGHT] == 1


async def test_a_waiter_of_a_send_recorded_soon_has_it_written_at_once(ledger: Ledger) -> None:
    [row] = await _planned(ledger, 1)
    assert await ledger.claim(row)
    _linger(ledger, 3600.0)
    recorded = ledger.mark_sent_soon(row, "m1", linger=True)
    await asyncio.wait_for(recorded.wait(), timeout=10)
    assert (await part_counts(ledger, REF))[PartState.SENT] == 1


async def test_a_send_recorded_soon_is_written_by_itself_after_the_linger(ledger: Ledger) -> None:
    [row] = await _planned(ledger, 1)
    assert await ledger.claim(row)
    _linger(ledger, 0.01)
    recorded = ledger.mark_sent_soon(row, "m1", linger=True)
    await asyncio.wait_for(asyncio.shield(recorded.done), timeout=10)  # nobody urges it
    assert (await part_counts(ledger, REF))[PartState.SENT] == 1


async def test_a_claim_after_a_queued_record_is_written_with_it(ledger: Ledger) -> None:
    """A target's next part is claimed in the transaction of its part before's record:
    both are committed, or neither, so the claim never stands without the record."""
    first, second = await _planned(ledger, 2)
    assert await ledger.claim(first)
    _linger(ledger, 3600.0)
    before = ledger.stats.transactions
    recorded = ledger.mark_sent_soon(first, "m1", linger=True)
    assert await asyncio.wait_for(ledger.claim(second, after=recorded), timeout=10)
    assert recorded.done.done() and recorded.error is None
    assert ledger.stats.transactions == before + 1
    counts = await part_counts(ledger, REF)
    assert counts[PartState.SENT] == 1 and counts[PartState.IN_FLIGHT] == 1


async def test_a_claim_after_a_record_already_written_waits_for_it(ledger: Ledger) -> None:
    first, second = await _planned(ledger, 2)
    assert await ledger.claim(first)
    recorded = ledger.mark_sent_soon(first, "m1", linger=True)
    await recorded.wait()
    assert await ledger.claim(second, after=recorded)
    counts = await part_counts(ledger, REF)
    assert counts[PartState.SENT] == 1 and counts[PartState.IN_FLIGHT] == 1


async def test_a_send_to_a_platform_without_idempotent_creates_is_written_at_once(
    ledger: Ledger,
) -> None:
    """Without ``linger`` (Telegram, the work chats: a resend after a crash would be a second
    post) the record is written without waiting for company, however long the linger."""
    [row] = await _planned(ledger, 1)
    assert await ledger.claim(row)
    _linger(ledger, 3600.0)
    recorded = ledger.mark_sent_soon(row, "m1")
    await asyncio.wait_for(asyncio.shield(recorded.done), timeout=10)  # nobody waits for it
    assert (await part_counts(ledger, REF))[PartState.SENT] == 1


def test_scaled_limits_keep_whether_creates_are_idempotent() -> None:
    """The doubles' faster clocks (``scaled_limits``, ``time_scaled_limits``) keep the
    platform's fact."""
    limits = PlatformLimits(overall=Rate(50.0, burst=50), per_target={}, idempotent_creates=True)
    assert (
        scaled_limits(limits, 10).idempotent_creates
        and time_scaled_limits(limits, 10).idempotent_creates
    )
    assert not scaled_limits(
        PlatformLimits(overall=Rate(30.0, burst=1), per_target={}), 2
    ).idempotent_creates


def _hold_batches(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, *, refuse: bool = False
) -> asyncio.Event:
    """The writer's batches are held (taken off the queue, not written) until the returned
    event is set; then written (with ``refuse``, the first fails with a ValueError)."""
    writer = ledger._writer  # (the ledger's collaborator that writes per-part changes)
    gate = asyncio.Event()
    write = writer._write_batch
    refusals = [ValueError("refused by the test")] if refuse else []

    async def held(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        if refusals:
            raise refusals.pop()
        return await write(*args, **kwargs)

    monkeypatch.setattr(writer, "_write_batch", held)
    return gate


async def _being_written(ledger: Ledger, first: int) -> Recorded:
    """``first`` recorded sent soon, its batch taken by the writer (held: see above)."""
    recorded = ledger.mark_sent_soon(first, "m1")
    await _until(lambda: recorded.done is not ledger._state.queued_sends)
    return recorded


async def test_a_claim_after_a_record_being_written_is_queued_once_it_is_committed(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record's batch is being written when the next part is claimed: the claim waits
    for that batch (it is not queued beside it) and is written after it."""
    first, second = await _planned(ledger, 2)
    assert await ledger.claim(first)
    gate = _hold_batches(ledger, monkeypatch)
    recorded = await _being_written(ledger, first)
    claim = asyncio.ensure_future(ledger.claim(second, after=recorded))
    await asyncio.sleep(0.01)
    assert not claim.done() and not ledger._state.queue
    gate.set()
    assert await asyncio.wait_for(claim, timeout=10)
    assert recorded.error is None
    counts = await part_counts(ledger, REF)
    assert counts[PartState.SENT] == 1 and counts[PartState.IN_FLIGHT] == 1


async def test_a_claim_after_a_record_that_failed_raises_its_error_unclaimed(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a claim whose part before was not recorded: the record's error is the claim's."""
    first, second = await _planned(ledger, 2)
    assert await ledger.claim(first)
    gate = _hold_batches(ledger, monkeypatch, refuse=True)
    recorded = await _being_written(ledger, first)
    claim = asyncio.ensure_future(ledger.claim(second, after=recorded))
    await asyncio.sleep(0.01)
    gate.set()
    with pytest.raises(ValueError, match="refused by the test"):
        await asyncio.wait_for(claim, timeout=10)
    assert isinstance(recorded.error, ValueError)
    await _until(lambda: not ledger.busy)
    counts = await part_counts(ledger, REF)
    assert counts[PartState.IN_FLIGHT] == 1 and counts[PartState.SENT] == 0  # first only


async def test_a_claim_cancelled_while_its_record_is_written_is_not_written(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = await _planned(ledger, 2)
    assert await ledger.claim(first)
    gate = _hold_batches(ledger, monkeypatch)
    recorded = await _being_written(ledger, first)
    claim = asyncio.ensure_future(ledger.claim(second, after=recorded))
    await asyncio.sleep(0.01)
    claim.cancel()
    gate.set()
    await asyncio.wait_for(recorded.wait(), timeout=10)
    await asyncio.sleep(0.01)
    await _until(lambda: not ledger.busy)
    counts = await part_counts(ledger, REF)
    assert counts[PartState.SENT] == 1 and counts[PartState.IN_FLIGHT] == 0
