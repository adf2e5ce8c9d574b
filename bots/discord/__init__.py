"""The Discord bot: a discord.py client posting the digest and answering slash commands."""

from bots.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]
