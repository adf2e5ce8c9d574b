"""A thread per issue: part 0 of a threaded target opens the post's thread, once, and the later
parts and the corrections of the post go into it.

On a :class:`~digest_core.platform.Threads` platform a target may get one thread per post (a
forum post; a thread on the issue's first message). The fan-out sends such a target's part 0
in three steps, so that no crash, timeout or cut connection can open a second thread for one
post (the platforms have no idempotent way to open one):

1. :meth:`Threading.prepare` (the ledger): the intent is recorded and committed before the
   platform is asked (title, time), unless the ledger has one for this delivery and target;
2. :meth:`Threading.open` (the platform): a thread the ledger records open is the answer as it
   is; after an intent that did not come back open (an earlier attempt, perhaps of a killed
   process) the platform is asked to find the thread it may have opened (``find_thread``: this
   bot's, named so, opened no earlier than the intent, not another post's) and only if there is
   none to open it (``open_thread``);
3. :meth:`Threading.settle` (the ledger): the thread and the first message are recorded before
   part 0 is recorded sent.

A part k > 0 and a correction's messages carry the recorded thread in
:attr:`~digest_core.platform.Target.thread` (:meth:`Threading.placed`, :func:`placed_in`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from digest_core.delivery.ledger import Ledger, ThreadRecord
from digest_core.platform import Opened, PartKey, Platform, Target, Threads
from digest_core.rendering import Message

log = logging.getLogger(__name__)


def thread_title(day: dt.date, headline: str) -> str:
    """The title of an issue's thread: the date and the headline (the platform shortens it)."""
    return f"{day.isoformat()} {headline}".strip()


@dataclass(frozen=True)
class Step:
    """What part 0 of one threaded target needs (:meth:`Threading.prepare`)."""

    target: Target
    record: ThreadRecord
    #: the intent was recorded just now: no thread of it can exist yet
    fresh: bool
    #: threads of the target's other posts (never this one): asked only when not fresh
    known: frozenset[str] = frozenset()


class Threading:
    """The threads of one delivery on one :class:`~digest_core.platform.Threads` platform."""

    def __init__(
        self,
        ledger: Ledger,
        platform: Threads,
        *,
        platform_name: str,
        delivery_id: int,
        title: str,
        recorded: Mapping[str, ThreadRecord],
    ) -> None:
        self._ledger = ledger
        self._platform = platform
        self._platform_name = platform_name
        self._delivery_id = delivery_id
        self._title = title
        self._recorded = dict(recorded)

    @classmethod
    async def of(
        cls, ledger: Ledger, platform: Platform, delivery_id: int, title: str
    ) -> Threading | None:
        """The threading of a delivery (None on a platform without threads)."""
        if not isinstance(platform, Threads):
            return None
        return cls(
            ledger,
            platform,
            platform_name=platform.name,
            delivery_id=delivery_id,
            title=title,
            recorded=await ledger.threads_of(delivery_id),
        )

    def placed(self, target: Target, part: int) -> Target:
        """``target`` as part ``part`` is sent to it: with the post's thread after part 0."""
        if part == 0 or not self._platform.threaded(target):
            return target
        record = self._recorded.get(target.id)
        if record is None or not record.thread_id:
            return target
        return dataclasses.replace(target, thread=record.thread_id)

    async def prepare(self, target: Target, part: int) -> Step | None:
        """Step 1 for part 0 of a threaded target (None for any other part): the intent,
        recorded unless the ledger has this delivery's thread there already.

        Raises:
            the ledger's errors (the delivery stops, as when a claim fails).
        """
        if part != 0 or not self._platform.threaded(target):
            return None
        record = self._recorded.get(target.id)
        if record is not None and record.is_open:
            return Step(target, record, fresh=False)
        record, fresh = await self._ledger.intend_thread(self._delivery_id, target.id, self._title)
        self._recorded[target.id] = record
        known: frozenset[str] = frozenset()
        if not fresh and not record.is_open:
            known = await self._ledger.known_threads(
                self._platform_name, target.id, other_than=self._delivery_id
            )
        return Step(target, record, fresh, known)

    async def open(self, step: Step, message: Message, key: PartKey) -> Opened:
        """Step 2: the thread, as recorded, found again, or opened now.

        Raises:
            the platform's DeliveryErrors (as a send's).
        """
        record = step.record
        if record.is_open:
            assert record.thread_id is not None and record.message_id is not None
            return Opened(record.thread_id, record.message_id)
        if not step.fresh:
            found = await self._platform.find_thread(
                step.target, title=record.title, since=record.opened_at, known=step.known
            )
            if found is not None:
                log.warning(
                    "%s: the thread %s of an earlier attempt was found again; not opening another",
                    step.target,
                    found.thread_id or found.message_id,
                )
                return found
        return await self._platform.open_thread(step.target, message, title=record.title, key=key)

    async def settle(self, step: Step, opened: Opened) -> str:
        """Step 3: the thread recorded (before part 0 is recorded sent); part 0's message id.

        Raises:
            the ledger's errors.
        """
        if not step.record.is_open:
            self._recorded[step.target.id] = await self._ledger.thread_opened(
                self._delivery_id, step.target.id, opened.thread_id, opened.message_id
            )
        return opened.message_id


def placed_in(target: Target, threads: Mapping[str, ThreadRecord]) -> Target:
    """``target`` with the thread its post's correction edits in (``threads``: the day's, by
    target: :meth:`~digest_core.delivery.ledger.Ledger.day_threads`)."""
    record = threads.get(target.id)
    if record is None or not record.thread_id:
        return target
    return dataclasses.replace(target, thread=record.thread_id)
