"""A delivery keeps its objects out of the garbage collector's full passes while it runs."""

from __future__ import annotations

import asyncio
import gc
import os

import pytest

from digest_core import heap
from digest_core.delivery import DeliveryEngine
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import (
    FakePlatform,
    ManualClock,
    make_issue,
    make_messages,
    make_targets,
    open_ledger,
)

FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})


@pytest.fixture(autouse=True)
def no_start_up_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests set the heap's state with ``gc`` themselves: what the heap module knows
    of earlier freezes in this process (a search index built by another test, a parent's
    freeze one of these tests stood in for) is forgotten before and after."""
    monkeypatch.setattr(heap, "_start_up", None)
    monkeypatch.setattr(heap, "_inherited", None)
    monkeypatch.setattr(heap, "_parent", None)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_targets_are_frozen_during_a_delivery_and_given_back_after() -> None:
    """Full passes stalled the loop for up to 1.5 s at 100k subscribers (benchmarks/scale.py):
    while delivering, the targets' objects sit in the permanent generation; afterwards,
    nothing is left frozen (cycles among them are collectable again), even with two
    deliveries overlapping."""
    clock = ManualClock()
    frozen_during: list[int] = []

    def on_sent(_: object) -> None:
        # gc.get_freeze_count() walks the whole permanent generation: in a test worker that
        # has imported the suite, a second of CPU for every hundred calls; so it is read at
        # the first and the last send, and the deliveries' own count at every send
        sends = len(frozen_during)
        frozen_during.append(gc.get_freeze_count() if sends in (0, 99) else heap._freezers)

    async with open_ledger(clock) as ledger:
        engine = DeliveryEngine(ledger, clock=clock)
        first = FakePlatform(clock, name="one", limits=FAST)
        second = FakePlatform(clock, name="two", limits=FAST)
        first.on_sent = on_sent
        gc.unfreeze()
        reports = await asyncio.gather(
            engine.deliver(
                make_issue().ref, first, make_messages(2), make_targets(50, platform="one")
            ),
            engine.deliver(
                make_issue().ref, second, make_messages(2), make_targets(50, platform="two")
            ),
        )
    assert all(r.ok for r in reports)
    assert len(frozen_during) == 100 and min(frozen_during) > 0
    assert gc.get_freeze_count() == 0


def test_young_collections_are_rarer_while_delivering_and_restored_after() -> None:
    """Inside ``frozen_heap`` (nested, as overlapping deliveries are) the youngest
    generation's threshold is at least ``heap.YOUNG_THRESHOLD``; the last one to end puts
    the process's thresholds back as they were."""
    before = gc.get_threshold()
    gc.set_threshold(500, 7, 9)
    try:
        with heap.frozen_heap():
            assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 7, 9)
            with heap.frozen_heap():
                assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 7, 9)
            assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 7, 9)
        assert gc.get_threshold() == (500, 7, 9)
        gc.set_threshold(10 * heap.YOUNG_THRESHOLD, 7, 9)
        with heap.frozen_heap():  # a process that collects even less often keeps its own
            assert gc.get_threshold() == (10 * heap.YOUNG_THRESHOLD, 7, 9)
        assert gc.get_threshold() == (10 * heap.YOUNG_THRESHOLD, 7, 9)
    finally:
        gc.set_threshold(*before)


def test_a_heap_frozen_before_the_first_delivery_is_left_as_it_was() -> None:
    """A process forked from one that froze its heap (a fork server, a pre-forking host)
    keeps that freeze: its deliveries (two, nested; and later ones) neither add what they
    build to it nor give it back when they end; the thresholds are set and put back as
    always."""
    gc.unfreeze()
    gc.freeze()

    def unchanged(count: int) -> bool:
        # (frozen objects can still die meanwhile: the count only drifts, by a few)
        return abs(count - before) < 500

    try:
        before = gc.get_freeze_count()
        thresholds = gc.get_threshold()
        for _ in range(2):
            with heap.frozen_heap():
                built = [[n] for n in range(5_000)]
                heap.refreeze()  # would freeze the 5,000 lists
                with heap.frozen_heap():
                    heap.refreeze()
                    assert gc.get_threshold()[0] >= heap.YOUNG_THRESHOLD
                assert unchanged(gc.get_freeze_count())
            assert unchanged(gc.get_freeze_count())  # gc.unfreeze() would leave 0
            assert heap._inherited == os.getpid()  # (the collector was asked once)
            assert gc.get_threshold() == thresholds
            assert len(built) == 5_000
    finally:
        gc.unfreeze()
    # and a process that froze nothing (another process: what this one learnt is forgotten)
    # a delivery freezes, and gives it all back after
    heap._inherited = None
    with heap.frozen_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_what_start_up_froze_is_the_first_deliverys_to_give_back() -> None:
    """``digest-bot run`` freezes what its start-up built (``start_up_frozen``). A delivery
    takes that freeze for its own, not for a forking parent's: it freezes what it builds
    too, and its end gives everything back. The block's end freezes what is left (it goes
    with the process), the next delivery's to give back again."""
    gc.unfreeze()
    with heap.start_up_frozen():
        assert gc.get_freeze_count() > 0
        with heap.frozen_heap():
            built = [[n] for n in range(5_000)]
            before = gc.get_freeze_count()
            heap.refreeze()
            assert gc.get_freeze_count() >= before + 5_000  # what the delivery built
        assert gc.get_freeze_count() == 0
        with heap.frozen_heap():  # (a later delivery finds nothing frozen)
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() == 0
    assert gc.get_freeze_count() > 0  # frozen at the end, for the interpreter's exit
    assert len(built) == 5_000
    with heap.frozen_heap():
        assert not heap._frozen_before  # (its own: the collector is not asked)
    assert gc.get_freeze_count() == 0


def test_a_start_up_in_a_heap_frozen_before_adds_to_it_and_gives_nothing_back() -> None:
    """``digest-bot run`` forked from a process that froze its heap (the suite's fork
    server): its start-up's objects join the parent's in the permanent generation, and
    neither its deliveries nor its end give anything back."""
    gc.unfreeze()
    gc.freeze()
    try:
        parents = gc.get_freeze_count()
        built = [[n] for n in range(5_000)]
        with heap.start_up_frozen():
            added = gc.get_freeze_count()
            assert added >= parents + 5_000 - 500  # (frozen objects can die meanwhile)
            with heap.frozen_heap():
                heap.refreeze()
            assert abs(gc.get_freeze_count() - added) < 500  # not 0: nothing given back
        assert abs(gc.get_freeze_count() - added) < 500
        assert len(built) == 5_000
    finally:
        gc.unfreeze()


def test_a_start_up_freeze_outside_a_block_is_the_next_deliverys_to_give_back() -> None:
    """The search index's first build freezes what is alive then (``freeze_start_up``, no
    block): the next delivery gives it back with its own, and asks the collector nothing
    (which walks every frozen object: 80 ms a delivery where a worker's heap was frozen)."""
    gc.unfreeze()
    heap.freeze_start_up()
    assert gc.get_freeze_count() > 0
    with heap.frozen_heap():
        assert not heap._frozen_before
    assert gc.get_freeze_count() == 0


def test_a_child_of_a_process_that_froze_for_its_children_knows_it_without_asking() -> None:
    """``freeze_for_children`` before forking (a pre-forking host, the suite's fork server):
    a child's delivery leaves the freeze as it is, and the collector is not asked (its
    answer walks every frozen object)."""
    pipe_out, pipe_in = os.pipe()
    gc.unfreeze()
    try:
        heap.freeze_for_children()
        before = gc.get_freeze_count()
        pid = os.fork()
        if pid == 0:  # the child: report, and end without the parent's clean-up
            try:
                calls = 0
                counted = gc.get_freeze_count

                def counting() -> int:
                    nonlocal calls
                    calls += 1
                    return counted()

                gc.get_freeze_count = counting  # type: ignore[assignment]
                with heap.frozen_heap():
                    heap.refreeze()
                left = counted()
                os.write(pipe_in, f"{calls} {int(heap._frozen_before)} {left}".encode())
            finally:
                os._exit(0)
        os.close(pipe_in)
        answer = os.read(pipe_out, 100).decode().split()
        os.waitpid(pid, 0)
    finally:
        os.close(pipe_out)
        gc.unfreeze()
    calls, frozen_before, left = (int(x) for x in answer)
    assert calls == 0 and frozen_before == 1
    assert abs(left - before) < 500  # not given back (not 0), nothing added
