"""Signed links for readers (itsdangerous): confirm a subscription, unsubscribe, preferences."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from itsdangerous import (
    BadSignature,
    SignatureExpired,
    Signer,
    TimestampSigner,
    URLSafeTimedSerializer,
)

log = logging.getLogger(__name__)

_CONFIRM = "digest-bot email confirm"
_UNSUBSCRIBE = "digest-bot email unsubscribe"
_PREFERENCES = "digest-bot email preferences"


def _signer(now: Callable[[], float]) -> type[Signer]:
    """A timestamp signer whose time is ``now`` (the adapter's clock, not the host's)."""

    class _ClockSigner(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(now())

    return _ClockSigner


class Tokens:
    """Tokens signed with the links' secret key; each kind has its own salt, so an unsubscribe
    token can never confirm an address, a preferences token never unsubscribes, and so on.
    The timed kinds (confirm, preferences) read their age on ``now`` (default: the host's
    time)."""

    def __init__(
        self,
        key: str,
        *,
        confirm_seconds: float,
        preferences_seconds: float = 60 * 86400,
        now: Callable[[], float] = time.time,
    ) -> None:
        signer = _signer(now)
        self._confirm = URLSafeTimedSerializer(key, salt=_CONFIRM, signer=signer)
        self._unsubscribe = URLSafeTimedSerializer(key, salt=_UNSUBSCRIBE)
        self._preferences = URLSafeTimedSerializer(key, salt=_PREFERENCES, signer=signer)
        self.confirm_seconds = confirm_seconds
        self.preferences_seconds = preferences_seconds

    def confirm(self, address: str, fmt: str = "") -> str:
        """A token for confirming ``address``, with the reader's chosen format (or "")."""
        return self._confirm.dumps([address, fmt])

    def confirmed(self, token: str) -> tuple[str, str] | None:
        """(address, format) a confirmation token carries; None when forged or expired."""
        try:
            value = self._confirm.loads(token, max_age=int(self.confirm_seconds))
        except (SignatureExpired, BadSignature):
            return None
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
            return value[0], value[1]
        return None

    def unsubscribe(self, rid: str) -> str:
        return self._unsubscribe.dumps(rid)

    def unsubscribed(self, token: str) -> str | None:
        """The reader id an unsubscribe token carries (it never expires); None when forged."""
        try:
            value = self._unsubscribe.loads(token)
        except BadSignature:
            return None
        return value if isinstance(value, str) else None

    def preferences(self, rid: str) -> str:
        """A token for reader ``rid``'s preferences page (every mail carries a fresh one)."""
        return self._preferences.dumps(rid)

    def preferring(self, token: str) -> str | None:
        """The reader id a preferences token carries; None when forged or older than
        ``preferences_seconds`` (a mail forwarded long ago no longer changes anything)."""
        try:
            value = self._preferences.loads(token, max_age=int(self.preferences_seconds))
        except (SignatureExpired, BadSignature):
            return None
        return value if isinstance(value, str) else None
