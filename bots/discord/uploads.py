"""An admin's issue file sent to the bot in a direct message (a Discord attachment)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import discord
from discord.http import Route

from bots.inflight import RESTARTING
from digest_core.port import ADMIN, Message, Request, TransientError, notice
from digest_core.rendering import discord as discord_render
from digest_core.rendering.discord import ALLOWED_MENTIONS

if TYPE_CHECKING:
    from bots.discord.client import DigestClient

log = logging.getLogger(__name__)


async def on_direct_message(client: DigestClient, message: discord.Message) -> None:
    """A DM carrying a file: the first attachment is an issue file for the core
    (:meth:`Port.receive_issue_file`; an admin is a user of ``admin_users``: in a DM nobody
    has server roles), downloaded from the CDN only once the core takes it. The answer,
    errors or a preview, goes back to the DM. Messages in servers, from bots, or without a
    file are not ours (the bot reads only DMs; commands are slash commands)."""
    port, in_flight = client.port, client.in_flight
    if (
        message.guild is not None
        or message.author.bot
        or not message.attachments
        or port is None
        or in_flight is None
    ):
        return
    channel_id = message.channel.id
    attachment = message.attachments[0]
    admin = message.author.id in client.settings.admin_users
    request = Request(
        "upload", tuple(message.content.split()), platform="discord", flavor=discord_render,
        user=str(message.author.id), chat=str(channel_id),
        capabilities=ADMIN if admin else frozenset(),
    )  # fmt: skip

    async def download() -> bytes:
        try:
            async with asyncio.timeout(client.settings.request_timeout_seconds):
                return await attachment.read()
        except (discord.HTTPException, TimeoutError, OSError) as exc:
            raise TransientError(str(exc) or type(exc).__name__, platform="discord") from exc

    async def handle() -> None:
        reply = await port.receive_issue_file(
            request, name=attachment.filename, size=attachment.size, download=download
        )
        await _send(client, channel_id, reply.messages)

    async def apologise() -> None:
        await _send(client, channel_id, notice(RESTARTING, discord_render))

    await in_flight.run(f"discord DM file from {message.author.id}", handle, apologise=apologise)


async def _send(client: DigestClient, channel_id: int, messages: list[Message]) -> None:
    """Post the rendered ``messages`` to the DM channel (nobody pinged), best effort."""
    route = Route("POST", "/channels/{channel_id}/messages", channel_id=channel_id)
    for m in messages:
        payload: dict[str, Any] = {**m.payload, "allowed_mentions": dict(ALLOWED_MENTIONS)}
        try:
            async with asyncio.timeout(client.settings.request_timeout_seconds):
                await client.http.request(route, json=payload)
        except (discord.HTTPException, TimeoutError, OSError) as exc:
            log.warning("discord: the answer to a DM file was not sent: %s", exc)
            return
