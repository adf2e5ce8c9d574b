"""Telegram's registry entry: the ``[telegram]`` settings, the HTML renderer, the PTB adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.registry import BuildContext, PlatformSpec
from bots.renderers import Flavor
from bots.telegram.settings import TelegramSettings

if TYPE_CHECKING:
    from digest_core.port import Adapter
    from digest_core.rendering import Renderer


def _renderer() -> Renderer:
    return Flavor.TELEGRAM


def _build(settings: TelegramSettings, ctx: BuildContext) -> Adapter | None:
    token = settings.resolved_token()
    if token is None:
        return None
    from bots.telegram.adapter import TelegramAdapter

    return TelegramAdapter(settings, token=token, clock=ctx.clock, in_flight=ctx.in_flight)


PLATFORM = PlatformSpec(
    name="telegram",
    summary="a Telegram bot (python-telegram-bot)",
    settings=TelegramSettings,
    renderer=_renderer,
    build=_build,
    needs="needs a token: set DIGEST_BOT_TELEGRAM__TOKEN or telegram.token_file",
    needs_key="telegram.token",
    sdk="python-telegram-bot",
    doctor="bots.telegram.doctor:checks",
)
