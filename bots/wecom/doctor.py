"""WeCom's `digest-bot doctor` checks: its group robots' webhooks (:mod:`bots.workchat.doctor`),
made without sending anything."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from bots.doctor import Check
from bots.wecom.adapter import WeComAdapter
from bots.wecom.settings import WeComSettings
from bots.workchat import doctor


async def checks(settings: WeComSettings, *, now: Callable[[], dt.datetime]) -> list[Check]:
    """WeCom's lines of the doctor's table; none when it names no target."""
    return await doctor.checks(settings, adapter=WeComAdapter, now=now)
