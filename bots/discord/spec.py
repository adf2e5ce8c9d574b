"""Discord's registry entry: the ``[discord]`` settings, embeds, the discord.py client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.discord.settings import DiscordSettings
from bots.registry import BuildContext, PlatformSpec
from bots.renderers import Flavor
from digest_core.port import PlatformLimits, Rate, TargetKind

if TYPE_CHECKING:
    from digest_core.port import Adapter, Renderer

#: Discord limits, from https://discord.com/developers/docs/topics/rate-limits: 50 requests/s
#: per bot globally; message create is 5 per 5 s per channel (a per-route bucket, observed in
#: X-RateLimit headers). discord.py also paces by those headers; we stay under them first.
DISCORD_LIMITS = PlatformLimits(
    # no burst: discord.py sees no headers for the global limit, so a burst of 50 on top of
    # 50/s drew global 429s in benchmarks/discord_fanout.py; burst 1 drew none for ~5% time
    overall=Rate(50.0, burst=1),
    per_target={
        # a burst of 3 plus 0.4/s keeps every 5 s window at 5 or fewer
        TargetKind.CHANNEL: Rate(0.4, burst=3),
        TargetKind.GROUP: Rate(0.4, burst=3),
        TargetKind.PRIVATE: Rate(0.4, burst=3),
    },
)


def _renderer() -> Renderer:
    return Flavor.DISCORD


def _build(settings: DiscordSettings, ctx: BuildContext) -> Adapter | None:
    token = settings.checked_token()
    if token is None:
        return None
    from bots.discord.adapter import DiscordAdapter

    return DiscordAdapter(
        settings, token=token, clock=ctx.clock, limits=DISCORD_LIMITS, in_flight=ctx.in_flight
    )


PLATFORM = PlatformSpec(
    name="discord",
    summary="a Discord bot (discord.py)",
    settings=DiscordSettings,
    renderer=_renderer,
    build=_build,
    limits=DISCORD_LIMITS,
    needs="needs a token: set DIGEST_BOT_DISCORD__TOKEN or discord.token_file",
    needs_key="discord.token",
    sdk="discord.py",
    sdk_module="discord",
    doctor="bots.discord.doctor:checks",
)
