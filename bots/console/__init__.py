"""The console platform: a terminal chat for running the whole bot with no accounts."""

from bots.console.platform import ConsolePlatform, read_lines

__all__ = ["ConsolePlatform", "read_lines"]
