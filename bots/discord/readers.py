"""Slash commands of readers' preferences and follows (the catalogue's /subscribe options,
/zone, /settings, /follow, /unfollow, /following): answered privately, about the reader's DM."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from discord import app_commands
from discord.app_commands import locale_str

from digest_core.catalogue import spec
from digest_core.commands import Reply

if TYPE_CHECKING:
    from bots.discord.views import Interaction

log = logging.getLogger(__name__)


class RunCommand(Protocol):
    """:func:`bots.discord.commands.run_command`."""

    def __call__(
        self,
        interaction: Interaction,
        command: str,
        *args: str,
        ephemeral: bool = False,
        dm_chat: bool = False,
    ) -> Awaitable[Reply | None]: ...


def _name(name: str) -> locale_str:
    return locale_str(spec(name).name)


def _about(name: str) -> locale_str:
    return locale_str(spec(name).en)


def _renamed(name: str) -> dict[str, locale_str]:
    return {arg.name: locale_str(arg.name) for arg in spec(name).args}


def _described(name: str) -> dict[str, locale_str]:
    return {arg.name: locale_str(arg.en) for arg in spec(name).args}


def install_reader_commands(tree: app_commands.CommandTree[Any], run_command: RunCommand) -> None:
    """Add the readers' commands to ``tree`` (names and texts from the catalogue); each runs
    through ``run_command`` privately, about the reader's DM."""

    @tree.command(name=_name("subscribe"), description=_about("subscribe"))
    @app_commands.rename(**_renamed("subscribe"))
    @app_commands.describe(**_described("subscribe"))
    async def subscribe(
        interaction: Interaction,
        time: app_commands.Range[str, 4, 5] | None = None,
        format: Literal["full", "compact", "headline"] | None = None,
    ) -> None:
        args = [a for a in (time, format) if a]
        await run_command(interaction, "subscribe", *args, ephemeral=True, dm_chat=True)

    @tree.command(name=_name("zone"), description=_about("zone"))
    @app_commands.rename(**_renamed("zone"))
    @app_commands.describe(**_described("zone"))
    async def zone(interaction: Interaction, name: app_commands.Range[str, 1, 64]) -> None:
        await run_command(interaction, "zone", name.strip(), ephemeral=True, dm_chat=True)

    @tree.command(name=_name("settings"), description=_about("settings"))
    async def settings(interaction: Interaction) -> None:
        await run_command(interaction, "settings", ephemeral=True, dm_chat=True)

    @tree.command(name=_name("follow"), description=_about("follow"))
    @app_commands.rename(**_renamed("follow"))
    @app_commands.describe(**_described("follow"))
    async def follow(interaction: Interaction, word: app_commands.Range[str, 1, 64]) -> None:
        await run_command(interaction, "follow", word, ephemeral=True, dm_chat=True)

    @tree.command(name=_name("unfollow"), description=_about("unfollow"))
    @app_commands.rename(**_renamed("unfollow"))
    @app_commands.describe(**_described("unfollow"))
    async def unfollow(interaction: Interaction, word: app_commands.Range[str, 1, 64]) -> None:
        await run_command(interaction, "unfollow", word, ephemeral=True, dm_chat=True)

    @tree.command(name=_name("following"), description=_about("following"))
    async def following(interaction: Interaction) -> None:
        await run_command(interaction, "following", ephemeral=True, dm_chat=True)
