"""What the app bots' API clients share (Feishu's, DingTalk's): the app's address, secret and
transport, and its access token, fetched when missing and cached until near its expiry. A
platform's client fetches the token in :meth:`AppApi._fetch_token` and makes its own calls.
"""

from __future__ import annotations

from bots.workchat.transport import WebhookTransport
from digest_core.port import Clock

#: a token is renewed this long before it expires (it is never kept under a minute)
TOKEN_MARGIN_SECONDS = 300.0


class AppApi:
    """One app's calls at ``base`` over ``transport`` (see the module doc)."""

    def __init__(
        self, *, base: str, secret: str, transport: WebhookTransport, clock: Clock
    ) -> None:
        self.base = base
        self._secret = secret
        self._transport = transport
        self._clock = clock
        self._token: tuple[str, float] | None = None

    async def token(self, *, target: str = "app") -> str:
        """The access token (fetched when missing or near its expiry); ``target`` names the
        call that needs it in errors.

        Raises:
            ConfigError: the platform refused the app's credentials.
            TransientError, RateLimited: as the transport.
        """
        now = self._clock.monotonic()
        if self._token is not None and now < self._token[1]:
            return self._token[0]
        token, expires_in = await self._fetch_token(target)
        self._token = (token, now + max(60.0, expires_in - TOKEN_MARGIN_SECONDS))
        return token

    async def _fetch_token(self, target: str) -> tuple[str, float]:
        """A new token and the seconds it is valid for.

        Raises:
            as :meth:`token`.
        """
        raise NotImplementedError
