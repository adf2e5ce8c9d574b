"""While the bot runs: posts resumed until every part is sent, alerts kept until delivered.

A delivery never gives up a part for a transient reason; it leaves it waiting (pending,
with the reason and the time it is due: :mod:`digest_core.delivery.reports`). The
:class:`Resumer` sends such parts again, with capped backoff, for as long as the day's
catch-up window allows, whichever process left them (a one-shot ``digest-bot post``
included). Alerts no admin of a platform could get (the platform unreachable) are queued
and sent again on each try, until they go through.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from digest_core.clock import Clock
from digest_core.delivery.reports import DeliveryReport, due_of
from digest_core.errors import DeliveryBusy
from digest_core.publishing.schedule import PostState

log = logging.getLogger(__name__)

#: how often the ledger is looked at for parts another process left waiting, in seconds
CHECK_SECONDS = 30.0


@dataclass
class Waiting:
    """A day's post with parts left to send: how many, why, and when they are next tried."""

    day: dt.date
    parts: int
    reason: str
    due: dt.datetime
    #: tries in a row that sent nothing (the backoff's exponent)
    tries: int = 0


@dataclass
class QueuedAlert:
    """An alert no admin of ``platform`` got yet."""

    platform: str
    text: str
    reason: str
    queued_at: dt.datetime
    due: dt.datetime
    tries: int = 1


class Resumer:
    """Resumes waiting posts and resends queued alerts; :meth:`run` is the bot's loop.

    ``window(day)`` is the day's (post time, end of its catch-up window): a post is resumed
    only inside it, and admins are told once when parts still wait at its end. ``post(day)``
    delivers the day (only what the ledger lacks); ``state(day)`` is its state; ``waiting``
    lists a day's waiting rows (newest first); ``busy(day)`` says a delivery of the day runs
    in this process now; ``send_alert(platform, text)`` MUST raise when no admin of the
    platform got ``text``.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        window: Callable[[dt.date], tuple[dt.datetime, dt.datetime]],
        today: Callable[[], dt.date],
        state: Callable[[dt.date], Awaitable[PostState]],
        post: Callable[[dt.date], Awaitable[Sequence[DeliveryReport]]],
        waiting: Callable[[dt.date], Awaitable[Sequence[tuple[str | None, str]]]],
        busy: Callable[[dt.date], bool],
        send_alert: Callable[[str, str], Awaitable[None]],
        alert: Callable[[str], Awaitable[None]],
        post_on: Callable[[dt.date, str], Awaitable[object]] | None = None,
        answers: Callable[[], Awaitable[None]] | None = None,
        base: float = 1.0,
        cap: float = 60.0,
        check_every: float = CHECK_SECONDS,
    ) -> None:
        self.clock = clock
        self._window = window
        self._today = today
        self._state = state
        self._post = post
        self._waiting = waiting
        self._busy = busy
        self._send_alert = send_alert
        self._alert = alert
        self._post_on = post_on
        self._answers = answers
        #: posts a delivery interrupted by ledger trouble, waiting for the ledger to answer
        self._after_trouble: dict[tuple[dt.date, str], asyncio.Task[None]] = {}
        self.base = base
        self.cap = cap
        self.check_every = check_every
        #: the days with parts waiting, as last seen
        self.days: dict[dt.date, Waiting] = {}
        #: alerts not delivered yet, oldest first
        self.alerts: list[QueuedAlert] = []
        self._told_expired: set[dt.date] = set()
        self._wake = asyncio.Event()
        self._stopping = False

    def delay(self, tries: int) -> float:
        """Capped exponential backoff: ``base * 2**tries`` seconds, at most ``cap``."""
        return min(self.cap, self.base * 2.0 ** min(tries, 30))

    # ------------------------------------------------------------ what posts report

    def note(self, day: dt.date, reports: Sequence[DeliveryReport]) -> None:
        """What a post of ``day`` left waiting (from its reports): tried again when due."""
        parts = sum(r.waiting for r in reports)
        if not parts:
            if any(r.sent for r in reports):
                self._works()
            if self.days.pop(day, None) is not None:
                log.info("the post of %s is complete: nothing waits any more", day)
            return
        now = self.clock.now()
        before = self.days.get(day)
        progressed = any(r.sent for r in reports)
        if progressed:
            self._works()
        tries = 0 if before is None or progressed else before.tries + 1
        # the earliest waiting part, but not sooner than the backoff
        backoff = now + dt.timedelta(seconds=self.delay(tries))
        due = max(min((d for r in reports if (d := r.due) is not None), default=now), backoff)
        reason = next((e for r in reports for t in r.targets if t.waiting for e in t.errors), "")
        self.days[day] = Waiting(day, parts, _shorten(reason), due, tries)
        self._wake.set()

    def after_trouble(self, day: dt.date, platform: str) -> None:
        """Post ``day`` on ``platform`` again once the ledger answers (``answers``): a
        delivery ledger trouble interrupted, whose rows could not record what waits (one
        waiter per pair)."""
        assert self._post_on is not None and self._answers is not None, "no post_on/answers"
        post_on, answers = self._post_on, self._answers
        key = (day, platform)
        running = self._after_trouble.get(key)
        if running is not None and not running.done() and running is not asyncio.current_task():
            return

        async def resume() -> None:
            await answers()
            if self._after_trouble.get(key) is asyncio.current_task():
                del self._after_trouble[key]  # a failure from here on starts another waiter
            log.info("the ledger answers: resuming the post of %s on %s", day, platform)
            try:
                await post_on(day, platform)
            except Exception as exc:  # a delivery's own failure: reported by the poster
                log.warning("the resumed post of %s on %s failed: %s", day, platform, exc)

        task = asyncio.get_running_loop().create_task(resume(), name=f"resume {day} {platform}")
        self._after_trouble[key] = task
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def waiters(self) -> list[asyncio.Task[None]]:
        """The posts waiting for the ledger to answer (shutdown cancels them)."""
        return list(self._after_trouble.values())

    def queue_alert(self, platform: str, text: str, reason: str) -> None:
        """Keep ``text`` for ``platform``'s admins, sent again on the next tries."""
        now = self.clock.now()
        due = now + dt.timedelta(seconds=self.delay(0))
        self.alerts.append(QueuedAlert(platform, text, reason, now, due))
        log.warning(
            "alert to %s admins queued (%s); sent once %s answers", platform, reason, platform
        )
        self._wake.set()

    def _works(self) -> None:
        """Something went through: what waits on a platform being back is tried now."""
        now = self.clock.now()
        for waiting in self.days.values():
            if waiting.tries:  # (a wait the platform asked for keeps its due time)
                waiting.due, waiting.tries = min(waiting.due, now), 0
        for queued in self.alerts:
            queued.due = min(queued.due, now)
        self._wake.set()

    # ------------------------------------------------------------ the loop

    def stop(self) -> None:
        """End :meth:`run` after the try under way (a post under way is the shutdown's)."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """Resume and resend until :meth:`stop` (or cancelled)."""
        self._stopping = False
        while not self._stopping:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the ledger is down: the next tick tries again
                log.warning("could not look for waiting parts: %s: %s", type(exc).__name__, exc)
            await self._sleep(self._next_wake())

    def _next_wake(self) -> float:
        now = self.clock.now()
        dues = [w.due for w in self.days.values()] + [a.due for a in self.alerts]
        soonest = min(((d - now).total_seconds() for d in dues), default=self.check_every)
        return max(0.0, min(self.check_every, soonest))

    async def _sleep(self, seconds: float) -> None:
        if self._stopping:
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(seconds, 0.001))

    async def tick(self) -> None:
        """Resend due alerts, then resume each due day within its window."""
        log.debug("resumer: tick")
        await self.resend_alerts()
        today = self._today()
        for day in (today - dt.timedelta(days=1), today):
            await self._resume(day)

    async def _resume(self, day: dt.date) -> None:
        now = self.clock.now()
        start, end = self._window(day)
        if now < start:
            return
        if await self._state(day) is not PostState.PARTIAL:
            self.days.pop(day, None)
            return
        known = self.days.get(day)
        if known is None:  # left by another process, or by this one before a restart
            rows = await self._waiting(day)
            dues = [d for error, _ in rows if (d := due_of(error)) is not None]
            reason = next((_shorten(e) for e, _ in rows if e), "not finished")
            known = self.days[day] = Waiting(day, len(rows), reason, min(dues, default=now))
        if now > end:
            if day not in self._told_expired:
                self._told_expired.add(day)
                await self._alert(
                    f"{day} 的推送仍有 {known.parts} 个部分未发出，已过补发窗口，不再自动重试；"
                    f"可用 /repost {day} 手动推送。 {known.parts} part(s) of the post of {day} "
                    f"still wait ({known.reason}) at the end of its catch-up window; no more "
                    f"automatic retries. Use /repost {day} to send them."
                )
            self.days.pop(day, None)
            return
        if known.due > now:
            return
        if self._busy(day):  # a post of the day runs here: it notes what it leaves
            known.due = now + dt.timedelta(seconds=self.delay(known.tries))
            return
        log.info("resuming the post of %s: %s", day, known.reason)
        try:
            reports = await self._post(day)
        except DeliveryBusy as exc:
            known.due = now + dt.timedelta(seconds=self.delay(known.tries))
            log.info("not resuming %s now: %s", day, exc)
            return
        except Exception as exc:  # the ledger, mostly: tried again later
            known.tries += 1
            known.due = now + dt.timedelta(seconds=self.delay(known.tries))
            log.warning("resuming the post of %s failed: %s: %s", day, type(exc).__name__, exc)
            return
        self.note(day, reports)

    async def resend_alerts(self) -> None:
        """Send each due queued alert again; those that still fail stay, with backoff."""
        now = self.clock.now()
        for queued in list(self.alerts):
            if queued.due > now:
                continue
            try:
                await self._send_alert(queued.platform, queued.text)
            except Exception as exc:  # (status and /metrics show it; no line per try)
                queued.tries += 1
                queued.reason = _shorten(f"{type(exc).__name__}: {exc}")
                queued.due = now + dt.timedelta(seconds=self.delay(queued.tries))
                log.debug("queued alert to %s admins not sent yet: %s", queued.platform, exc)
                continue
            self.alerts.remove(queued)
            self._works()
            late = (now - queued.queued_at).total_seconds()
            log.info("queued alert delivered to %s admins (%.0f s late)", queued.platform, late)

    # ------------------------------------------------------------ for status

    def describe(self, zone: dt.tzinfo) -> list[str]:
        """Lines for ``status``: what waits, why, and when it is tried next."""
        lines = []
        for w in sorted(self.days.values(), key=lambda w: w.day):
            lines.append(
                f"等待重发 / waiting: {w.parts} part(s) of {w.day}, next try "
                f"{w.due.astimezone(zone):%H:%M:%S}: {w.reason}"
            )
        for a in self.alerts:
            lines.append(
                f"待发提醒 / alert queued for {a.platform} admins since "
                f"{a.queued_at.astimezone(zone):%H:%M:%S}, next try "
                f"{a.due.astimezone(zone):%H:%M:%S}: {a.reason}"
            )
        return lines


def _shorten(text: str, width: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
