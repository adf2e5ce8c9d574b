"""The DingTalk app robot: the custom-robot webhooks plus an app's robot that answers readers.

With ``[dingtalk] client_id`` set, the adapter is this one: it still posts to the named webhook
targets, and through the app to the group conversations of ``chats`` and to readers one to one
(:mod:`bots.dingtalk.api`); it receives messages in Stream mode or over the HTTP callback
(:mod:`bots.dingtalk.receiving`) and answers through the core (:mod:`bots.dingtalk.handlers`).
Readers can subscribe: their target is their staff id. Posts to readers carry an ActionCard
whose buttons send the section's command (``/classic 2026-11-27``); in groups, where such a
message would not reach the robot (it hears only @-mentions), posts stay markdown.

Sends are at least once: DingTalk's send APIs take no idempotency key, so a part whose
outcome was unknown (a crash mid-send) may arrive twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bots.dingtalk.adapter import DingTalkAdapter
from bots.dingtalk.api import DingTalkApi
from bots.dingtalk.handlers import DingTalkHandlers
from bots.dingtalk.receiving import CallbackServer, StreamConnection
from bots.dingtalk.settings import DingTalkSettings
from bots.workchat.app.bot import AppBot
from digest_core.port import Message, PartKey, Target, TargetKind
from digest_core.rendering import dingtalk as dingtalk_render

if TYPE_CHECKING:
    from digest_core.port import Port


class DingTalkAppAdapter(AppBot, DingTalkAdapter):
    """DingTalk's app robot (see the module doc)."""

    app_label = "the DingTalk app robot"
    connection_type = StreamConnection
    receiver_names = ("robot callback", "stream")

    subscriptions = True

    settings: DingTalkSettings
    api: DingTalkApi

    def _app_secrets(self) -> list[str]:
        self._secret = self.settings.resolved_client_secret().get_secret_value()
        return [self._secret]

    def _new_api(self) -> DingTalkApi:
        s = self.settings
        assert s.client_id is not None
        return DingTalkApi(
            base=s.openapi_base,
            client_id=s.client_id,
            client_secret=self._secret,
            robot_code=s.robot,
            transport=self._app_transport,
            clock=self.clock,
        )

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """To a webhook target by name, else through the app: a group conversation (its
        buttons left out) or a reader one to one.

        Raises:
            the Platform contract's errors (:meth:`DingTalkApi.send`).
        """
        if target.id in self._webhooks:
            return await super().send(target, dingtalk_render.as_markdown(message), key=key)
        group = target.kind is not TargetKind.PRIVATE
        sent = dingtalk_render.as_markdown(message) if group else message
        await self.api.send(target.id, sent, group=group)
        return self.message_id(target.id, message, key)

    async def _sign_in(self) -> None:
        await self.api.token()

    def _callback_server(self, port: Port) -> CallbackServer:
        s = self.settings
        return CallbackServer(
            listen=s.listen_address(),
            path=s.callback_path,
            client_secret=self._secret,
            receiver=DingTalkHandlers(self, port).on_message,
        )

    def _connection(self, port: Port) -> StreamConnection:
        s = self.settings
        assert s.client_id is not None
        return StreamConnection(
            client_id=s.client_id,
            client_secret=self._secret,
            openapi_base=s.openapi_base,
            receiver=DingTalkHandlers(self, port).on_message,
        )
