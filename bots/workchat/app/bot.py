"""What the Feishu and DingTalk app bots share over their webhook adapters: the app's group
chats as channel targets, alerts to each admin privately, replies paced by the core, the
restart notice, readiness and a stop that lets commands being answered finish.

A platform's app adapter is ``class XAppAdapter(AppBot, XAdapter)``: it resolves the app's
secrets (:meth:`AppBot._app_secrets`) and builds its API client (:meth:`AppBot._new_api`) as
it is constructed, signs the app in (:meth:`AppBot._sign_in`) and opens its receiver
(:meth:`AppBot._open_receiver`) when started; ``super()`` here reaches the platform's webhook
adapter.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from bots.inflight import RESTARTING, InFlight
from bots.workchat.adapter import WebhookAdapter
from bots.workchat.app.api import AppApi
from bots.workchat.settings import AppBotSettings
from bots.workchat.transport import WebhookTransport
from digest_core.port import (
    Clock,
    Message,
    PlatformLimits,
    RenderOptions,
    Target,
    TargetKind,
    TransientError,
)

if TYPE_CHECKING:
    from bots.workchat.callback import CallbackServer
    from bots.workchat.sdkthread import SdkConnection
    from digest_core.port import Port

log = logging.getLogger(__name__)


class Receiver(Protocol):
    """Where an app bot hears readers: a long-lived connection or a callback server."""

    async def stop(self) -> None: ...


class AppBot(WebhookAdapter):
    """The app bot's side of a work-chat adapter (see the module doc)."""

    #: how errors name the app bot ("the Feishu app bot")
    app_label: ClassVar[str]
    #: the receiver that is a connection of its own (readiness is its being connected); a
    #: callback server is ready once started
    connection_type: ClassVar[type]
    #: what the log calls the callback server and the connection ("robot callback", "stream")
    receiver_names: ClassVar[tuple[str, str]]

    settings: AppBotSettings
    api: AppApi
    #: the app's group chats (``[<platform>] chats``) and its admins, from the settings
    chats: tuple[str, ...]
    admins: frozenset[str]
    in_flight: InFlight
    _app_transport: WebhookTransport
    _port: Port | None
    _receiver: Receiver | None

    def __init__(
        self,
        settings: AppBotSettings,
        *,
        clock: Clock,
        limits: PlatformLimits,
        time_scale: float = 1.0,
        in_flight: InFlight | None = None,
    ) -> None:
        """The webhook adapter's, then the app's: its secrets resolved now (a missing one
        fails at start), its transport (which keeps them out of logs and errors) and its
        API client.

        Raises:
            ConfigError: an app secret is not set.
        """
        super().__init__(settings, clock=clock, limits=limits, time_scale=time_scale)
        secrets = self._app_secrets()
        self.in_flight = in_flight if in_flight is not None else InFlight()
        self.chats = tuple(settings.chats)
        self.admins = frozenset(settings.admins)
        self.post_options = RenderOptions(buttons=True)
        self._app_transport = WebhookTransport(
            platform=self.name, timeout=settings.request_timeout_seconds, secrets=secrets
        )
        self.api = self._new_api()
        self._port = None
        self._receiver = None

    def _app_secrets(self) -> list[str]:
        """The app's secrets from the settings (kept by the adapter as it needs them).

        Raises:
            ConfigError: one is not set.
        """
        raise NotImplementedError

    def _new_api(self) -> AppApi:
        """The app's API client, over ``_app_transport``."""
        raise NotImplementedError

    async def start(self, port: Port | None = None, *, receive: bool = True) -> None:
        """Open the HTTP clients and sign the app in; with ``receive`` (and a port), open its
        receiver.

        Raises:
            ConfigError: the platform refused the app's credentials, or the callback address.
            TransientError: the platform could not be reached.
        """
        await super().start(port, receive=receive)
        await self._app_transport.start()
        self._port = port
        await self._sign_in()
        if receive and port is not None:
            self._receiver = await self._open_receiver(port)

    async def _sign_in(self) -> None:
        """Fetch what the app needs before it sends (its token; Feishu: also its bot's id).

        Raises:
            ConfigError: the platform refused the app's credentials.
            TransientError: the platform could not be reached.
        """
        raise NotImplementedError

    async def _open_receiver(self, port: Port) -> Receiver:
        """Start hearing readers through ``port``: the connection, or with ``mode = "http"``
        the callback server.

        Raises:
            ConfigError: the callback address cannot be bound (or the app is refused).
            TransientError: the platform could not be reached.
        """
        s = self.settings
        said = logging.getLogger(type(self).__module__)  # the platform's app module's log
        server_name, connection_name = self.receiver_names
        if s.mode == "http":
            server = self._callback_server(port)
            await server.start()
            said.info("%s: %s on %s%s", self.name, server_name, s.callback_listen, s.callback_path)
            return server
        connection = self._connection(port)
        await connection.start(asyncio.get_running_loop())
        said.info("%s: %s open", self.name, connection_name)
        return connection

    def _callback_server(self, port: Port) -> CallbackServer:
        """The app's HTTP callback server (not started), answering through ``port``."""
        raise NotImplementedError

    def _connection(self, port: Port) -> SdkConnection:
        """The app's connection of its own (not opened), answering through ``port``."""
        raise NotImplementedError

    def channel_targets(self) -> list[Target]:
        """The webhook targets, then the app's group chats."""
        chats = [Target(self.name, c, TargetKind.GROUP) for c in self.chats]
        return [*super().channel_targets(), *chats]

    async def alert_admins(self, text: str) -> None:
        """The webhook alert target (if any), and each admin privately (best effort).

        Raises:
            TransientError: nobody got it and the platform could not be reached.
        """
        await super().alert_admins(text)
        reached, unreachable = 0, ""
        for admin in sorted(self.admins):
            try:
                await self.reply(admin, TargetKind.PRIVATE, self.flavor.notice(text))
                reached += 1
            except TransientError as exc:
                unreachable = str(exc)
            except Exception as exc:  # one line: the reason
                log.warning("could not alert %s admin %s: %s", self.name, admin, exc)
        if self.admins and not reached and unreachable:
            raise TransientError(f"no admin got the alert: {unreachable}", platform=self.name)

    async def reply(
        self,
        chat: str,
        kind: TargetKind,
        messages: Sequence[Message],
        *,
        paced: list[float] | None = None,
    ) -> list[str]:
        """Send ``messages`` to ``chat`` as a reply, paced by the core with the deliveries.

        Raises:
            DeliveryError: a message could not be sent (the rest are not attempted).
        """
        target = Target(self.name, chat, kind)
        port = self._require_port(target)
        once = functools.partial(self.send, key=None)
        return await port.reply(self, target, messages, send=once, paced=paced)

    async def tell_restarting(self, chat: str, kind: TargetKind) -> None:
        """:data:`RESTARTING` to ``chat`` at once (accounted, not paced: a shutdown)."""
        target = Target(self.name, chat, kind)
        self._require_port(target).account(self, target)
        for message in self.flavor.notice(RESTARTING):
            await self.send(target, message)

    def _require_port(self, target: Target) -> Port:
        if self._port is None:
            raise TransientError(
                f"{self.app_label} is not running", platform=self.name, target=target.id
            )
        return self._port

    @property
    def connected(self) -> bool:
        """Started and, with a connection of its own, connected (for /readyz)."""
        receiver = self._receiver
        if isinstance(receiver, self.connection_type):
            return bool(cast("Any", receiver).connected)
        return self._port is not None

    async def stop(self) -> None:
        """Stop receiving, let commands being answered finish (briefly), close the clients."""
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            await receiver.stop()
        self.in_flight.close()
        if not await self.in_flight.idle(3.0):
            await self.in_flight.cancel(within=1.0)
        await self.in_flight.apologise(within=1.5)
        self._port = None
        await self._app_transport.stop()
        await super().stop()
