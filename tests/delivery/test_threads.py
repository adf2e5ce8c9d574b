"""A thread per post (forum posts, threads on the first message) on a virtual clock, SQLite and
PostgreSQL: one thread per target and delivery however the first part's send is cut, the later
parts and the corrections in it, a forced repost in a new one."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from dataclasses import dataclass, field, replace

import pytest
from sqlalchemy import update

from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.delivery.ledger import parts
from digest_core.delivery.threads import thread_title
from digest_core.errors import OutcomeUnknown, TransientError
from digest_core.models import IssueRef
from digest_core.platform import Opened, PartKey, PlatformLimits, Rate, Target, Threads
from digest_core.publishing.corrections import correct
from digest_core.rendering import Message
from digest_core.testing import ManualClock, make_targets, open_ledger, part_counts
from tests.delivery.test_corrections import EditingPlatform

DAY = dt.date(2026, 10, 27)
R1, R2 = (IssueRef(date=DAY, revision=r) for r in ("rev1", "rev2"))
FAST = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})
TITLE = thread_title(DAY, "头条")


class Killed(BaseException):
    """The process dying at that point (nothing after it runs; the ledger is left as is)."""


@dataclass
class Thread:
    id: str
    target: str
    title: str
    opened_at: dt.datetime
    #: message ids posted into it, the first one first
    messages: list[str] = field(default_factory=list)


@dataclass
class ThreadedPlatform(EditingPlatform):
    """An editing FakePlatform whose ``forums`` get a thread per post, as a forum channel: the
    first message opens it (one call, not idempotent), later messages go into it."""

    forums: frozenset[str] = frozenset()
    threads: dict[str, Thread] = field(default_factory=dict)
    opens: int = 0
    finds: list[tuple[str, dt.datetime, frozenset[str]]] = field(default_factory=list)
    #: what the next opens do once the thread exists: raise this (the answer lost)
    after_open: list[BaseException] = field(default_factory=list)
    _thread_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def threaded(self, target: Target) -> bool:
        return target.id in self.forums

    async def open_thread(
        self, target: Target, message: Message, *, title: str, key: PartKey
    ) -> Opened:
        assert self.threaded(target) and target.thread is None and key.part == 0
        self.opens += 1
        message_id = await self.send(target, message, key=key)
        thread = Thread(f"t{next(self._thread_ids)}", target.id, title, self.clock.now())
        thread.messages.append(message_id)
        self.threads[thread.id] = thread
        if self.after_open:
            raise self.after_open.pop(0)
        return Opened(thread.id, message_id)

    async def find_thread(
        self, target: Target, *, title: str, since: dt.datetime, known: frozenset[str]
    ) -> Opened | None:
        # the oldest match that is not another post's: a wrong ``known`` finds the wrong one
        self.finds.append((target.id, since, known))
        for thread in self.threads.values():
            if thread.target == target.id and thread.title == title and thread.id not in known:
                return Opened(thread.id, thread.messages[0])
        return None

    async def send(self, target: Target, message: Message, *, key: object = None) -> str:
        if self.threaded(target) and (key is None or getattr(key, "part", 0) != 0):
            assert target.thread in self.threads, f"part sent outside its thread: {target}"
        message_id = await super().send(target, message, key=key)
        if target.thread is not None:
            self.threads[target.thread].messages.append(message_id)
        return message_id

    async def edit(self, target: Target, message_id: str, message: Message) -> None:
        if self.threaded(target):
            assert target.thread is not None and message_id in self.threads[target.thread].messages
        await super().edit(target, message_id, message)


def test_the_double_has_the_capability() -> None:
    assert isinstance(ThreadedPlatform(ManualClock()), Threads)


def _messages(label: str, n: int = 3) -> list[Message]:
    return [Message({"text": f"{label} {i + 1}", "part": i}) for i in range(n)]


def _platform(clock: ManualClock) -> ThreadedPlatform:
    return ThreadedPlatform(clock, limits=FAST, forums=frozenset({"c0", "c1"}))


def _engine(ledger: Ledger, clock: ManualClock) -> DeliveryEngine:
    return DeliveryEngine(ledger, clock=clock, rng=random.Random(1))


async def test_each_threaded_target_gets_one_thread_with_the_whole_post_in_it(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = _platform(clock)
    targets = make_targets(3)  # c0 and c1 are forums, c2 a plain channel
    report = await _engine(ledger, clock).deliver(
        R1, platform, _messages("a"), targets, title=TITLE
    )

    assert report.sent == 9 and platform.opens == 2 and not platform.finds
    for thread in platform.threads.values():
        assert thread.title == TITLE and len(thread.messages) == 3
        sent = [s for s in platform.sent if s.target.id == thread.target]
        assert [s.target.thread for s in sent] == [None, thread.id, thread.id]
    assert all(s.target.thread is None for s in platform.sent if s.target.id == "c2")
    recorded = await ledger.threads_of(report.delivery_id)
    assert sorted(recorded) == ["c0", "c1"]
    for target_id, record in recorded.items():
        thread = platform.threads[str(record.thread_id)]
        assert thread.target == target_id and record.message_id == thread.messages[0]


async def test_an_open_whose_answer_was_lost_is_found_again_not_opened_twice(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = _platform(clock)
    platform.after_open.append(OutcomeUnknown("cut after the request", platform="fake"))
    report = await _engine(ledger, clock).deliver(
        R1, platform, _messages("a"), make_targets(1), title=TITLE
    )

    assert report.sent == 3 and report.maybe_twice == 1
    assert platform.opens == 1 and len(platform.threads) == 1
    (thread,) = platform.threads.values()
    assert len(thread.messages) == 3  # the later parts went into the thread found again
    assert [f[0] for f in platform.finds] == ["c0"]


async def test_a_crash_between_opening_the_thread_and_recording_it_opens_no_second(
    ledger_url: str, clock: ManualClock
) -> None:
    platform = _platform(clock)
    # the process dies as the answer comes: the thread exists, the ledger has the intent only
    platform.after_open.append(Killed())
    async with open_ledger(clock, ledger_url) as first:
        with pytest.raises(BaseExceptionGroup) as killed:
            await _engine(first, clock).deliver(
                R1, platform, _messages("a"), make_targets(1), title=TITLE
            )
        assert killed.group_contains(Killed)
    clock.advance(60)
    async with open_ledger(clock, ledger_url) as second:
        report = await _engine(second, clock).deliver(
            R1, platform, _messages("a"), make_targets(1), title=TITLE
        )
        counts = await part_counts(second, R1)

    assert platform.opens == 1 and len(platform.threads) == 1
    (thread,) = platform.threads.values()
    assert len(thread.messages) == 3 and counts[PartState.SENT] == 3
    assert report.sent == 3 and report.maybe_twice == 1
    ((_, since, known),) = platform.finds
    assert since <= clock.now() - dt.timedelta(seconds=60) and known == frozenset()


async def test_a_crash_after_recording_the_thread_sends_nothing_again(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = _platform(clock)
    engine = _engine(ledger, clock)
    report = await engine.deliver(R1, platform, _messages("a"), make_targets(1), title=TITLE)
    # as a killed process leaves it: the thread recorded, part 0 claimed but not recorded sent
    async with ledger._tx() as conn:
        await conn.execute(
            update(parts)
            .where(parts.c.delivery_id == report.delivery_id, parts.c.part == 0)
            .values(state=PartState.IN_FLIGHT.value, message_id=None)
        )
    sent = len(platform.sent)
    again = await engine.deliver(R1, platform, _messages("a"), make_targets(1), title=TITLE)

    assert again.sent == 1 and len(platform.sent) == sent and platform.opens == 1
    assert not platform.finds  # the ledger knew the thread: nothing to look for
    (thread,) = platform.threads.values()
    assert (await ledger.first_messages(DAY, "fake", ["c0"]))["c0"] == thread.messages[0]


async def test_a_forced_repost_opens_a_new_thread_and_never_takes_the_old_one(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = _platform(clock)
    engine = _engine(ledger, clock)
    await engine.deliver(R1, platform, _messages("a"), make_targets(1), title=TITLE)
    clock.advance(3600)
    # the repost's open is cut: what is found must not be the first post's thread
    platform.after_open.append(TransientError("cut", platform="fake"))
    report = await engine.deliver(
        R1, platform, _messages("a"), make_targets(1), force=True, title=TITLE
    )

    first, second = platform.threads.values()
    assert report.sent == 3 and platform.opens == 2
    assert len(first.messages) == 3 and len(second.messages) == 3
    ((_, _, known),) = platform.finds
    assert known == frozenset({first.id})


async def test_a_correction_edits_in_the_thread_and_adds_the_missing_part_there(
    ledger: Ledger, clock: ManualClock
) -> None:
    platform = ThreadedPlatform(clock, limits=FAST, forums=frozenset({"c0"}))
    engine = _engine(ledger, clock)
    await engine.deliver(R1, platform, _messages("a", 2), make_targets(2), title=TITLE)

    done = await correct(engine, R2, platform, _messages("b", 3), zone=dt.UTC)

    assert (done.edited, done.added) == (4, 2) and done.ok
    for thread in platform.threads.values():
        assert len(thread.messages) == 3
        assert platform.texts(thread.target)[:3] == ["b 1", "b 2", "b 3"]
    assert platform.opens == 1  # c1 is no thread: its added part went to the channel
    assert [s.target.thread for s in platform.sent if s.target.id == "c1"] == [None] * 3


def test_a_target_carrying_a_thread_is_still_the_same_target() -> None:
    target = Target("fake", "c0")
    placed = replace(target, thread="t1")
    assert placed == target and hash(placed) == hash(target) and {placed: 1}[target] == 1
