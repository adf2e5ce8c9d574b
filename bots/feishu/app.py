"""The Feishu/Lark app bot: the custom-bot webhooks plus an app's bot that answers readers.

With ``[feishu] app_id`` set, the adapter is this one: it still posts to the named webhook
targets (``targets``), and also to the group chats of ``chats`` and to readers' private
chats through the app (the send API, :mod:`bots.feishu.api`); it receives commands over the
long connection or the HTTP callback (:mod:`bots.feishu.receiving`) and answers them as
interactive cards (:data:`digest_core.rendering.feishu.CARDS`) through the core
(:mod:`bots.feishu.handlers`). Readers can subscribe: their target is their open_id.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from bots.feishu.adapter import FeishuAdapter
from bots.feishu.api import FeishuApi, message_uuid
from bots.feishu.handlers import FeishuHandlers
from bots.feishu.receiving import CallbackServer, LongConnection
from bots.feishu.settings import FeishuSettings, _secret
from bots.inflight import InFlight
from bots.workchat.appbot import AppBot
from bots.workchat.transport import WebhookTransport
from digest_core.port import (
    Clock,
    Message,
    PartKey,
    PlatformLimits,
    RenderOptions,
    Target,
)
from digest_core.rendering import feishu as feishu_render

if TYPE_CHECKING:
    from digest_core.port import Port

log = logging.getLogger(__name__)


class FeishuAppAdapter(AppBot, FeishuAdapter):
    """Feishu's app bot (see the module doc). ``send`` goes to a webhook for a configured
    target name, else through the app to a chat (``oc_…``) or a user (``ou_…``), with a
    ``uuid`` derived from the part's key, so a part resent after a crash or an unknown outcome
    is created once (Feishu keeps a uuid an hour)."""

    app_label = "the Feishu app bot"
    connection_type = LongConnection
    #: readers can subscribe (their private chat is their open_id)
    subscriptions = True
    #: interactive cards (the webhooks' ``post`` renderer is the module itself)
    flavor = feishu_render.CARDS  # type: ignore[assignment]

    def __init__(
        self,
        settings: FeishuSettings,
        *,
        clock: Clock,
        limits: PlatformLimits | None = None,
        time_scale: float = 1.0,
        in_flight: InFlight | None = None,
    ) -> None:
        super().__init__(settings, clock=clock, limits=limits, time_scale=time_scale)
        assert settings.app_id is not None
        self.settings: FeishuSettings = settings
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self.chats = tuple(settings.chats)
        self.admins = frozenset(settings.admins)
        self.post_options = RenderOptions(buttons=True)
        secret = settings.resolved_app_secret()
        self._keys = ("", "")
        if settings.mode == "http":
            self._keys = (
                _secret(settings.encrypt_key, None, "encrypt_key").get_secret_value(),
                _secret(settings.verification_token, None, "verification_token").get_secret_value(),
            )
        self._app_transport = WebhookTransport(
            platform=self.name,
            timeout=settings.request_timeout_seconds,
            secrets=[secret.get_secret_value(), *self._keys],
        )
        self.api = FeishuApi(
            base=settings.base,
            app_id=settings.app_id,
            app_secret=secret.get_secret_value(),
            transport=self._app_transport,
            clock=clock,
        )
        self.bot_open_id = ""
        self._port: Port | None = None
        self._receiver: LongConnection | CallbackServer | None = None

    # ------------------------------------------------------------ Platform

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """To a webhook target by name, else through the app (see the class doc).

        Raises:
            the Platform contract's errors (:meth:`FeishuApi.send`).
        """
        if target.id in self._webhooks:
            return await super().send(target, _webhook_form(message), key=key)
        uuid = message_uuid(key) if key is not None else None
        return await self.api.send(target.id, message, uuid=uuid)

    async def start(self, port: Port | None = None, *, receive: bool = True) -> None:
        """Open the HTTP clients, fetch the token and the bot's open_id; with ``receive``,
        open the long connection (or the callback server).

        Raises:
            ConfigError: Feishu refused the app's credentials, or the callback address.
            TransientError: Feishu could not be reached.
        """
        await super().start(port, receive=receive)
        await self._app_transport.start()
        self._port = port
        self.bot_open_id = await self.api.bot_open_id()
        if not receive or port is None:
            return
        handlers = FeishuHandlers(self, port)
        s = self.settings
        assert s.app_id is not None
        receiver: LongConnection | CallbackServer
        if s.mode == "http":
            encrypt_key, token = self._keys
            receiver = CallbackServer(
                listen=s.listen_address(),
                path=s.callback_path,
                encrypt_key=encrypt_key,
                verification_token=token,
                receivers=handlers.receivers,
            )
            await receiver.start()
            log.info("feishu: event callback on %s%s", s.callback_listen, s.callback_path)
        else:
            secret = s.resolved_app_secret().get_secret_value()
            receiver = LongConnection(
                app_id=s.app_id, app_secret=secret, domain=s.base, receivers=handlers.receivers
            )
            await receiver.start(asyncio.get_running_loop())
            log.info("feishu: long connection open")
        self._receiver = receiver


def _webhook_form(message: Message) -> Message:
    """A card for a custom bot's webhook: its buttons left out (a custom bot's card callbacks
    reach no app)."""
    card = message.payload.get("card")
    if card is None:
        return message
    payload: dict[str, Any] = json.loads(json.dumps(message.payload))
    payload["card"]["elements"] = [e for e in card["elements"] if e.get("tag") != "action"]
    return Message(payload)
