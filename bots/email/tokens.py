"""Signed links for readers (itsdangerous): confirm a subscription, unsubscribe."""

from __future__ import annotations

import logging

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

log = logging.getLogger(__name__)

_CONFIRM = "digest-bot email confirm"
_UNSUBSCRIBE = "digest-bot email unsubscribe"


class Tokens:
    """Tokens signed with the links' secret key; each kind has its own salt, so an unsubscribe
    token can never confirm an address and the other way round."""

    def __init__(self, key: str, *, confirm_seconds: float) -> None:
        self._confirm = URLSafeTimedSerializer(key, salt=_CONFIRM)
        self._unsubscribe = URLSafeTimedSerializer(key, salt=_UNSUBSCRIBE)
        self.confirm_seconds = confirm_seconds

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
