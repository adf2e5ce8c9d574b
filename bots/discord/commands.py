"""Slash commands over the core commands, with Chinese and English names and descriptions."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
from discord import app_commands
from discord.app_commands import locale_str

from bots.discord.views import SORRY, respond, service_of
from bots.renderers import Flavor
from digest_core.commands import ADMIN, Capability, Reply, Request

log = logging.getLogger(__name__)

#: the platform name of Discord targets in the ledger and in core requests
PLATFORM = "discord"

#: English text (names and descriptions as Discord shows them by default) -> (简体, 繁體).
#: Localized names follow Discord's rules: lowercase, no spaces, at most 32 characters.
TRANSLATIONS: dict[str, tuple[str, str]] = {
    "today": ("今日", "今日"),
    "Today's issue (the latest one if today's is not out yet)": (
        "今天的日报（还没发布时给出最新一期）",
        "今天的日報（還沒發布時給出最新一期）",
    ),
    "headline": ("重点", "重點"),
    "The headline story of today's issue": ("今天的重点", "今天的重點"),
    "briefs": ("简讯", "簡訊"),
    "The briefs of today's issue, or one of them": (
        "今天的简讯，或其中一条",
        "今天的簡訊，或其中一條",
    ),
    "n": ("编号", "編號"),
    "Only brief number n": ("只看第 n 条简讯", "只看第 n 條簡訊"),
    "classic": ("经典回顾", "經典回顧"),
    "The classic review of today's issue": ("今天的经典回顾", "今天的經典回顧"),
    "issue": ("往期", "往期"),
    "The issue of a given date": ("某一天的日报", "某一天的日報"),
    "date": ("日期", "日期"),
    "YYYY-MM-DD (pick one from the list)": (
        "日期 YYYY-MM-DD（可从列表中选）",
        "日期 YYYY-MM-DD（可從列表中選）",
    ),
    "search": ("搜索", "搜尋"),
    "Search past issues": ("搜索往期", "搜尋往期"),
    "keyword": ("关键词", "關鍵詞"),
    "A word to look for": ("要找的词", "要找的詞"),
    "subscribe": ("订阅", "訂閱"),
    "Get the daily issue by direct message": ("每天私信接收日报", "每天私訊接收日報"),
    "unsubscribe": ("取消订阅", "取消訂閱"),
    "Stop the daily direct message": ("不再私信接收日报", "不再私訊接收日報"),
    "repost": ("重新推送", "重新推送"),
    "Admins: post an issue to every channel again": (
        "管理员：把某一期重新推送到所有频道",
        "管理員：把某一期重新推送到所有頻道",
    ),
    "YYYY-MM-DD (default: today)": ("日期 YYYY-MM-DD（默认今天）", "日期 YYYY-MM-DD（預設今天）"),
    "force": ("全部重发", "全部重發"),
    "Send every part again, not only what is missing": (
        "全部重发，而不只是补发缺失的部分",
        "全部重發，而不只是補發缺失的部分",
    ),
    "reactivate": ("恢复推送", "恢復推送"),
    "Admins: post to a deactivated channel again": (
        "管理员：恢复向已停用的频道推送",
        "管理員：恢復向已停用的頻道推送",
    ),
    "target": ("频道", "頻道"),
    "Channel id (pick one from the list)": (
        "频道 ID（可从列表中选）",
        "頻道 ID（可從列表中選）",
    ),
    "status": ("状态", "狀態"),
    "Admins: next post, last deliveries, failures": (
        "管理员：下次推送、最近的推送、失败",
        "管理員：下次推送、最近的推送、失敗",
    ),
}

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


def capabilities(interaction: discord.Interaction[Any]) -> frozenset[Capability]:
    """Admin capabilities of the user behind ``interaction``, checked here in code (servers can
    override a command's ``default_permissions``).

    A user in ``admin_users`` is an admin everywhere, DMs included. Manage Server,
    Administrator and ``admin_roles`` count only in a server that holds one of the configured
    channels (anyone can add a public bot to a server of their own and manage it); in a DM
    nobody has server permissions.
    """
    client = interaction.client
    settings = getattr(client, "settings", None)
    user = interaction.user
    if settings is None:
        return frozenset()
    if user.id in settings.admin_users:
        return ADMIN
    guild_id = interaction.guild_id
    if guild_id is None or not isinstance(user, discord.Member):
        return frozenset()
    admin_guilds = getattr(client, "admin_guild_ids", None)
    if admin_guilds is None or guild_id not in admin_guilds():
        return frozenset()
    perms = interaction.permissions
    if perms.administrator or perms.manage_guild:
        return ADMIN
    roles = set(settings.admin_roles)
    if roles and any(role.id in roles for role in user.roles):
        return ADMIN
    return frozenset()


async def run_command(
    interaction: discord.Interaction[Any],
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
    service = service_of(interaction)
    if service is None:
        await interaction.response.send_message(
            "机器人尚未就绪 / the bot is not ready", ephemeral=True
        )
        return None
    commands = service.commands

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
            capabilities=capabilities(interaction),
        )
        return await commands.handle(request)

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


async def archive_dates(
    interaction: discord.Interaction[Any], current: str
) -> list[app_commands.Choice[str]]:
    """Autocomplete: archive dates containing what was typed, newest first (25 at most)."""
    service = service_of(interaction)
    if service is None:
        return []
    typed = current.strip()
    dates = sorted(await asyncio.to_thread(service.archive.dates), reverse=True)  # file I/O
    hits = [d.isoformat() for d in dates if typed in d.isoformat()]
    return [app_commands.Choice(name=d, value=d) for d in hits[:25]]


async def inactive_channels(
    interaction: discord.Interaction[Any], current: str
) -> list[app_commands.Choice[str]]:
    """Autocomplete for ``/reactivate``: the deactivated Discord targets (admins only; others
    get no choices), latest first, those containing what was typed."""
    service = service_of(interaction)
    if service is None or Capability.REPOST not in capabilities(interaction):
        return []
    typed = current.strip().lower().removeprefix(f"{PLATFORM}:")
    choices = []
    for inactive in await service.ledger.inactive_targets(PLATFORM):
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
    """Add every digest command to ``tree`` (global commands; ``discord sync`` registers them)."""

    @tree.command(
        name=_("today"), description=_("Today's issue (the latest one if today's is not out yet)")
    )
    async def today(interaction: discord.Interaction[Any]) -> None:
        await run_command(interaction, "today")

    @tree.command(name=_("headline"), description=_("The headline story of today's issue"))
    async def headline(interaction: discord.Interaction[Any]) -> None:
        await run_command(interaction, "headline")

    @tree.command(name=_("briefs"), description=_("The briefs of today's issue, or one of them"))
    @app_commands.rename(n=_("n"))
    @app_commands.describe(n=_("Only brief number n"))
    async def briefs(
        interaction: discord.Interaction[Any], n: app_commands.Range[int, 1, 99] | None = None
    ) -> None:
        await run_command(interaction, "briefs", *([str(n)] if n is not None else []))

    @tree.command(name=_("classic"), description=_("The classic review of today's issue"))
    async def classic(interaction: discord.Interaction[Any]) -> None:
        await run_command(interaction, "classic")

    @tree.command(name=_("issue"), description=_("The issue of a given date"))
    @app_commands.rename(date=_("date"))
    @app_commands.describe(date=_("YYYY-MM-DD (pick one from the list)"))
    @app_commands.autocomplete(date=archive_dates)
    async def issue(
        interaction: discord.Interaction[Any], date: app_commands.Range[str, 1, 32]
    ) -> None:
        await run_command(interaction, "issue", date.strip())

    @tree.command(name=_("search"), description=_("Search past issues"))
    @app_commands.rename(keyword=_("keyword"))
    @app_commands.describe(keyword=_("A word to look for"))
    async def search(
        interaction: discord.Interaction[Any], keyword: app_commands.Range[str, 1, 64]
    ) -> None:
        await run_command(interaction, "search", keyword)

    @tree.command(name=_("subscribe"), description=_("Get the daily issue by direct message"))
    async def subscribe(interaction: discord.Interaction[Any]) -> None:
        await run_command(interaction, "subscribe", ephemeral=True, dm_chat=True)

    @tree.command(name=_("unsubscribe"), description=_("Stop the daily direct message"))
    async def unsubscribe(interaction: discord.Interaction[Any]) -> None:
        await run_command(interaction, "unsubscribe", ephemeral=True, dm_chat=True)

    @tree.command(name=_("repost"), description=_("Admins: post an issue to every channel again"))
    @app_commands.rename(date=_("date"), force=_("force"))
    @app_commands.describe(
        date=_("YYYY-MM-DD (default: today)"),
        force=_("Send every part again, not only what is missing"),
    )
    @app_commands.autocomplete(date=archive_dates)
    # only a hint (server admins can change it); capabilities() is what decides
    @app_commands.default_permissions(manage_guild=True)
    async def repost(
        interaction: discord.Interaction[Any],
        date: app_commands.Range[str, 1, 32] | None = None,
        force: bool = False,
    ) -> None:
        args = [date.strip()] if date else []
        if force:
            args.append("force")
        await run_command(interaction, "repost", *args, ephemeral=True)

    @tree.command(name=_("status"), description=_("Admins: next post, last deliveries, failures"))
    @app_commands.default_permissions(manage_guild=True)
    async def status(interaction: discord.Interaction[Any]) -> None:
        await run_command(interaction, "status", ephemeral=True)

    @tree.command(
        name=_("reactivate"), description=_("Admins: post to a deactivated channel again")
    )
    @app_commands.rename(target=_("target"))
    @app_commands.describe(target=_("Channel id (pick one from the list)"))
    @app_commands.autocomplete(target=inactive_channels)
    @app_commands.default_permissions(manage_guild=True)
    async def reactivate(
        interaction: discord.Interaction[Any], target: app_commands.Range[str, 1, 64]
    ) -> None:
        args = reactivate_args(target)
        if args is None:
            await interaction.response.send_message(
                "这里只能恢复 Discord 频道。/ Only Discord channels can be reactivated here.",
                ephemeral=True,
            )
            return
        await run_command(interaction, "reactivate", *args, ephemeral=True)

    @tree.error
    async def on_error(
        interaction: discord.Interaction[Any], error: app_commands.AppCommandError
    ) -> None:
        log.error("discord: command %s failed: %r", interaction.command, error, exc_info=error)
        text = SORRY
        try:
            if interaction.response.is_done():
                await interaction.followup.send(text, ephemeral=True)
            else:
                await interaction.response.send_message(text, ephemeral=True)
        except discord.HTTPException:
            log.warning("discord: could not tell the user about the failed command")
