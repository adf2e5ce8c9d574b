"""The console platform: a terminal chat for running the whole bot with no accounts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bots.console.platform import ConsolePlatform, read_lines

__all__ = ["ConsolePlatform", "read_lines"]


def __getattr__(name: str) -> Any:
    # the platform (and asyncio, the command layer) is imported only when the console runs,
    # not by the registry when a CLI command merely reads the configuration
    if name in __all__:
        from bots.console import platform

        return getattr(platform, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
