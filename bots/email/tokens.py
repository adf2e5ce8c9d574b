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

    def confirm(self, address: str) -> str:
        return self._confirm.dumps(address)

    def confirmed(self, token: str) -> str | None:
        """The address a confirmation token carries; None when forged or expired."""
        try:
            value = self._confirm.loads(token, max_age=int(self.confirm_seconds))
        except (SignatureExpired, BadSignature):
            return None
        return value if isinstance(value, str) else None

    def unsubscribe(self, rid: str) -> str:
        return self._unsubscribe.dumps(rid)

    def unsubscribed(self, token: str) -> str | None:
        """The reader id an unsubscribe token carries (it never expires); None when forged."""
        try:
            value = self._unsubscribe.loads(token)
        except BadSignature:
            return None
        return value if isinstance(value, str) else None
