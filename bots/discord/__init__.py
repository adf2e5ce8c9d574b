"""The Discord bot: a discord.py client posting the digest and answering slash commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bots.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]


def __getattr__(name: str) -> Any:
    # discord.py is imported only when the adapter is used, not by every `digest-bot` command
    if name == "DiscordAdapter":
        from bots.discord.adapter import DiscordAdapter

        return DiscordAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
