"""Slash commands generated from the core's command declarations: typed options, Chinese and
English names and descriptions."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import discord
from discord import app_commands
from discord.app_commands import locale_str

from bots.discord.views import (
    PLATFORM,
    SORRY,
    capabilities,
    port_of,
    request_of,
    respond,
    slowed_down,
)
from digest_core.port import (
    Argument,
    CommandSpec,
    Completion,
    Reply,
    Request,
    menu,
)
from digest_core.rendering import discord as discord_render

if TYPE_CHECKING:
    from bots.discord.views import Interaction
    from digest_core.port import Port

log = logging.getLogger(__name__)

#: catalogue commands without a slash command of their own: ``/brief N`` is ``/briefs n``
FOLDED = {s.name: s.covered_by for s in menu(admin=True) if s.covered_by}

_KEYWORD = inspect.Parameter.KEYWORD_ONLY


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
            raise ValueError(
                f"digest_core.commands.catalogue: {en!r} is translated twice differently"
            )

    for entry in slash_commands():
        add(entry.name, entry.label_zh or entry.name, entry.label_zh_tw or entry.name)
        add(entry.en, entry.zh, entry.zh_tw)
        for arg in entry.options:
            add(arg.name, arg.label_zh, arg.label_zh_tw)
            add(arg.en, arg.zh, arg.zh_tw)
    return pairs


TRANSLATIONS = _translations()

_ = locale_str


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


async def run_command(
    interaction: Interaction,
    command: str,
    *,
    values: Mapping[str, object] | None = None,
    ephemeral: bool = False,
    dm_chat: bool = False,
) -> Reply | None:
    """Answer ``/command`` through the core :class:`~digest_core.commands.dispatch.Commands`;
    ``values`` are the slash command's typed option values, passed as they are (the core
    reads them by the declaration's arguments).

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
        request = request_of(interaction, command, chat=chat, granted=granted, values=values)
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


class NotHere(app_commands.AppCommandError):
    """An option's value that this platform cannot act on; the message tells the user why."""


#: one value found while typing and how it is shown
Found = tuple[str, str]


class LookedUp(app_commands.Transformer):
    """A text option of argument ``arg`` of ``/command`` whose values are looked up while
    typing (the argument's :class:`~digest_core.port.Completion`; :data:`TRANSFORMERS` has a
    subclass for each): as long as the argument's kind allows, passed to the core as typed
    unless a subclass reads it (:meth:`transform`); at most ``Limits.choices`` choices
    (:meth:`look_up`)."""

    def __init__(self, command: CommandSpec, arg: Argument) -> None:
        self.command = command
        self.arg = arg

    @property
    def type(self) -> discord.AppCommandOptionType:
        return discord.AppCommandOptionType.string

    @property
    def min_value(self) -> int | None:
        return self.arg.kind.low

    @property
    def max_value(self) -> int | None:
        return self.arg.kind.high

    async def transform(self, interaction: discord.Interaction[Any], value: Any) -> Any:
        return value

    async def autocomplete(  # type: ignore[override]
        self, interaction: Interaction, value: str
    ) -> list[app_commands.Choice[str]]:
        port = port_of(interaction)
        if port is None:
            return []
        found = await self.look_up(port, interaction, str(value).strip())
        limits = discord_render.Limits
        return [
            app_commands.Choice(name=label[: limits.choice_name_maxlen], value=v)
            for v, label in found[: limits.choices]
        ]

    async def look_up(self, port: Port, interaction: Interaction, typed: str) -> list[Found]:
        """(value, label) of the values for what was ``typed``, best first."""
        raise NotImplementedError

    def asking(self, interaction: Interaction) -> Request:
        """The request of the user typing: ``/command`` as they would run it (the core checks
        what they may look up as it checks what they may run)."""
        return request_of(interaction, self.command.name)


class ArchiveDate(LookedUp):
    """A date of the archive (:attr:`Completion.DATES <digest_core.port.Completion.DATES>`):
    the dates containing what was typed, newest first; a reader sees only published ones (the
    embargo), an admin every date."""

    async def look_up(self, port: Port, interaction: Interaction, typed: str) -> list[Found]:
        admin = bool(capabilities(interaction))
        dates = sorted(await port.archive_dates(admin=admin), reverse=True)
        return [(d, d) for d in (d.isoformat() for d in dates) if typed in d]


class InactiveChannel(LookedUp):
    """A deactivated target (:attr:`Completion.INACTIVE_TARGETS
    <digest_core.port.Completion.INACTIVE_TARGETS>`): this platform's, those containing what
    was typed, latest first, for a user the command allows (the core decides: others get no
    choices); read as ``discord:ID``, another platform's target is :class:`NotHere`."""

    async def transform(self, interaction: discord.Interaction[Any], value: Any) -> str:
        platform, _, target_id = str(value).strip().rpartition(":")
        if platform and platform.lower() != PLATFORM:
            raise NotHere(
                "这里只能恢复 Discord 频道。/ Only Discord channels can be reactivated here."
            )
        return f"{PLATFORM}:{target_id.strip()}"

    async def look_up(self, port: Port, interaction: Interaction, typed: str) -> list[Found]:
        typed = typed.lower().removeprefix(f"{PLATFORM}:")
        found = []
        for inactive in await port.inactive_targets(self.asking(interaction)):
            target_id = inactive.target.id
            label = target_id
            try:
                channel = interaction.client.get_channel(int(target_id))
            except ValueError:
                channel = None
            if channel is not None and getattr(channel, "name", None):
                label += f" #{getattr(channel, 'name', '')}"
            label += f" ({inactive.reason or 'gone'}, {inactive.since:%Y-%m-%d %H:%M})"
            if not typed or typed in label.lower():
                found.append((target_id, label))
        return found


#: the transformer of an argument whose values are looked up, by where they are found
TRANSFORMERS: dict[Completion, type[LookedUp]] = {
    Completion.DATES: ArchiveDate,
    Completion.INACTIVE_TARGETS: InactiveChannel,
}


def _annotation(entry: CommandSpec, arg: Argument) -> Any:
    """The discord.py annotation of ``arg``'s kind: a number or text range, a choice of
    words, a flag, or the transformer of its :class:`~digest_core.port.Completion` where its
    values are looked up (and read) on Discord."""
    kind = arg.kind
    if arg.complete is not None:
        return app_commands.Transform[str, TRANSFORMERS[arg.complete](entry, arg)]
    if kind.type is bool:
        return bool
    if kind.choices:
        return Literal[kind.choices]
    return app_commands.Range[kind.type, kind.low, kind.high]


def slash_command(entry: CommandSpec) -> app_commands.Command[Any, ..., None]:
    """The slash command of ``entry``: its options typed from its arguments (required ones
    first, as discord.py orders them), names and descriptions localizable; a press runs the
    core command with the options' values as they are (the core reads them)."""
    options = entry.options

    async def callback(interaction: discord.Interaction[Any], **values: Any) -> None:
        await run_command(
            interaction, entry.name, values=values, ephemeral=entry.private, dm_chat=entry.dm
        )

    first = inspect.Parameter.POSITIONAL_ONLY
    params = [inspect.Parameter("interaction", first, annotation=discord.Interaction)]
    for arg in options:
        annotation = _annotation(entry, arg)
        default: Any = inspect.Parameter.empty
        if not arg.required:
            default = False if arg.kind.type is bool else None
            annotation = annotation if arg.kind.type is bool else annotation | None
        params.append(inspect.Parameter(arg.name, _KEYWORD, annotation=annotation, default=default))
    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__name__ = callback.__qualname__ = f"slash_{entry.name}"
    if options:
        app_commands.rename(**{a.name: _(a.name) for a in options})(callback)
        app_commands.describe(**{a.name: _(a.en) for a in options})(callback)
    command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name=_(entry.name), description=_(entry.en), callback=callback
    )
    if entry.admin:
        command.default_permissions = discord.Permissions(manage_guild=True)
    return command


def install_commands(tree: app_commands.CommandTree[Any]) -> None:
    """Add every digest command to ``tree`` (global commands; ``discord sync`` registers them).

    Each is :func:`slash_command` of a catalogue entry (:func:`slash_commands`): names,
    descriptions, typed options and their Chinese localizations come from the declaration;
    admin commands carry Manage Server as ``default_permissions``, only a hint (server admins
    can change it): the core checks the capability the command needs.
    """
    for entry in slash_commands():
        tree.add_command(slash_command(entry))

    @tree.error
    async def on_error(interaction: Interaction, error: app_commands.AppCommandError) -> None:
        if isinstance(error, NotHere):
            text = str(error)
        else:
            log.error("discord: command %s failed: %r", interaction.command, error, exc_info=error)
            text = SORRY
        try:
            if interaction.response.is_done():
                await interaction.followup.send(text, ephemeral=True)
            else:
                await interaction.response.send_message(text, ephemeral=True)
        except discord.HTTPException:
            log.warning("discord: could not tell the user about the failed command")
