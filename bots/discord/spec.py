"""Discord's registry entry: the ``[discord]`` settings, embeds, the discord.py client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.discord.settings import DiscordSettings
from bots.registry import BuildContext, PlatformSpec
from bots.renderers import Flavor

if TYPE_CHECKING:
    from digest_core.port import Adapter
    from digest_core.rendering import Renderer


def _renderer() -> Renderer:
    return Flavor.DISCORD


def _build(settings: DiscordSettings, ctx: BuildContext) -> Adapter | None:
    token = settings.checked_token()
    if token is None:
        return None
    from bots.discord.adapter import DiscordAdapter

    return DiscordAdapter(settings, token=token, clock=ctx.clock, in_flight=ctx.in_flight)


PLATFORM = PlatformSpec(
    name="discord",
    summary="a Discord bot (discord.py)",
    settings=DiscordSettings,
    renderer=_renderer,
    build=_build,
    needs="needs a token: set DIGEST_BOT_DISCORD__TOKEN or discord.token_file",
    needs_key="discord.token",
    sdk="discord.py",
    sdk_module="discord",
    commands="bots.discord.arguments:register",
    doctor="bots.discord.doctor:checks",
)
