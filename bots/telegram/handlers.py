"""Telegram update handlers: thin wrappers that turn updates into core Requests and send replies."""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from telegram import (
    CallbackQuery,
    InlineQueryResultArticle,
    InputTextMessageContent,
    LinkPreviewOptions,
    Update,
)
from telegram import Message as TgMessage
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import (
    CallbackQueryHandler,
    ContextTypes,
    InlineQueryHandler,
    MessageHandler,
    filters,
)

from bots.inflight import RESTARTING
from bots.telegram.wire import place
from digest_core.port import (
    ADMIN,
    PRIVATE_COMMANDS,
    Action,
    Article,
    Choice,
    DeliveryError,
    Message,
    Reply,
    Request,
    Section,
    Status,
    TargetGone,
    TargetKind,
    TransientError,
    UserRateLimiter,
    Verdict,
    notice,
    parse_action_data,
    parse_button_data,
    parse_choice,
    parse_command_line,
    plain_renderer,
    preview,
)
from digest_core.rendering import telegram as telegram_render

if TYPE_CHECKING:
    from telegram.ext import Application

    from bots.telegram.adapter import TelegramAdapter
    from digest_core.port import Port

log = logging.getLogger(__name__)

#: a PTB handler callback of ours
Callback = Callable[[Update, ContextTypes.DEFAULT_TYPE], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class AnswerTiming:
    """How long one command or button press took in the bot (real seconds)."""

    command: str
    user: int
    #: from the handler's start to the last reply sent
    total: float
    #: of which waiting for the pacing budget (Telegram's flood limits)
    paced: float


class Handlers:
    """Commands, section buttons and confirmation buttons of one running bot.

    Every handler is a few lines over :meth:`digest_core.commands.dispatch.Commands.handle`; what is
    Telegram's (the @botname suffix, private vs group chats, callback data, keyboards) is
    decided here and nowhere in the core.

    Section buttons (``dg:DATE:section`` on channel posts) answer the person who pressed by
    private message with that part of that issue; Telegram lets a bot write only to users who
    started it, so otherwise the press is answered with an alert asking them to.
    """

    def __init__(self, adapter: TelegramAdapter, port: Port) -> None:
        self.adapter = adapter
        self.port = port
        self.limiter = UserRateLimiter.of(adapter.settings, adapter.clock)

    def install(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        app.add_handler(
            MessageHandler(
                filters.UpdateType.MESSAGE & filters.COMMAND, self._tracked(self.on_command)
            )
        )
        app.add_handler(
            MessageHandler(
                filters.UpdateType.MESSAGE & filters.ChatType.PRIVATE & filters.TEXT,
                self._tracked(self.on_text),
            )
        )
        app.add_handler(
            MessageHandler(
                filters.UpdateType.MESSAGE & filters.ChatType.PRIVATE & filters.Document.ALL,
                self._tracked(self.on_document),
            )
        )
        app.add_handler(CallbackQueryHandler(self._tracked(self.on_button)))
        app.add_handler(InlineQueryHandler(self._tracked(self.on_inline)))
        app.add_error_handler(self.on_error)

    def _tracked(self, callback: Callback) -> Callback:
        """``callback`` run through the adapter's in-flight tracker: a shutdown may cut it
        short, and then the user is told to try again (see :meth:`_restarting`)."""

        async def handle(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            await self.adapter.in_flight.run(
                f"telegram update {update.update_id}",
                lambda: callback(update, context),
                apologise=lambda: self._restarting(update),
            )

        return handle

    async def _restarting(self, update: Update) -> None:
        """Tell the sender of ``update`` that the bot is restarting: a message in the chat
        of a command; for a button press, an alert, or (the press was answered already, as a
        confirmation is) a message to the chat of the prompt, or privately from a channel."""
        query = update.callback_query
        if query is not None:
            with contextlib.suppress(TelegramError):
                await query.answer(RESTARTING, show_alert=True)
                return
            chat = query.message.chat if query.message is not None else None
            if chat is None or chat.type == ChatType.CHANNEL:
                await self.adapter.tell_restarting(query.from_user.id, TargetKind.PRIVATE)
            else:
                here = place_of(query.message, chat.id)
                await self.adapter.tell_restarting(here, kind_of(chat.type))
            return
        chat = update.effective_chat
        if chat is not None and chat.type != ChatType.CHANNEL:
            here = place_of(update.effective_message, chat.id)
            await self.adapter.tell_restarting(here, kind_of(chat.type))

    # ------------------------------------------------------------ commands

    async def on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        started = time.perf_counter()
        message, user, chat = update.effective_message, update.effective_user, update.effective_chat
        if message is None or message.text is None or user is None or chat is None:
            return
        parsed = parse_command_line(message.text)
        if parsed is None or not self._addressed_to_us(message.text):
            return
        name, args = parsed
        private = chat.type == ChatType.PRIVATE
        if not private and name not in self.port.command_names:
            return  # probably another bot's command
        here = place_of(message, chat.id)  # a command in a forum topic is answered there
        admin = user.id in self.adapter.admins
        if not admin and not await self._allowed(user.id, here, private):
            return
        kind = TargetKind.PRIVATE if private else TargetKind.GROUP
        paced: list[float] = []
        if name in PRIVATE_COMMANDS and not private:
            bot = self.adapter.username
            text = (
                f"订阅请私信 @{bot} 发送 /{name}。\n"
                f"To {name}, send /{name} to @{bot} in a private chat."
            )
            messages = notice(text, telegram_render, mentions=True)  # the bot's own @name
            await self._send(here, kind, messages, paced)
            self._timed(name, user.id, started, paced)
            return
        request = Request(
            name, args, platform=self.adapter.name, flavor=telegram_render, user=str(user.id),
            chat=str(chat.id), capabilities=ADMIN if admin else frozenset(),
        )  # fmt: skip
        reply = await self._handle(request)
        messages = reply.messages
        if reply.confirm is not None:
            messages = self._with_confirm_buttons(reply)
        elif reply.choices:
            messages = with_choices(messages, reply.choices)
        if reply.private and not private and reply.status is not Status.REFUSED:
            # admin output (status, repost prompts and reports) goes to the admin privately,
            # not to everyone in the group
            await self._send_privately(user.id, here, messages, paced)
        else:
            await self._send(here, kind, messages, paced)
        self._timed(name, user.id, started, paced)

    async def _send_privately(
        self, user: int, group: int | str, messages: Sequence[Message], paced: list[float]
    ) -> None:
        """Send ``messages`` to ``user``'s private chat; if the user never started the bot,
        say so in ``group`` without the private content."""
        try:
            await self.adapter.reply(user, TargetKind.PRIVATE, messages, paced=paced)
            return
        except TargetGone:
            pass
        except DeliveryError as exc:
            log.warning("telegram: private reply to %s not sent: %s", user, exc)
            return
        bot = self.adapter.username
        text = (
            f"结果已设为私信：请先私信 @{bot} 发送 /start，再试一次。\n"
            f"The answer is private: start a chat with @{bot} (send /start), then try again."
        )
        await self._send(
            group, TargetKind.GROUP, notice(text, telegram_render, mentions=True), paced
        )

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A private message that is not a command: point at /help."""
        user, chat = update.effective_user, update.effective_chat
        if user is None or chat is None:
            return
        if user.id not in self.adapter.admins and not await self._allowed(user.id, chat.id, True):
            return
        text = "发送 /help 查看全部命令。\nSend /help to see what I can do."
        await self._send(chat.id, TargetKind.PRIVATE, notice(text, telegram_render), [])

    async def on_document(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A file sent privately: an admin's issue file, checked and stored by the core
        (:meth:`Port.receive_issue_file`), which downloads it only once it takes it."""
        message, user, chat = update.effective_message, update.effective_user, update.effective_chat
        if message is None or message.document is None or user is None or chat is None:
            return
        admin = user.id in self.adapter.admins
        if not admin and not await self._allowed(user.id, chat.id, True):
            return
        document = message.document
        name = document.file_name or "upload"
        request = Request(
            "upload", tuple((message.caption or "").split()), platform=self.adapter.name,
            flavor=telegram_render, user=str(user.id), chat=str(chat.id),
            capabilities=ADMIN if admin else frozenset(),
        )  # fmt: skip

        async def download() -> bytes:
            try:
                file = await document.get_file()
                return bytes(await file.download_as_bytearray())
            except TelegramError as exc:
                raise TransientError(str(exc), platform=self.adapter.name) from exc

        reply = await self.port.receive_issue_file(
            request, name=name, size=document.file_size, download=download
        )
        await self._send(chat.id, TargetKind.PRIVATE, reply.messages, [])

    def _addressed_to_us(self, text: str) -> bool:
        """``/cmd`` or ``/cmd@ourbot``; ``/cmd@otherbot`` is not ours."""
        head = text.split(maxsplit=1)[0]
        if "@" not in head:
            return True
        return head.split("@", 1)[1].lower() == self.adapter.username.lower()

    async def _allowed(self, user: int, chat: int | str, private: bool) -> bool:
        verdict = self.limiter.check(user)
        if verdict is Verdict.WARN:
            await self._send(
                chat,
                TargetKind.PRIVATE if private else TargetKind.GROUP,
                notice(self._slow_down(), telegram_render),
                [],
            )
        return verdict is Verdict.ALLOW

    def _slow_down(self) -> str:
        return self.limiter.slow_down()

    async def _press_limited(self, query: CallbackQuery) -> bool:
        """Whether the presser (not an admin) is over the command limit: the press is then
        answered so (an alert the first time in a window) and goes no further."""
        user = query.from_user
        if user.id in self.adapter.admins:
            return False
        verdict = self.limiter.check(user.id)
        if verdict is Verdict.ALLOW:
            return False
        await _answer(query, self._slow_down(), alert=verdict is Verdict.WARN)
        return True

    async def _handle(self, request: Request) -> Reply:
        try:
            return await self.port.handle(request)
        except Exception:  # a broken command must not take the bot down
            log.exception("telegram: /%s failed", request.command)
            text = "出错了，请稍后再试。/ Something went wrong; please try again later."
            return Reply(notice(text, telegram_render), status=Status.ERROR)

    def _with_confirm_buttons(self, reply: Reply) -> list[Message]:
        """The core's confirmation prompt with its buttons on the last message."""
        prompt = self.port.confirmations.prompt(
            reply, limit=telegram_render.Limits.callback_data_maxlen
        )
        messages = [Message(dict(m.payload)) for m in prompt.messages]
        if prompt.buttons:
            row = [{"text": b.label, "callback_data": b.data} for b in prompt.buttons]
            messages[-1].payload["reply_markup"] = {"inline_keyboard": [row]}
        return messages

    # ------------------------------------------------------------ buttons

    async def on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None:
            return
        data = query.data or ""
        if self.port.confirmations.is_ours(data):
            await self._on_confirm(query, data)
            return
        action = parse_action_data(data)
        if action is not None:
            await self._on_action(query, *action)
            return
        choice = parse_choice(data)
        if choice is not None:
            await self._on_choice(query, *choice)
            return
        parsed = parse_button_data(data)
        if parsed is None:
            await _answer(query)  # not ours (or from an older version): stop the spinner
            return
        await self._on_section(query, *parsed)

    async def _on_action(self, query: CallbackQuery, command: str, args: tuple[str, ...]) -> None:
        """An action button (Approve / Hold under a review): the core runs the command as the
        presser (it refuses and audits a non-admin); the answer goes to the presser's chat."""
        user = query.from_user
        admin = user.id in self.adapter.admins
        request = Request(
            command, args, platform=self.adapter.name, flavor=telegram_render,
            user=str(user.id), chat=str(user.id), capabilities=ADMIN if admin else frozenset(),
            confirmed=True,
        )  # fmt: skip
        if not admin:
            plain = plain_renderer()
            refused = await self._handle(replace(request, flavor=plain))
            text = preview(refused.messages[0], plain) if refused.messages else ""
            await _answer(query, text, alert=True)
            return
        await _answer(query, "正在处理… / working…")
        reply = await self._handle(request)
        await self._send(user.id, TargetKind.PRIVATE, reply.messages, [])

    async def _on_section(self, query: CallbackQuery, date: dt.date, section: Section) -> None:
        started = time.perf_counter()
        user = query.from_user
        if await self._press_limited(query):
            return
        request = Request(
            section.value,
            platform=self.adapter.name,
            flavor=telegram_render,
            user=str(user.id),
            chat=str(user.id),
            # admins press buttons of previews of issues not out yet
            capabilities=ADMIN if user.id in self.adapter.admins else frozenset(),
        )
        reply = await self.port.section(request, date, section)
        if reply.status is Status.NOT_FOUND:
            # reader-safe text (missing, or a broken file); a callback alert holds 200 chars
            await _answer(query, str(reply.extra.get("problem", ""))[:200], alert=True)
            return
        messages = reply.messages
        paced: list[float] = []
        try:
            await self.adapter.reply(user.id, TargetKind.PRIVATE, messages, paced=paced)
        except TargetGone:
            bot = self.adapter.username
            await _answer(
                query,
                f"请先私信 @{bot} 并点“开始”(/start)，再点按钮。\n"
                f"Please open @{bot} and press Start first, then tap the button again.",
                alert=True,
            )
            return
        except DeliveryError as exc:
            log.warning("telegram: section %s for %s failed: %s", section, user.id, exc)
            failed = "发送失败，请稍后再试。/ Could not send; try again later."
            await _answer(query, failed, alert=True)
            return
        await _answer(query, f"已私信发送：{section.label} / sent to you in private")
        self._timed(f"button:{section.value}", user.id, started, paced)

    async def _on_choice(self, query: CallbackQuery, command: str, args: tuple[str, ...]) -> None:
        """A press of a ``/settings`` button: the reader command it names, run for the presser
        in their private chat (the answer comes there, with the buttons again)."""
        user = query.from_user
        if await self._press_limited(query):
            return
        request = Request(
            command, args, platform=self.adapter.name, flavor=telegram_render,
            user=str(user.id), chat=str(user.id),
        )  # fmt: skip
        reply = await self._handle(request)
        await _answer(query, "✓" if reply.status is Status.OK else None)
        messages = with_choices(reply.messages, reply.choices) if reply.choices else reply.messages
        await self._send(user.id, TargetKind.PRIVATE, messages, [])

    # ------------------------------------------------------------ inline mode

    async def on_inline(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """``@bot 关键词`` in any chat: matching items of published issues as articles to
        share (the newest headline for an empty query). Needs /setinline at BotFather."""
        query = update.inline_query
        if query is None:
            return
        asker = str(query.from_user.id)
        found = await self.port.inline(query.query, platform=self.adapter.name, asker=asker)
        results = [inline_article(a) for a in found[: telegram_render.Limits.inline_results]]
        try:
            await query.answer(results, cache_time=INLINE_CACHE_SECONDS, is_personal=False)
        except TelegramError as exc:  # too late (the reader typed on) or refused
            log.info("telegram: could not answer inline query %r: %s", query.query, exc)

    async def _on_confirm(self, query: CallbackQuery, data: str) -> None:
        """A press of a confirmation button: the core decides (digest_core.commands.confirmation);
        the prompt's buttons are replaced by its note so it is not pressed twice."""
        user = query.from_user
        message = query.message
        chat = message.chat.id if message is not None else user.id
        kind = TargetKind.PRIVATE if chat == user.id else TargetKind.GROUP
        admin = user.id in self.adapter.admins
        by = Request(
            "", platform=self.adapter.name, flavor=telegram_render, user=str(user.id),
            chat=str(chat), capabilities=ADMIN if admin else frozenset(),
        )  # fmt: skip
        prompt = (chat, message.message_id if message is not None else 0)
        here = place_of(message, chat)  # a prompt in a forum topic: the answer there too
        confirmations = self.port.confirmations
        async with confirmations.press(data, by=by, prompt=prompt) as decision:
            if decision.action is Action.IGNORE:
                await _answer(query)
                return
            await _answer(query, decision.text, alert=decision.action is Action.REFUSE)
            if decision.note:
                await _close_prompt(query, decision.note)
            if decision.action is Action.RUN:
                reply = await confirmations.run(decision)
                await self._send(here, kind, reply.messages, [])

    # ------------------------------------------------------------ plumbing

    async def _send(
        self, chat: int | str, kind: TargetKind, messages: Sequence[Message], paced: list[float]
    ) -> None:
        try:
            await self.adapter.reply(chat, kind, messages, paced=paced)
        except DeliveryError as exc:
            log.warning("telegram: reply to %s not sent: %s", chat, exc)

    def _timed(self, command: str, user: int, started: float, paced: list[float]) -> None:
        if self.adapter.on_answered is not None:
            total = time.perf_counter() - started
            self.adapter.on_answered(AnswerTiming(command, user, total, sum(paced)))

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram: handling an update failed", exc_info=context.error)


#: how long Telegram may cache an inline answer (a new issue shows within this)
INLINE_CACHE_SECONDS = 300


def inline_article(article: Article) -> InlineQueryResultArticle:
    """An inline result for ``article``: its title, first sentence and link, shared as one
    HTML message."""
    title = html.escape(article.title)
    lines = [f"<b>{title}</b>", html.escape(article.description)]
    where = html.escape(f"AI 技术日报 {article.date} · {article.where}")
    if article.url:
        lines.append(f'<a href="{html.escape(article.url, quote=True)}">{where}</a>')
    else:
        lines.append(where)
    return InlineQueryResultArticle(
        id=article.id,
        title=article.title,
        description=article.description,
        url=article.url,
        input_message_content=InputTextMessageContent(
            "\n".join(lines),
            parse_mode="HTML",
            link_preview_options=LinkPreviewOptions(is_disabled=article.url is None),
        ),
    )


def with_choices(messages: Sequence[Message], rows: Sequence[Sequence[Choice]]) -> list[Message]:
    """``messages`` with the reply's choice buttons on the last one (payloads copied)."""
    out = [Message(dict(m.payload)) for m in messages]
    if out:
        keyboard = [[{"text": c.label, "callback_data": c.data} for c in row] for row in rows]
        out[-1].payload["reply_markup"] = {"inline_keyboard": keyboard}
    return out


def place_of(message: object, chat: int) -> int | str:
    """Where the answer to ``message`` (in ``chat``) goes: the chat, or the forum topic the
    message was sent in (``chat:topic``: sent with its ``message_thread_id``). Only a topic
    message counts: in other groups a message_thread_id names a reply thread."""
    if isinstance(message, TgMessage) and message.is_topic_message and message.message_thread_id:
        return place(chat, message.message_thread_id)
    return chat


def kind_of(chat_type: str) -> TargetKind:
    """The pacing kind of a chat that is not a channel."""
    return TargetKind.PRIVATE if chat_type == ChatType.PRIVATE else TargetKind.GROUP


async def _answer(query: CallbackQuery, text: str | None = None, *, alert: bool = False) -> None:
    """Answer a button press (best effort: an old query cannot be answered any more)."""
    limit = telegram_render.Limits.answer_text_maxlen
    if text is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    try:
        await query.answer(text, show_alert=alert)
    except TelegramError as exc:
        log.info("telegram: could not answer a button press: %s", exc)


async def _close_prompt(query: CallbackQuery, note: str) -> None:
    """Replace the confirmation prompt's buttons by ``note`` so it cannot be pressed twice."""
    message = query.message
    text = getattr(message, "text", None) or ""
    with contextlib.suppress(TelegramError):
        await query.edit_message_text(f"{text}\n\n{note}".strip())


__all__ = [
    "AnswerTiming",
    "Handlers",
    "UserRateLimiter",
    "Verdict",
]
