"""The console's registry entry: a terminal chat, run when no other platform is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bots.registry import BuildContext, PlatformSpec
from bots.renderers import Flavor

if TYPE_CHECKING:
    from digest_core.port import Adapter
    from digest_core.rendering import Renderer


def _renderer() -> Renderer:
    return Flavor.PLAIN


def _build(settings: Any, ctx: BuildContext) -> Adapter:
    from bots.console import ConsolePlatform

    return ConsolePlatform(out=ctx.out, stdin=ctx.stdin, in_flight=ctx.in_flight)


PLATFORM = PlatformSpec(
    name="console",
    summary="a terminal chat on stdin/stdout (no account needed)",
    settings=None,
    renderer=_renderer,
    build=_build,
    fallback=True,
)
