"""Telegram's optional capabilities: corrections edited in place, deletions and pins."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from telegram.error import TelegramError
from telegram.ext import ExtBot

from bots.telegram.settings import TelegramSettings
from bots.telegram.wire import chat_id, split_payload, translate
from digest_core.port import (
    DeliveryError,
    Message,
    MessageGone,
    NotPermitted,
    Rejected,
    Target,
    TargetGone,
    TransientError,
)
from digest_core.rendering.telegram import corrected

if TYPE_CHECKING:
    from telegram.ext import Application

log = logging.getLogger(__name__)

#: what ``editMessageText`` takes of a rendered payload (the rest is for sends only)
_EDIT_PARAMS = frozenset({"text", "parse_mode", "entities", "link_preview_options", "reply_markup"})


class TelegramEditing:
    """The :class:`~digest_core.platform.Editor` and :class:`~digest_core.platform.Pinner`
    capabilities of :class:`~bots.telegram.adapter.TelegramAdapter` (a mixin: it uses the
    adapter's application, state and error translation)."""

    name: str
    settings: TelegramSettings
    _app: Application[Any, Any, Any, Any, Any, Any] | None
    _stopping: bool

    def _cut(self, exc: Exception, target: Target) -> DeliveryError:
        raise NotImplementedError  # the adapter's

    def _not_running(self, target: Target | None = None) -> TransientError:
        """What a send, an edit or a call meets while the adapter is not running (stopped, or
        not yet started): transient, so the part goes back to pending and is sent later."""
        where = "" if target is None else target.id
        return TransientError(
            "the Telegram adapter is not running", platform=self.name, target=where
        )

    @property
    def pin_posts(self) -> bool:
        """``[telegram] pin``: pin the first message of each day's post in the channels."""
        return self.settings.pin

    def corrected(self, message: Message, note: str) -> Message:
        """The message with the correction mark as its last line (see the renderer)."""
        return corrected(message, note)

    async def edit(self, target: Target, message_id: str, message: Message) -> None:
        """``editMessageText`` with the payload's text, parse mode, preview and keyboard (a
        payload without a keyboard removes the message's). "message is not modified" (an edit
        repeated after a crash) is success.

        Raises:
            MessageGone: "message to edit not found", or it can no longer be edited.
            the errors of :meth:`send` otherwise.
        """
        kwargs, _ = split_payload(message.payload)
        fields = {k: v for k, v in kwargs.items() if k in _EDIT_PARAMS}
        try:
            await self._call(
                target,
                lambda bot: bot.edit_message_text(
                    chat_id=chat_id(target.id), message_id=int(message_id), **fields
                ),
            )
        except Rejected as exc:
            detail = str(exc).lower()
            if "message is not modified" in detail:
                return
            if "message to edit not found" in detail or "can't be edited" in detail:
                raise MessageGone(exc.detail, platform=self.name, target=target.id) from exc
            raise

    async def delete(self, target: Target, message_id: str) -> bool:
        """``deleteMessage``; False where Telegram does not allow it (a channel post older
        than 48 hours, or no right to delete). A message already gone counts as deleted."""
        try:
            await self._on_message(target, message_id, lambda bot: bot.delete_message)
        except (Rejected, TargetGone) as exc:
            detail = str(exc).lower()
            if "message to delete not found" in detail:
                return True
            if "can't be deleted" in detail or _lacks_rights(detail):
                log.info(
                    "telegram: message %s in %s cannot be deleted: %s", message_id, target.id, exc
                )
                return False
            raise
        return True

    async def pin(self, target: Target, message_id: str) -> None:
        """``pinChatMessage`` with ``disable_notification``.

        Raises:
            NotPermitted: the bot may not pin in that chat.
            MessageGone: "message to pin not found".
        """
        try:
            await self._on_message(
                target, message_id, lambda bot: bot.pin_chat_message, disable_notification=True
            )
        except (Rejected, TargetGone) as exc:
            if "message to pin not found" in str(exc).lower():
                raise MessageGone(exc.detail, platform=self.name, target=target.id) from exc
            self._not_permitted(exc, target)
            raise

    async def unpin(self, target: Target, message_id: str) -> None:
        """``unpinChatMessage`` of one message (one not pinned, or gone, is no error).

        Raises:
            NotPermitted: the bot may not unpin in that chat.
        """
        try:
            await self._on_message(target, message_id, lambda bot: bot.unpin_chat_message)
        except (Rejected, TargetGone) as exc:
            if "not found" in str(exc).lower():
                return
            self._not_permitted(exc, target)
            raise

    def _not_permitted(self, exc: Rejected | TargetGone, target: Target) -> None:
        """NotPermitted, raised from ``exc``, where Telegram refused for want of an admin
        right (or the chat is gone for the bot)."""
        if _lacks_rights(str(exc).lower()) or isinstance(exc, TargetGone):
            raise NotPermitted(exc.detail, platform=self.name, target=target.id) from exc

    async def _on_message(
        self,
        target: Target,
        message_id: str,
        method: Callable[[ExtBot[Any]], Callable[..., Awaitable[object]]],
        **extra: Any,
    ) -> None:
        """The Bot API method ``method`` picks (``bot.pin_chat_message``) on one message of
        ``target`` (with ``extra`` arguments), through :meth:`_call`."""

        def call(bot: ExtBot[Any]) -> Awaitable[object]:
            return method(bot)(chat_id=chat_id(target.id), message_id=int(message_id), **extra)

        await self._call(target, call)

    async def _call(self, target: Target, call: Callable[[ExtBot[Any]], Awaitable[object]]) -> None:
        """One Bot API call for ``target``, its errors translated like a send's."""
        app = self._app
        if app is None:
            raise self._not_running(target)
        try:
            await call(app.bot)
        except TelegramError as exc:
            if self._app is not app or self._stopping:
                raise self._cut(exc, target) from exc
            raise translate(exc, target) from exc
        except RuntimeError as exc:
            if self._app is app and not self._stopping:
                raise
            raise self._cut(exc, target) from exc


def _lacks_rights(detail: str) -> bool:
    """A refusal for want of an admin right (pinning, deleting)."""
    return any(
        d in detail
        for d in ("not enough rights", "chat_admin_required", "administrator rights", "forbidden")
    )
