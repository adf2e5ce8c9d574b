"""Telegram's registry entry: the ``[telegram]`` settings, the HTML renderer, the Bot API's pacing,
the PTB adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.platformspec import BuildContext, PlatformSpec
from bots.telegram.settings import TelegramSettings
from digest_core.port import PlatformLimits, Rate, TargetKind

if TYPE_CHECKING:
    from digest_core.port import Adapter

#: Telegram Bot API limits, from https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this
TELEGRAM_LIMITS = PlatformLimits(
    # "not more than 30 messages per second or so" for bulk notifications: 30 in any 1 s, as
    # Telegram counts them (on arrival). Kept as sends go out by a SendWindow, which counts
    # each from its answer, so no latency or timer jitter can put a 31st into a second; a
    # token bucket could not reach the limit (Rate(29, 1): 0.93-0.95 of it, and a bucket of
    # 30/s with a burst of 30 let 60 through in the first second: 429s from the double in
    # benchmarks/telegram_fanout.py)
    overall=Rate(30.0, burst=30, window=1.0),
    per_target={
        # "avoid sending more than one message per second" in one chat; short bursts are
        # tolerated, so a three-part issue reaches a reader at once. Counted as Telegram (and
        # the Bot API double: 3 per 3 s) counts, in a sliding window: a bucket of 1/s with a
        # burst of 3 let a fourth message through one second after a burst (429s). The window
        # is 3.3 s, not 3: Telegram counts messages as they arrive, the pacer as they leave,
        # and two requests' latencies may differ by that much.
        TargetKind.PRIVATE: Rate(3 / 3.3, burst=3, window=3.3),
        # "not able to send more than 20 messages per minute to the same group": a burst of 3
        # plus 17/min sustained keeps every 60 s window at 20 or fewer.
        TargetKind.GROUP: Rate(17 / 60, burst=3),
        # channels share the group limit in practice (Telegram documents none for them)
        TargetKind.CHANNEL: Rate(17 / 60, burst=3),
    },
)

#: With ``allow_paid_broadcast`` (https://core.telegram.org/bots/api#sendmessage, and
#: https://core.telegram.org/bots/faq#how-can-i-message-all-of-my-bot-39s-subscribers-at-once):
#: "up to 1000 messages per second", paid in Stars past the free 30. A burst of 50 plus 950/s
#: keeps every 1 s window at 1000 or fewer; the per-chat limits are unchanged.
PAID_BROADCAST_LIMITS = PlatformLimits(
    overall=Rate(950.0, burst=50),
    per_target=dict(TELEGRAM_LIMITS.per_target),
)


def _pacing(settings: TelegramSettings) -> PlatformLimits:
    """Telegram's limits, or paid broadcast's when ``telegram.paid_broadcast`` is on."""
    return PAID_BROADCAST_LIMITS if settings.paid_broadcast else TELEGRAM_LIMITS


def _build(settings: TelegramSettings, ctx: BuildContext) -> Adapter | None:
    token = settings.resolved_token()
    if token is None:
        return None
    from bots.telegram.adapter import TelegramAdapter

    return TelegramAdapter(
        settings, token=token, clock=ctx.clock, limits=ctx.limits, in_flight=ctx.in_flight
    )


PLATFORM = PlatformSpec(
    name="telegram",
    summary="a Telegram bot (python-telegram-bot)",
    settings=TelegramSettings,
    renderer_module="digest_core.rendering.telegram",
    build=_build,
    limits=_pacing,
    needs="needs a token: set DIGEST_BOT_TELEGRAM__TOKEN or telegram.token_file",
    needs_key="telegram.token",
    sdk="python-telegram-bot",
    doctor="bots.telegram.doctor:checks",
)
