"""The common part of the webhook adapters: targets by name, lifecycle, send, alerts."""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import SecretStr

from bots.workchat.settings import WebhookSettings
from bots.workchat.transport import (
    ErrorRule,
    StartStop,
    WebhookTransport,
    translate,
)
from bots.workchat.urls import token_from
from digest_core.port import (
    Clock,
    Message,
    Part,
    PartKey,
    PlatformLimits,
    Rejected,
    Renderer,
    RenderOptions,
    Target,
    TargetGone,
    TargetKind,
    TransientError,
    encode_body,
)

if TYPE_CHECKING:
    from digest_core.port import Adapter, Port

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    """One webhook call: where, and the exact bytes."""

    url: str
    body: bytes


class WebhookAdapter(StartStop, ABC):
    """A send-only group webhook platform (Feishu, DingTalk, WeCom) as the core's Platform.

    Targets are the configured names (``Target(name, "ai-team", GROUP)``); only names reach
    the ledger, logs and errors. ``send`` makes one POST, translates the answer with the
    platform's ``errors`` table and never retries or sleeps (the core paces and retries).

    Message ids: webhooks answer without one, so ``send`` returns a synthetic id that is
    stable for a part — ``<platform>:<target>:<date>:<revision>:<generation>:<part>`` from
    its :class:`PartKey` — or, for a one-off send, ``<platform>:<target>:oneoff:<sha256 of the
    body, 16 hex>``. Nothing can be edited or deleted through it.

    Timeouts and duplicates: a call whose answer does not come within
    ``request_timeout_seconds`` is a TransientError and is sent again; the platform may have
    posted the first one (webhooks have no idempotency key), so at-least-once.

    Rendering: ``flavor`` is the platform's own renderer module
    (``digest_core.rendering.<name>``, the one its spec names), which the core renders posts
    and notices with; :meth:`render` / :meth:`preview` / :meth:`notice` call it.
    """

    #: the platform's name in the ledger and config, e.g. "feishu"
    name: str
    #: the platform's renderer (set by each platform to its renderer module)
    flavor: Renderer
    #: the sending limits the core paces its sends under (its spec's, given when it is built)
    limits: PlatformLimits
    #: the error codes of the platform's answers
    errors: ClassVar[Mapping[int, ErrorRule]]
    #: where a webhook address holds the robot's token: after this path, or in this query
    #: parameter (:meth:`parse_webhook`)
    webhook_path: ClassVar[str | None] = None
    webhook_query: ClassVar[str | None] = None

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        clock: Clock,
        limits: PlatformLimits,
        time_scale: float = 1.0,
    ) -> None:
        """Resolve the webhooks and secrets now, so a missing one fails at start.

        ``limits`` is the pacing model, the platform's spec's (``bots/<name>/spec.py``; tests
        and benchmarks scale it); ``time_scale`` divides the documented waits after a
        frequency code, for tests and benchmarks against a double whose windows run
        ``time_scale`` times faster.

        Raises:
            ConfigError: a target has no webhook, or a secrets file is unreadable.
        """
        self.settings = settings
        self.clock = clock
        self.limits = limits
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self.post_options = RenderOptions()
        self._webhooks = self.webhooks(settings)
        self._secrets = settings.resolved_secrets()
        secrets = [v.get_secret_value() for v in self._webhooks.values()]
        secrets += [v.get_secret_value() for v in self._secrets.values()]
        self._transport = WebhookTransport(
            platform=self.name, timeout=settings.request_timeout_seconds, secrets=secrets
        )

    # ------------------------------------------------------------ per platform

    @classmethod
    def parse_webhook(cls, value: SecretStr) -> SecretStr:
        """The robot's token/key from a configured webhook address (or the bare token): the
        last segment after :attr:`webhook_path`, or the :attr:`webhook_query` parameter.

        Raises:
            ConfigError: ``value`` is not this platform's webhook.
        """
        path, query = cls.webhook_path, cls.webhook_query
        return token_from(value, platform=cls.name, path=path, query=query)

    @classmethod
    def webhooks(cls, settings: WebhookSettings) -> dict[str, SecretStr]:
        """Each target's robot token/key, from its configured webhook (what the doctor checks
        without building an adapter).

        Raises:
            ConfigError: a target has no webhook, or one is not this platform's.
        """
        return {k: cls.parse_webhook(v) for k, v in settings.resolved_webhooks().items()}

    @abstractmethod
    def build_request(self, token: str, secret: str | None, payload: Mapping[str, Any]) -> Request:
        """The call that posts ``payload`` through the robot ``token`` (signed with
        ``secret`` when the robot has one)."""

    def answer_code(self, answer: Mapping[str, Any]) -> tuple[int, str]:
        """The platform's status code and message in a JSON answer (0 is success); this is
        the ``errcode``/``errmsg`` form DingTalk and WeCom answer with."""
        code = answer.get("errcode", 0)
        return (int(code) if isinstance(code, int) else -1), str(answer.get("errmsg", ""))

    def render(
        self,
        issue: Any,
        part: Part = Part.ALL,
        *,
        brief: int | None = None,
        options: RenderOptions | None = None,
    ) -> list[Message]:
        """This platform's renderer (its ``render.render``)."""
        return self.flavor.render(issue, part, brief=brief, options=options or RenderOptions())

    def preview(self, message: Message) -> str:
        """This platform's preview of one payload."""
        return self.flavor.preview(message)

    def notice(self, text: str) -> list[Message]:
        """A service text (an alert) as this platform's messages, escaped and split."""
        return self.flavor.notice(text)

    # ------------------------------------------------------------ Platform

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """POST ``message.payload`` to the webhook named ``target.id``; return a synthetic id
        (see the class doc).

        Raises:
            RateLimited: HTTP 429 or the platform's frequency-limit code.
            TransientError: network trouble, timeout, 5xx, or the adapter is not started.
            TargetGone: unknown name, or the robot's token/signature no longer works.
            Rejected: the payload was refused.
        """
        name = target.id
        token = self._webhooks.get(name)
        if token is None:
            raise TargetGone(
                f"no webhook is configured for target {name!r} (set "
                f"{self.settings.env_name('webhooks')})",
                platform=self.name,
                target=name,
            )
        secret = self._secrets.get(name)
        request = self.build_request(
            token.get_secret_value(),
            secret.get_secret_value() if secret else None,
            message.payload,
        )
        status, answer = await self._transport.post(request.url, request.body, target=name)
        code, text = self.answer_code(answer)
        if code != 0:
            raise translate(
                code, text, self.errors, platform=self.name, target=name, scale=self.time_scale
            )
        if status >= 400:
            raise Rejected(f"HTTP {status} with {text[:200]!r}", platform=self.name, target=name)
        return self.message_id(name, message, key)

    def message_id(self, name: str, message: Message, key: PartKey | None) -> str:
        if key is not None:
            return (
                f"{self.name}:{name}:{key.issue_date.isoformat()}:{key.revision}:"
                f"{key.generation}:{key.part}"
            )
        digest = hashlib.sha256(encode_body(message.payload)).hexdigest()[:16]
        return f"{self.name}:{name}:oneoff:{digest}"

    def channel_targets(self) -> list[Target]:
        """The configured target names, as group targets, in order."""
        return [Target(self.name, t, TargetKind.GROUP) for t in self.settings.targets]

    async def alert_admins(self, text: str) -> None:
        """Log ``text``; post it to ``alert_target`` when one is set (best effort).

        Raises:
            TransientError: the webhook could not be reached: the service queues the alert
                and sends it again.
        """
        log.warning("%s alert: %s", self.name, text)
        name = self.settings.alert_target
        if name is None:
            return
        target = Target(self.name, name, TargetKind.GROUP)
        for message in self.notice(text):
            try:
                await self.send(target, message)
            except TransientError:
                raise
            except Exception as exc:  # an alert must never take anything down
                log.warning("could not post the alert to %s target %s: %s", self.name, name, exc)
                return

    # ------------------------------------------------------------ lifecycle

    async def start(self, port: Port | None = None, *, receive: bool = True) -> None:
        """Open the HTTP client (idempotent). Webhooks are send-only: nothing is received, so
        ``port`` and ``receive`` are accepted for the runtime's sake and ignored."""
        await self._transport.start()

    async def stop(self) -> None:
        """Close the HTTP client (idempotent)."""
        await self._transport.stop()


if TYPE_CHECKING:

    def _is_an_adapter(adapter: WebhookAdapter) -> Adapter:
        """mypy checks here that a webhook adapter is what the runtime runs."""
        return adapter
