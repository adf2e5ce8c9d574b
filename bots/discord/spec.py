"""Discord's registry entry: the ``[discord]`` settings, embeds, the discord.py client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.discord.settings import DiscordSettings
from bots.platformspec import BuildContext, PlatformSpec
from digest_core.port import PlatformLimits, Rate, TargetKind

if TYPE_CHECKING:
    from digest_core.port import Adapter

#: Discord limits, from https://discord.com/developers/docs/topics/rate-limits: 50 requests/s
#: per bot globally; message create is 5 per 5 s per channel (a per-route bucket, observed in
#: X-RateLimit headers). discord.py also paces by those headers; we stay under them first.
DISCORD_LIMITS = PlatformLimits(
    # 50 in any 1 s (Discord's global bucket; discord.py sees no headers for it), kept as
    # sends go out by a SendWindow that counts each request from its answer: a bucket of 50/s
    # with a burst of 50 drew global 429s in benchmarks/discord_fanout.py, Rate(50, 1) none
    # but 0.96 of the limit
    overall=Rate(50.0, burst=50, window=1.0),
    per_target={
        # a burst of 3 plus 0.4/s keeps every 5 s window at 5 or fewer
        TargetKind.CHANNEL: Rate(0.4, burst=3),
        TargetKind.GROUP: Rate(0.4, burst=3),
        TargetKind.PRIVATE: Rate(0.4, burst=3),
    },
    idempotent_creates=True,  # the nonce (bots/discord/adapter.py)
)


def _build(settings: DiscordSettings, ctx: BuildContext) -> Adapter | None:
    token = settings.checked_token()
    if token is None:
        return None
    from bots.discord.adapter import DiscordAdapter

    return DiscordAdapter(
        settings, token=token, clock=ctx.clock, limits=ctx.limits, in_flight=ctx.in_flight
    )


PLATFORM = PlatformSpec(
    name="discord",
    summary="a Discord bot (discord.py)",
    settings=DiscordSettings,
    renderer_module="digest_core.rendering.discord",
    build=_build,
    limits=DISCORD_LIMITS,
    needs="needs a token: set DIGEST_BOT_DISCORD__TOKEN or discord.token_file",
    needs_key="discord.token",
    sdk="discord.py",
    sdk_module="discord",
    doctor="bots.discord.doctor:checks",
)
