"""Discord UI: replies to interactions, persistent section buttons, the repost confirmation."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeAlias, TypeVar

import discord

from bots.inflight import RESTARTING
from digest_core.port import (
    ACTION_PREFIX,
    ADMIN,
    BUTTON_PREFIX,
    CANCEL_DATA,
    CANCEL_LABEL,
    CHOICE_PREFIX,
    CONFIRM_LABEL,
    CONFIRM_TIMEOUT_SECONDS,
    Action,
    Capability,
    Choice,
    CommandButton,
    Message,
    Reply,
    Request,
    Section,
    Style,
    Verdict,
    confirm_data,
    notice,
    parse_action_data,
    parse_button_data,
    parse_choice,
    spec,
)
from digest_core.rendering import discord as discord_render

if TYPE_CHECKING:
    from bots.discord.client import DigestClient
    from digest_core.port import Port

    #: an interaction of our client: ``interaction.client`` is a DigestClient (typed, no
    #: duck typing); discord.py never evaluates the annotation of an interaction parameter
    Interaction: TypeAlias = discord.Interaction[DigestClient]

log = logging.getLogger(__name__)

#: Discord drops an interaction not answered within 3 s; work still running after this long
#: is deferred first ("digest-bot is thinking…") and answered with follow-ups.
DEFER_AFTER_SECONDS = 1.5
#: the platform name of Discord targets in the ledger and in core requests
PLATFORM = "discord"

#: What a user sees when answering failed (the cause is logged).
SORRY = "出错了，请稍后再试。/ Something went wrong; please try again later."


Work = Callable[[], Awaitable[Reply]]
_T = TypeVar("_T")


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


def request_of(
    interaction: Interaction,
    command: str,
    args: tuple[str, ...] = (),
    *,
    chat: str | None = None,
    granted: frozenset[Capability] | None = None,
    confirmed: bool = False,
    values: Mapping[str, object] | None = None,
) -> Request:
    """``command`` with ``args`` as the user behind ``interaction`` asks it of the core: in the
    interaction's channel (or ``chat``), with what :func:`capabilities` grants them (or
    ``granted``)."""
    return Request(
        command,
        args,
        platform=PLATFORM,
        flavor=discord_render,
        user=str(interaction.user.id),
        chat=str(interaction.channel_id or "") if chat is None else chat,
        capabilities=capabilities(interaction) if granted is None else granted,
        confirmed=confirmed,
        values=values,
    )


def port_of(interaction: Interaction) -> Port | None:
    """What ``interaction`` may ask of the core (None when the bot only syncs commands)."""
    return interaction.client.port


async def tell_restarting(interaction: Interaction) -> None:
    """:data:`~bots.inflight.RESTARTING`, to the user only: the initial response if it is still
    open, else a follow-up (after a defer, it replaces "thinking…")."""
    if interaction.response.is_done():
        await interaction.followup.send(RESTARTING, ephemeral=True)
    else:
        await interaction.response.send_message(RESTARTING, ephemeral=True)


async def tracked(
    interaction: Interaction, answer: Callable[[], Awaitable[Reply | None]]
) -> Reply | None:
    """Run ``answer`` through the client's in-flight tracker: a shutdown may cut it short,
    and the user is then told to try again (at once, once the shutdown has begun)."""
    in_flight = interaction.client.in_flight
    if in_flight is None:
        return await answer()
    return await in_flight.run(
        f"discord interaction {interaction.id}",
        answer,
        apologise=lambda: tell_restarting(interaction),
    )


class PayloadEmbed(discord.Embed):
    """An embed that serialises to exactly the rendered JSON (``Embed.from_dict`` round trips
    add keys such as ``flags``), for replies sent through discord.py's interaction API."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__()
        self._payload = dict(data)

    def to_dict(self) -> Any:
        return dict(self._payload)


def no_mentions() -> discord.AllowedMentions:
    """discord.py's form of the renderer's ``ALLOWED_MENTIONS`` (``{"parse": []}``): pings
    nobody; ``to_dict()`` equals that constant (tests/bots/discord checks it)."""
    return discord.AllowedMentions.none()


def message_kwargs(message: Message) -> dict[str, Any]:
    """A rendered Discord payload as discord.py keyword arguments (content, embeds, and its
    section or action buttons as a view); mentions are always disabled."""
    payload = message.payload
    kwargs: dict[str, Any] = {"allowed_mentions": no_mentions()}
    if payload.get("content"):
        kwargs["content"] = payload["content"]
    if payload.get("embeds"):
        kwargs["embeds"] = [PayloadEmbed(e) for e in payload["embeds"]]
    view = buttons_view(payload.get("components", []))
    if view is not None:
        kwargs["view"] = view
    return kwargs


def buttons_view(rows: Sequence[dict[str, Any]]) -> discord.ui.View | None:
    """The persistent section and action buttons of rendered ``components``, as a view (None
    when there are none): a preview shows the same buttons as the post."""
    items: list[discord.ui.Item[Any]] = []
    for row in rows:
        for button in row.get("components", []):
            custom_id = str(button.get("custom_id", ""))
            if parse_button_data(custom_id) is not None:
                items.append(SectionButton(custom_id))
            elif parse_action_data(custom_id) is not None:
                items.append(ActionButton(custom_id, label=str(button.get("label", ""))))
    if not items:
        return None
    view = discord.ui.View(timeout=None)
    for item in items:
        view.add_item(item)
    return view


#: Discord's style of an action button's
BUTTON_STYLES = {
    Style.PRIMARY: discord.ButtonStyle.primary,
    Style.DANGER: discord.ButtonStyle.danger,
    Style.SECONDARY: discord.ButtonStyle.secondary,
}


def action_row(actions: Sequence[CommandButton]) -> dict[str, Any]:
    """One row of buttons for ``actions`` in Discord's component JSON."""
    return {
        "type": 1,
        "components": [
            {
                "type": 2,
                "style": BUTTON_STYLES[a.style].value,
                "label": a.label,
                "custom_id": a.data,
            }
            for a in actions
        ],
    }


async def send_all(
    interaction: Interaction,
    messages: Sequence[Message],
    *,
    ephemeral: bool,
    view: discord.ui.View | None = None,
) -> None:
    """Send ``messages`` in order as the answer to ``interaction``: the initial response if it
    is still open, else follow-ups (the first one after a defer replaces "thinking…").
    ``view`` goes on the last message."""
    for i, message in enumerate(messages):
        kwargs = message_kwargs(message)
        if view is not None and i == len(messages) - 1:
            kwargs["view"] = view
        if not interaction.response.is_done():
            await interaction.response.send_message(ephemeral=ephemeral, **kwargs)
        else:
            await interaction.followup.send(ephemeral=ephemeral, **kwargs)


async def respond(
    interaction: Interaction,
    work: Work,
    *,
    ephemeral: bool,
) -> Reply | None:
    """Run ``work`` and send its reply, deferring first if it is not done within
    :data:`DEFER_AFTER_SECONDS` (Discord's 3-second rule).

    ``ephemeral`` is the answer's visibility as far as known before the work runs (it decides
    the defer); a reply the core marks ``private`` is always ephemeral. A confirmation reply
    gets Confirm/Cancel buttons. Returns the reply, or None when the work failed (the user
    then gets an apology and the error is logged) or a shutdown cut it short (the user is told
    to try again).
    """
    return await tracked(interaction, lambda: _respond(interaction, work, ephemeral=ephemeral))


async def _respond(interaction: Interaction, work: Work, *, ephemeral: bool) -> Reply | None:
    task = asyncio.ensure_future(work())
    try:
        done, _ = await asyncio.wait({task}, timeout=DEFER_AFTER_SECONDS)
        if not done:
            try:
                await interaction.response.defer(ephemeral=ephemeral, thinking=True)
            except discord.HTTPException:
                # too late to answer; let the work finish (it may be an admin action) unheard
                task.add_done_callback(_log_unheard)
                raise
    except asyncio.CancelledError:
        task.cancel()  # the work is ours to end (awaiting it below ends it with us)
        raise
    try:
        reply = await task
    except Exception:
        log.exception("discord: answering interaction %s failed", interaction.id)
        await send_all(
            interaction,
            notice(SORRY, discord_render),
            ephemeral=True,
        )
        return None
    private = ephemeral or reply.private
    if private and not ephemeral and interaction.response.is_done():
        # deferred in public, yet the answer is only for the requester: drop "thinking…"
        await interaction.delete_original_response()
    messages: Sequence[Message] = reply.messages
    view: discord.ui.View | None = None
    if reply.confirm is not None:
        port = port_of(interaction)
        if port is not None:
            prompt = port.confirmations.prompt(reply, limit=discord_render.Limits.custom_id_maxlen)
            messages = prompt.messages
            view = ConfirmView(reply.confirm) if prompt.buttons else None
    elif reply.choices:
        view = choices_view(reply.choices)
    await send_all(interaction, messages, ephemeral=private, view=view)
    return reply


def _log_unheard(task: asyncio.Future[Reply]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("discord: unanswered interaction work failed", exc_info=task.exception())


async def slowed_down(interaction: Interaction, *, admin: bool) -> bool:
    """True when a reader is over the per-user flood limit; they were told, privately."""
    limiter = interaction.client.limiter
    if admin or limiter is None:
        return False
    if limiter.check(interaction.user.id) is Verdict.ALLOW:
        return False
    log.info("discord: %s is over the command limit", interaction.user.id)
    await interaction.response.send_message(limiter.slow_down(), ephemeral=True)
    return True


# --------------------------------------------------------------------------- section buttons

_SECTIONS = "|".join(re.escape(s.value) for s in Section)


class _Persistent:
    """What the buttons below share: each is made again from its custom id alone (so a button
    on a message sent before a restart still works), and a press reaches :meth:`pressed` only
    while the bot has a core to ask."""

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> Self:
        return cls(match.string)  # type: ignore[call-arg]  # (each button's __init__ takes it)

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        # discord.py types a DynamicItem's interaction loosely; ours come to our client
        ours: Interaction = interaction
        port = port_of(ours)
        if port is not None:
            await self.pressed(ours, port)

    async def pressed(self, interaction: Interaction, port: Port) -> None:
        raise NotImplementedError


def _parsed(parse: Callable[[str], _T | None], custom_id: str, what: str) -> _T:
    """What ``parse`` reads in a button's ``custom_id``; ValueError when it is not ``what``."""
    parsed = parse(custom_id)
    if parsed is None:
        raise ValueError(f"not {what}: {custom_id!r}")
    return parsed


class SectionButton(
    _Persistent,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=rf"^{BUTTON_PREFIX}:(?P<date>\d{{4}}-\d{{2}}-\d{{2}}):(?P<section>{_SECTIONS})$",
):
    """A 重点 / 简讯 / 经典回顾 button on a post; its custom id (``dg:DATE:section``, from
    :func:`digest_core.rendering.button_data`) names the issue, so buttons on old posts keep
    working after restarts. Pressing one answers, only to the presser, with that part of that
    issue."""

    def __init__(self, custom_id: str) -> None:
        self.date, self.section = _parsed(parse_button_data, custom_id, "a section button id")
        super().__init__(
            discord.ui.Button(
                label=self.section.label, style=discord.ButtonStyle.secondary, custom_id=custom_id
            )
        )

    async def pressed(self, interaction: Interaction, port: Port) -> None:
        log.info("discord: %s pressed %s of %s", interaction.user.id, self.section.value, self.date)
        admin = interaction.user.id in interaction.client.settings.admin_users
        if await slowed_down(interaction, admin=admin):
            return
        request = request_of(interaction, self.section.value)  # admins press previews' buttons

        async def work() -> Reply:
            return await port.section(request, self.date, self.section)

        await respond(interaction, work, ephemeral=True)


# --------------------------------------------------------------------------- action buttons


class ActionButton(
    _Persistent,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=rf"^{ACTION_PREFIX}:(?P<command>[a-z]+)(?: (?P<args>.*))?$",
):
    """An Approve / Hold button (``ac:approve DATE REVISION``, see digest_core.commands.buttons):
    the core runs the command as the presser, who must be an admin (else it refuses and
    audits); the answer is ephemeral; its style is its command's declared one. Persistent: a
    review sent before a restart still works."""

    def __init__(self, custom_id: str, *, label: str = "") -> None:
        self.command, self.args = _parsed(parse_action_data, custom_id, "an action button id")
        try:
            style = BUTTON_STYLES[spec(self.command).button_style]
        except KeyError:  # not a command: the core answers the press
            style = discord.ButtonStyle.secondary
        super().__init__(
            discord.ui.Button(label=label or self.command, style=style, custom_id=custom_id)
        )

    async def pressed(self, interaction: Interaction, port: Port) -> None:
        log.info("discord: %s pressed %s %s", interaction.user.id, self.command, self.args)
        request = request_of(interaction, self.command, self.args, confirmed=True)
        await respond(interaction, lambda: port.handle(request), ephemeral=True)


# --------------------------------------------------------------------------- reader choices


class ChoiceButton(
    _Persistent,
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=rf"^{re.escape(CHOICE_PREFIX)}[a-z]+( [A-Za-z0-9:]+)*$",
):
    """A button under ``/settings`` (a :class:`~digest_core.commands.Choice`): its custom id
    is the reader command it runs (``rd:subscribe 07:00``), for the presser, answered only to
    them; it keeps working after restarts."""

    def __init__(self, custom_id: str, label: str = "") -> None:
        self.command, self.args = _parsed(parse_choice, custom_id, "a reader choice")
        super().__init__(
            discord.ui.Button(
                label=label or custom_id, style=discord.ButtonStyle.secondary, custom_id=custom_id
            )
        )

    async def pressed(self, interaction: Interaction, port: Port) -> None:
        if await slowed_down(interaction, admin=False):
            return

        async def work() -> Reply:
            dm = await interaction.user.create_dm()  # preferences belong to the reader's DM
            request = request_of(
                interaction, self.command, self.args, chat=str(dm.id), granted=frozenset()
            )
            return await port.handle(request)

        await respond(interaction, work, ephemeral=True)


def choices_view(rows: Sequence[Sequence[Choice]]) -> discord.ui.View:
    """The buttons of a reply's choices, one row each (within Discord's rows and buttons per
    row, ``Limits``)."""
    view = discord.ui.View(timeout=None)
    limits = discord_render.Limits
    for row, choices in enumerate(rows[: limits.action_rows_per_message]):
        for choice in choices[: limits.buttons_per_row]:
            button = ChoiceButton(choice.data, choice.label[: limits.button_label_maxlen])
            button.item.row = row
            view.add_item(button)
    return view


# --------------------------------------------------------------------------- repost confirmation


class ConfirmView(discord.ui.View):
    """Confirm / Cancel under an admin action; what a press does is the core's
    (:mod:`digest_core.commands.confirmation`): only the admin who asked may press them here.

    Confirm re-issues ``request`` (already ``confirmed``) and answers with its outcome,
    ephemerally, as a follow-up (a repost can take longer than 3 seconds).
    """

    def __init__(self, request: Request, *, timeout: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        super().__init__(timeout=timeout)
        self.request = request

    @discord.ui.button(label=CONFIRM_LABEL, style=discord.ButtonStyle.danger)
    async def confirm(self, interaction: Interaction, button: discord.ui.Button[Any]) -> None:
        data = confirm_data(self.request, limit=discord_render.Limits.custom_id_maxlen) or ""
        await self._pressed(interaction, data)

    @discord.ui.button(label=CANCEL_LABEL, style=discord.ButtonStyle.secondary)
    async def cancel(self, interaction: Interaction, button: discord.ui.Button[Any]) -> None:
        await self._pressed(interaction, CANCEL_DATA)

    async def _pressed(self, interaction: Interaction, data: str) -> None:
        port = port_of(interaction)
        if port is None:
            return
        # only who asked may press (asked_by below): with what they were granted then
        by = request_of(interaction, "", granted=self.request.capabilities)
        confirmations = port.confirmations
        async with confirmations.press(
            data, by=by, prompt=id(self), asked_by=self.request.user
        ) as decision:
            if decision.action in (Action.REFUSE, Action.BUSY, Action.IGNORE):
                text = decision.text or SORRY
                await interaction.response.send_message(text, ephemeral=True)
                return
            self.stop()
            await interaction.response.edit_message(
                content=_content(decision.note), embeds=[], view=None
            )
            if decision.action is Action.RUN:
                reply = await respond_followup(interaction, lambda: confirmations.run(decision))
                if reply is not None:
                    log.info("discord: /%s by %s: %s", self.request.command, by.user, reply.status)


async def respond_followup(interaction: Interaction, work: Work) -> Reply | None:
    """Run ``work`` after the interaction was answered and send its reply as ephemeral
    follow-ups (the interaction token lasts 15 minutes)."""
    return await tracked(interaction, lambda: _respond_followup(interaction, work))


async def _respond_followup(interaction: Interaction, work: Work) -> Reply | None:
    try:
        reply = await work()
    except Exception:
        log.exception("discord: follow-up of interaction %s failed", interaction.id)
        reply = Reply(notice(SORRY, discord_render))
    await send_all(interaction, reply.messages, ephemeral=True)
    return reply


def _content(text: str) -> str:
    return str(notice(text, discord_render)[0].payload["content"])
