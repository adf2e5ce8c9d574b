"""The console's registry entry: a terminal chat, run when no other platform is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bots.platformspec import BuildContext, PlatformSpec
from digest_core.port import PlatformLimits, Rate

if TYPE_CHECKING:
    from digest_core.port import Adapter

#: a terminal has no rate limit worth the name
CONSOLE_LIMITS = PlatformLimits(overall=Rate(1000.0, 1000), per_target={})


def _build(settings: Any, ctx: BuildContext) -> Adapter:
    from bots.console import ConsolePlatform

    return ConsolePlatform(out=ctx.out, stdin=ctx.stdin, in_flight=ctx.in_flight, limits=ctx.limits)


PLATFORM = PlatformSpec(
    name="console",
    summary="a terminal chat on stdin/stdout (no account needed)",
    settings=None,
    renderer_module="digest_core.rendering.plain",
    build=_build,
    limits=CONSOLE_LIMITS,
    fallback=True,
)
