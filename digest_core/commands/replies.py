"""Replies to people (answers, alerts): paced with the deliveries, short 429s waited out.

A reply is not a ledgered delivery: nothing is recorded and nothing is resent after a restart.
It shares its platform's pacing budget with the deliveries (the engine's pacer), so a broadcast
and readers' commands together stay under the platform's limits. The waiting and the bounded
retry live here because the Platform contract forbids them in adapters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from digest_core.clock import Clock
from digest_core.delivery import Pacer
from digest_core.errors import RateLimited, TransientError
from digest_core.platform import Target
from digest_core.rendering import Message

log = logging.getLogger(__name__)

#: A reply waits out a 429 of at most this many seconds, at most this many sends per message,
#: before it is dropped (the RateLimited is raised to the caller).
MAX_REPLY_RETRY_AFTER = 30.0
MAX_REPLY_ATTEMPTS = 4

#: One send of one message: the adapter's, which raises the DeliveryError tree and never
#: retries or sleeps.
SendOnce = Callable[[Target, Message], Awaitable[str]]


async def pace(pacer: Pacer, clock: Clock, target: Target) -> float:
    """Wait until ``target`` (and its platform as a whole) may get a message, then take the
    token; returns the clock seconds waited.

    Raises:
        TransientError: the pacer never made a token available (a broken pacing model).
    """
    waited = 0.0
    for _ in range(1000):  # bounded: every wait makes a token available
        now = clock.monotonic()
        wait = max(pacer.ready_at(target, now) - now, pacer.overall_delay(now))
        if wait <= 0:
            pacer.take(target, now)
            return waited
        await clock.sleep(wait)
        waited += wait
    raise TransientError("pacing did not converge", platform=target.platform, target=target.id)


async def send_replies(
    send: SendOnce,
    target: Target,
    messages: Sequence[Message],
    *,
    pacer: Pacer,
    clock: Clock,
    paced: list[float] | None = None,
) -> list[str]:
    """Send ``messages`` in order to ``target`` through ``send``; their message ids.

    Each message waits for the pacing budget first (real seconds spent waiting are appended to
    ``paced``). A 429 defers the target in the pacer (deliveries to it wait too) and the message
    is tried again, up to :data:`MAX_REPLY_ATTEMPTS` sends, unless the platform asks for more
    than :data:`MAX_REPLY_RETRY_AFTER` seconds. Nothing else is retried: a reply that may have
    arrived is not sent twice.

    Raises:
        DeliveryError: a message could not be sent (the rest are not attempted).
    """
    ids: list[str] = []
    for message in messages:
        for attempt in range(1, MAX_REPLY_ATTEMPTS + 1):
            before = time.perf_counter()
            waited = await pace(pacer, clock, target)
            # the platform-wide turn as it goes out (see Pacer), its end once answered
            slot = pacer.send_slot(clock.monotonic())
            waited += await slot.wait(clock)
            if waited and paced is not None:
                paced.append(time.perf_counter() - before)
            try:
                try:
                    ids.append(await send(target, message))
                finally:
                    slot.done(clock.monotonic())
                break
            except RateLimited as exc:
                pacer.defer(target, clock.monotonic() + exc.retry_after)
                if attempt == MAX_REPLY_ATTEMPTS or exc.retry_after > MAX_REPLY_RETRY_AFTER:
                    raise
                log.info(
                    "reply to %s rate limited (attempt %d): waiting %.1f s",
                    target,
                    attempt,
                    exc.retry_after,
                )
    return ids
