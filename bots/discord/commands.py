"""Slash commands over the core commands, with Chinese and English names and descriptions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands
from discord.app_commands import locale_str

from bots.discord.readers import install_reader_commands
from bots.discord.views import PLATFORM, SORRY, port_of, respond, slowed_down
from bots.renderers import Flavor
from digest_core.catalogue import CommandSpec, menu, spec
from digest_core.commands import ADMIN, Capability, Reply, Request

if TYPE_CHECKING:
    from bots.discord.views import Interaction

log = logging.getLogger(__name__)

#: catalogue commands without a slash command of their own: ``/brief N`` is ``/briefs n``
FOLDED = {"brief": "briefs"}


def slash_commands() -> tuple[CommandSpec, ...]:
    """The catalogue's commands registered as slash commands (listed ones not :data:`FOLDED`)."""
    return tuple(s for s in menu(admin=True) if s.name not in FOLDED)


def _translations() -> dict[str, tuple[str, str]]:
    """English text (names and descriptions as Discord shows them by default) -> (简体, 繁體),
    from the catalogue. Localized names follow Discord's rules: lowercase, no spaces, at most
    32 characters. One English text has one translation (ValueError otherwise)."""
    pairs: dict[str, tuple[str, str]] = {}

    def add(en: str, zh: str, zh_tw: str) -> None:
        if pairs.setdefault(en, (zh, zh_tw)) != (zh, zh_tw):
            raise ValueError(f"digest_core.catalogue: {en!r} is translated twice differently")

    for entry in slash_commands():
        add(entry.name, entry.label_zh or entry.name, entry.label_zh_tw or entry.name)
        add(entry.en, entry.zh, entry.zh_tw)
        for arg in entry.args:
            add(arg.name, arg.label_zh, arg.label_zh_tw)
            add(arg.en, arg.zh, arg.zh_tw)
    return pairs


TRANSLATIONS = _translations()

_ = locale_str


def _name(name: str) -> locale_str:
    """The name of the slash command ``name`` (checked against the catalogue)."""
    return _(spec(name).name)


def _about(name: str) -> locale_str:
    """The description of the slash command ``name``, from the catalogue."""
    return _(spec(name).en)


def _renamed(name: str) -> dict[str, locale_str]:
    """The localizable option names of command ``name`` (``app_commands.rename``)."""
    return {arg.name: _(arg.name) for arg in spec(name).args}


def _described(name: str) -> dict[str, locale_str]:
    """The option descriptions of command ``name`` (``app_commands.describe``)."""
    return {arg.name: _(arg.en) for arg in spec(name).args}


class DigestTranslator(app_commands.Translator):
    """Chinese (simplified for zh-CN, traditional for zh-TW) from :data:`TRANSLATIONS`;
    English is the default text itself."""

    async def translate(
        self,
        string: locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        pair = TRANSLATIONS.get(string.message)
        if pair is None:
            return None
        if locale is discord.Locale.chinese:
            return pair[0]
        if locale is discord.Locale.taiwan_chinese:
            return pair[1]
        return None


def capabilities(interaction: Interaction) -> frozenset[Capability]:
    """Admin capabilities of the user behind ``interaction``, checked here in code (servers can
    override a command's ``default_permissions``).

    A user in ``admin_users`` is an admin everywhere, DMs included. Manage Server,
    Administrator and ``admin_roles`` count only in a server that holds one of the configured
    channels (anyone can add a public bot to a server of their own and manage it); in a DM
    nobody has server permissions.
    """
    client = interaction.client
    settings = client.settings
    user = interaction.user
    if user.id in settings.admin_users:
        return ADMIN
    guild_id = interaction.guild_id
    if guild_id is None or not isinstance(user, discord.Member):
        return frozenset()
    if guild_id not in client.admin_guild_ids():
        return frozenset()
    perms = interaction.permissions
    if perms.administrator or perms.manage_guild:
        return ADMIN
    roles = set(settings.admin_roles)
    if roles and any(role.id in roles for role in user.roles):
        return ADMIN
    return frozenset()


async def run_command(
    interaction: Interaction,
    command: str,
    *args: str,
    ephemeral: bool = False,
    dm_chat: bool = False,
) -> Reply | None:
    """Answer ``/command args`` through the core :class:`~digest_core.commands.Commands`.

    ``ephemeral`` is how the answer is meant to be seen (admin and subscription commands are
    only for the requester; the core may make any answer private, a refusal for instance).
    With ``dm_chat`` the request's chat is the user's DM channel (subscriptions go there).
    """
    port = port_of(interaction)
    if port is None:
        await interaction.response.send_message(
            "机器人尚未就绪 / the bot is not ready", ephemeral=True
        )
        return None
    granted = capabilities(interaction)
    if await slowed_down(interaction, admin=bool(granted)):
        return None

    async def work() -> Reply:
        chat = str(interaction.channel_id or "")
        if dm_chat:
            chat = str((await interaction.user.create_dm()).id)
        request = Request(
            command,
            tuple(a for a in args if a),
            platform=PLATFORM,
            flavor=Flavor.DISCORD,
            user=str(interaction.user.id),
            chat=chat,
            capabilities=granted,
        )
        return await port.handle(request)

    reply = await respond(interaction, work, ephemeral=ephemeral)
    if reply is not None:
        log.info(
            "discord: /%s by %s in %s: %s",
            command,
            interaction.user.id,
            interaction.channel_id,
            reply.status,
        )
    return reply


async def archive_dates(interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
    """Autocomplete: archive dates containing what was typed, newest first (25 at most); a
    reader sees only published ones (the embargo), an admin every date."""
    port = port_of(interaction)
    if port is None:
        return []
    typed = current.strip()
    admin = bool(capabilities(interaction))
    dates = sorted(await port.archive_dates(admin=admin), reverse=True)
    hits = [d.isoformat() for d in dates if typed in d.isoformat()]
    return [app_commands.Choice(name=d, value=d) for d in hits[:25]]


async def inactive_channels(
    interaction: Interaction, current: str
) -> list[app_commands.Choice[str]]:
    """Autocomplete for ``/reactivate``: the deactivated Discord targets (admins only; others
    get no choices), latest first, those containing what was typed."""
    port = port_of(interaction)
    if port is None or Capability.REPOST not in capabilities(interaction):
        return []
    typed = current.strip().lower().removeprefix(f"{PLATFORM}:")
    choices = []
    for inactive in await port.inactive_targets(PLATFORM):
        target_id = inactive.target.id
        label = target_id
        try:
            channel = interaction.client.get_channel(int(target_id))
        except ValueError:
            channel = None
        if channel is not None and getattr(channel, "name", None):
            label += f" #{getattr(channel, 'name', '')}"
        label += f" ({inactive.reason or 'gone'}, {inactive.since:%Y-%m-%d %H:%M})"
        if typed and typed not in label.lower():
            continue
        choices.append(app_commands.Choice(name=label[:100], value=target_id))
    return choices[:25]


def reactivate_args(target: str) -> tuple[str, ...] | None:
    """The core's argument for ``/reactivate target``: ``discord:ID`` for ``ID`` or
    ``discord:ID``; None for another platform's target (not from a Discord server)."""
    platform, _, target_id = target.strip().rpartition(":")
    if platform and platform.lower() != PLATFORM:
        return None
    return (f"{PLATFORM}:{target_id.strip()}",)


def install_commands(tree: app_commands.CommandTree[Any]) -> None:
    """Add every digest command to ``tree`` (global commands; ``discord sync`` registers them).

    Names, descriptions, options and their Chinese localizations come from the catalogue
    (:func:`slash_commands`); admin commands carry Manage Server as ``default_permissions``,
    only a hint (server admins can change it): :func:`capabilities` is what decides.
    """

    @tree.command(name=_name("today"), description=_about("today"))
    async def today(interaction: Interaction) -> None:
        await run_command(interaction, "today")

    @tree.command(name=_name("headline"), description=_about("headline"))
    async def headline(interaction: Interaction) -> None:
        await run_command(interaction, "headline")

    @tree.command(name=_name("briefs"), description=_about("briefs"))
    @app_commands.rename(**_renamed("briefs"))
    @app_commands.describe(**_described("briefs"))
    @app_commands.autocomplete(date=archive_dates)
    async def briefs(
        interaction: Interaction,
        n: app_commands.Range[int, 1, 99] | None = None,
        date: app_commands.Range[str, 1, 32] | None = None,
    ) -> None:
        args = [str(n)] if n is not None else []
        if date:
            args.append(date.strip())
        await run_command(interaction, "briefs", *args)

    @tree.command(name=_name("classic"), description=_about("classic"))
    async def classic(interaction: Interaction) -> None:
        await run_command(interaction, "classic")

    @tree.command(name=_name("toc"), description=_about("toc"))
    async def toc(interaction: Interaction) -> None:
        await run_command(interaction, "toc")

    @tree.command(name=_name("issue"), description=_about("issue"))
    @app_commands.rename(**_renamed("issue"))
    @app_commands.describe(**_described("issue"))
    @app_commands.autocomplete(date=archive_dates)
    async def issue(interaction: Interaction, date: app_commands.Range[str, 1, 32]) -> None:
        await run_command(interaction, "issue", date.strip())

    @tree.command(name=_name("search"), description=_about("search"))
    @app_commands.rename(**_renamed("search"))
    @app_commands.describe(**_described("search"))
    async def search(interaction: Interaction, keyword: app_commands.Range[str, 1, 64]) -> None:
        await run_command(interaction, "search", keyword)

    @tree.command(name=_name("unsubscribe"), description=_about("unsubscribe"))
    async def unsubscribe(interaction: Interaction) -> None:
        await run_command(interaction, "unsubscribe", ephemeral=True, dm_chat=True)

    @tree.command(name=_name("help"), description=_about("help"))
    async def help_(interaction: Interaction) -> None:
        await run_command(interaction, "help", ephemeral=True)

    @tree.command(name=_name("repost"), description=_about("repost"))
    @app_commands.rename(**_renamed("repost"))
    @app_commands.describe(**_described("repost"))
    @app_commands.autocomplete(date=archive_dates)
    async def repost(
        interaction: Interaction,
        date: app_commands.Range[str, 1, 32] | None = None,
        force: bool = False,
    ) -> None:
        args = [date.strip()] if date else []
        if force:
            args.append("force")
        await run_command(interaction, "repost", *args, ephemeral=True)

    @tree.command(name=_name("correct"), description=_about("correct"))
    @app_commands.rename(**_renamed("correct"))
    @app_commands.describe(**_described("correct"))
    @app_commands.autocomplete(date=archive_dates)
    async def correct(
        interaction: discord.Interaction[Any], date: app_commands.Range[str, 1, 32] | None = None
    ) -> None:
        await run_command(interaction, "correct", *([date.strip()] if date else []), ephemeral=True)

    @tree.command(name=_name("status"), description=_about("status"))
    async def status(interaction: Interaction) -> None:
        await run_command(interaction, "status", ephemeral=True)

    @tree.command(name=_name("reactivate"), description=_about("reactivate"))
    @app_commands.rename(**_renamed("reactivate"))
    @app_commands.describe(**_described("reactivate"))
    @app_commands.autocomplete(target=inactive_channels)
    async def reactivate(interaction: Interaction, target: app_commands.Range[str, 1, 64]) -> None:
        args = reactivate_args(target)
        if args is None:
            await interaction.response.send_message(
                "这里只能恢复 Discord 频道。/ Only Discord channels can be reactivated here.",
                ephemeral=True,
            )
            return
        await run_command(interaction, "reactivate", *args, ephemeral=True)

    def dated_admin(name: str) -> None:
        """``/name [date]``: an admin command on one day (default: the next issue)."""

        @tree.command(name=_name(name), description=_about(name))
        @app_commands.rename(**_renamed(name))
        @app_commands.describe(**_described(name))
        @app_commands.autocomplete(date=archive_dates)
        async def command(
            interaction: Interaction,
            date: app_commands.Range[str, 1, 32] | None = None,
        ) -> None:
            await run_command(interaction, name, *([date.strip()] if date else []), ephemeral=True)

    for name in ("preview", "approve", "hold"):
        dated_admin(name)

    install_reader_commands(tree, run_command)  # /subscribe and its options, follows

    for entry in slash_commands():
        command = tree.get_command(entry.name)
        if command is None:
            raise LookupError(f"digest_core.catalogue: /{entry.name} has no slash command")
        if entry.admin:
            command.default_permissions = discord.Permissions(manage_guild=True)

    @tree.error
    async def on_error(interaction: Interaction, error: app_commands.AppCommandError) -> None:
        log.error("discord: command %s failed: %r", interaction.command, error, exc_info=error)
        text = SORRY
        try:
            if interaction.response.is_done():
                await interaction.followup.send(text, ephemeral=True)
            else:
                await interaction.response.send_message(text, ephemeral=True)
        except discord.HTTPException:
            log.warning("discord: could not tell the user about the failed command")
