"""Pins: the first message of each day's post pinned in the channels, the day before's unpinned."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence

from digest_core.delivery import Ledger
from digest_core.errors import DeliveryError, NotPermitted
from digest_core.platform import Pinner, Platform, Target

log = logging.getLogger(__name__)


class Pins:
    """Pins a day's post on the platforms that ask for it (``pin = true``).

    Pinning is best effort and never holds a post back. A missing right (``NotPermitted``) is
    reported once, to the log and the admins, and that channel is not tried again until the
    bot restarts; other errors are logged and tried again after the next post.
    """

    def __init__(self, ledger: Ledger, *, alert: Callable[[str], Awaitable[None]]) -> None:
        self._ledger = ledger
        self._alert = alert
        #: (platform, target id) where pinning was refused for want of a right
        self.denied: set[tuple[str, str]] = set()

    async def after_post(self, day: dt.date, platform: Platform, channels: Sequence[Target]) -> int:
        """Pin the first message of ``day``'s post in each of ``channels`` (silently) and
        unpin the day before's there; returns how many were pinned. Never raises for the
        platform's errors."""
        if not isinstance(platform, Pinner) or not platform.pin_posts:
            return 0
        wanted = [c for c in channels if (platform.name, c.id) not in self.denied]
        if not wanted:
            return 0
        ids = [c.id for c in wanted]
        today = await self._ledger.first_messages(day, platform.name, ids)
        before = await self._ledger.first_messages(day - dt.timedelta(days=1), platform.name, ids)
        pinned = 0
        for target in wanted:
            message_id = today.get(target.id)
            if message_id is None:
                continue
            try:
                await platform.pin(target, message_id)
                pinned += 1
                old = before.get(target.id)
                if old and old != message_id:
                    await platform.unpin(target, old)
            except NotPermitted as exc:
                self.denied.add((platform.name, target.id))
                text = (
                    f"无法在 {target} 置顶日报：缺少权限 / cannot pin the daily post in {target}: "
                    f"the bot lacks the right to pin there ({exc.detail}); grant it and restart "
                    "the bot, or set pin = false. Not tried again until then."
                )
                log.warning("%s", text)
                await self._alert(text)
            except DeliveryError as exc:
                log.warning("%s: could not pin the post of %s: %s", target, day, exc)
        return pinned
