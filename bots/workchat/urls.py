"""Taking the robot's token or key out of a configured webhook address."""

from __future__ import annotations

import re
import urllib.parse

from pydantic import SecretStr

from digest_core.port import ConfigError

_TOKEN = re.compile(r"[A-Za-z0-9_-]{8,200}")


def token_from(
    value: SecretStr, *, platform: str, path: str | None = None, query: str | None = None
) -> SecretStr:
    """The token in ``value``: the whole value when it is a bare token, else the last segment
    after ``path`` or the ``query`` parameter of a URL.

    Raises:
        ConfigError: no token can be found (the value itself is never quoted).
    """
    raw = value.get_secret_value().strip()
    token: str | None = raw if _TOKEN.fullmatch(raw) else None
    if token is None and raw.startswith(("https://", "http://")):
        url = urllib.parse.urlsplit(raw)
        if path is not None and url.path.startswith(path):
            token = url.path[len(path) :].strip("/")
        elif query is not None:
            found = urllib.parse.parse_qs(url.query).get(query, [])
            token = found[0] if found else None
    if token is None or not _TOKEN.fullmatch(token):
        where = f"a URL with ?{query}=…" if query else f"a URL ending {path}<token>"
        raise ConfigError(
            f"a {platform} webhook is neither a bare token nor {where} (value not shown)",
            key=f"{platform}.webhooks",
        )
    return SecretStr(token)
