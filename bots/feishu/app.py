"""The Feishu/Lark app bot: the custom-bot webhooks plus an app's bot that answers readers.

With ``[feishu] app_id`` set, the adapter is this one: it still posts to the named webhook
targets (``targets``), and also to the group chats of ``chats`` and to readers' private
chats through the app (the send API, :mod:`bots.feishu.api`); it receives commands over the
long connection or the HTTP callback (:mod:`bots.feishu.receiving`) and answers them as
interactive cards (:data:`digest_core.rendering.feishu.CARDS`) through the core
(:mod:`bots.feishu.handlers`). Readers can subscribe: their target is their open_id.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bots.feishu.adapter import FeishuAdapter
from bots.feishu.api import FeishuApi, message_uuid
from bots.feishu.handlers import FeishuHandlers
from bots.feishu.receiving import CallbackServer, LongConnection
from bots.feishu.settings import FeishuSettings
from bots.workchat.app.bot import AppBot
from digest_core.port import Message, PartKey, Target
from digest_core.rendering import feishu as feishu_render

if TYPE_CHECKING:
    from digest_core.port import Port


class FeishuAppAdapter(AppBot, FeishuAdapter):
    """Feishu's app bot (see the module doc). ``send`` goes to a webhook for a configured
    target name, else through the app to a chat (``oc_…``) or a user (``ou_…``), with a
    ``uuid`` derived from the part's key, so a part resent after a crash or an unknown outcome
    is created once (Feishu keeps a uuid an hour)."""

    app_label = "the Feishu app bot"
    connection_type = LongConnection
    receiver_names = ("event callback", "long connection")
    #: readers can subscribe (their private chat is their open_id)
    subscriptions = True
    #: interactive cards (the webhooks' ``post`` renderer is the module itself)
    flavor = feishu_render.CARDS  # type: ignore[assignment]

    settings: FeishuSettings
    api: FeishuApi
    #: the app's bot's own open_id (to tell @-mentions of it), once signed in
    bot_open_id = ""

    def _app_secrets(self) -> list[str]:
        s = self.settings
        self._app_secret = s.resolved_app_secret().get_secret_value()
        self._keys = ("", "")
        if s.mode == "http":
            self._keys = (
                s.resolved_encrypt_key().get_secret_value(),
                s.resolved_verification_token().get_secret_value(),
            )
        return [self._app_secret, *self._keys]

    def _new_api(self) -> FeishuApi:
        s = self.settings
        assert s.app_id is not None
        return FeishuApi(
            base=s.base,
            app_id=s.app_id,
            app_secret=self._app_secret,
            transport=self._app_transport,
            clock=self.clock,
        )

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

    async def _sign_in(self) -> None:
        self.bot_open_id = await self.api.bot_open_id()

    def _callback_server(self, port: Port) -> CallbackServer:
        s = self.settings
        encrypt_key, token = self._keys
        return CallbackServer(
            listen=s.listen_address(),
            path=s.callback_path,
            encrypt_key=encrypt_key,
            verification_token=token,
            receivers=FeishuHandlers(self, port).receivers,
        )

    def _connection(self, port: Port) -> LongConnection:
        s = self.settings
        assert s.app_id is not None
        return LongConnection(
            app_id=s.app_id,
            app_secret=self._app_secret,
            domain=s.base,
            receivers=FeishuHandlers(self, port).receivers,
        )


def _webhook_form(message: Message) -> Message:
    """A card for a custom bot's webhook: its buttons left out (a custom bot's card callbacks
    reach no app)."""
    card = message.payload.get("card")
    if card is None:
        return message
    payload: dict[str, Any] = json.loads(json.dumps(message.payload))
    payload["card"]["elements"] = [e for e in card["elements"] if e.get("tag") != "action"]
    return Message(payload)
