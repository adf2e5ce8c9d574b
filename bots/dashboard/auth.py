"""Access to the editor's dashboard: the password, sessions, CSRF tokens, login rate limits.

- The password (or token) comes from ``DIGEST_BOT_HTTP__ADMIN_PASSWORD`` or
  ``[http] admin_password_file``, never the config file; it is compared in constant time.
- A session is a signed cookie (itsdangerous, keyed by a hash of the password, so a new
  password ends every session): ``HttpOnly``, ``SameSite=Strict``, ``Secure`` over https,
  path ``/admin/``; it holds the admin's name, its CSRF token and its login time, and expires
  ``[http] session_hours`` after the login (checked from the signature's own time).
- Every state-changing request (POST) carries the session's CSRF token in a form field
  (``csrf``) or the ``X-CSRF-Token`` header; a missing or wrong one is 403.
- Logins are rate-limited per client (:data:`CLIENT_FAILURES` failures per
  :data:`WINDOW` seconds) and overall (:data:`ALL_FAILURES`), in memory.
- With ``[telegram] dashboard_login``, an admin of ``[telegram] admins`` may log in with
  Telegram's Login Widget instead (:class:`TelegramLogin`): the fields Telegram signs, checked
  as it documents, and fresh; a failed check counts as a wrong password.
"""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import hmac
import logging
import re
import secrets
import time
from dataclasses import dataclass

from aiohttp import web
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

log = logging.getLogger(__name__)

COOKIE = "digest_admin"
PATH = "/admin/"
_SALT = "digest-bot dashboard session"
#: failed logins one client may make per WINDOW, and all clients together
CLIENT_FAILURES = 5
ALL_FAILURES = 30
WINDOW = 300.0
#: an admin's name as given at login (shown in the audit log as ``dashboard:<name>``)
NAME = re.compile(r"[A-Za-z0-9_.@-]{1,32}")


#: how old a Telegram login may be (seconds since its ``auth_date``), and how far ahead of
#: this host's clock its ``auth_date`` may be
TELEGRAM_FRESH = 600
TELEGRAM_SKEW = 60
#: the fields the Login Widget sends (any other one is refused)
TELEGRAM_FIELDS = frozenset(
    {"id", "first_name", "last_name", "username", "photo_url", "auth_date", "hash"}
)


@dataclass(frozen=True)
class TelegramLogin:
    """Telegram's Login Widget for the admins in ``[telegram] admins``, checked as Telegram
    documents (core.telegram.org/widgets/login, "Checking authorization"): the
    data-check-string (every field but ``hash``, as ``key=value``, sorted by key, joined by
    newlines) signed with HMAC-SHA256 keyed by SHA256(bot token) is ``hash``, in constant
    time; ``auth_date`` no older than :data:`TELEGRAM_FRESH` seconds; ``id`` an admin."""

    token: str
    admins: frozenset[int]
    #: the bot's @username (the widget's ``data-telegram-login``), once known
    bot: str = ""

    def admin(self, fields: dict[str, str], *, now: float | None = None) -> int | None:
        """The admin's Telegram id the widget's ``fields`` prove; None when they do not."""
        given = fields.get("hash", "")
        if not given or not set(fields) <= TELEGRAM_FIELDS or len(given) != 64:
            return None
        check = "\n".join(f"{k}={fields[k]}" for k in sorted(fields) if k != "hash")
        secret = hashlib.sha256(self.token.encode()).digest()
        expected = hmac.new(secret, check.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), given.encode()):
            return None
        try:
            auth_date, user = int(fields.get("auth_date", "")), int(fields.get("id", ""))
        except ValueError:
            return None
        now = time.time() if now is None else now
        if not (now - TELEGRAM_FRESH <= auth_date <= now + TELEGRAM_SKEW):
            return None  # replayed, or signed long ago
        return user if user in self.admins else None


@dataclass(frozen=True)
class Session:
    """A logged-in admin."""

    name: str
    csrf: str


#: where the guard keeps a request's checked session (a typed key: aiohttp warns of strings)
SESSION_KEY = web.RequestKey("dashboard.session", Session)


class Access:
    """The password check, the session cookies and the login limits of one endpoint."""

    def __init__(self, password: str, *, hours: float) -> None:
        self._password = hashlib.sha256(password.encode()).digest()
        key = hmac.new(b"digest-bot dashboard", password.encode(), hashlib.sha256).hexdigest()
        self._serializer = URLSafeTimedSerializer(key, salt=_SALT)
        self.max_age = int(hours * 3600)
        self._failures: dict[str, collections.deque[float]] = {}
        self._all: collections.deque[float] = collections.deque()

    # ------------------------------------------------------------ logging in

    def limited(self, client: str, now: float | None = None) -> bool:
        """Whether ``client`` (or everyone) failed too often lately to try again now."""
        now = time.monotonic() if now is None else now
        for seen in (self._failures.get(client), self._all):
            while seen and now - seen[0] > WINDOW:
                seen.popleft()
        mine = self._failures.get(client)
        return (mine is not None and len(mine) >= CLIENT_FAILURES) or len(self._all) >= ALL_FAILURES

    def check(self, client: str, password: str, now: float | None = None) -> bool:
        """Whether ``password`` is the admins'; a wrong one counts against ``client``."""
        given = hashlib.sha256(password.encode()).digest()
        if hmac.compare_digest(given, self._password):
            self._failures.pop(client, None)
            return True
        self.failed(client, now)
        return False

    def failed(self, client: str, now: float | None = None) -> None:
        """A failed login of ``client`` (a wrong password, a Telegram login that failed its
        check), counted against it and everyone."""
        now = time.monotonic() if now is None else now
        self._failures.setdefault(client, collections.deque()).append(now)
        self._all.append(now)
        if len(self._failures) > 10_000:  # a flood of clients: forget the oldest
            self._failures.pop(next(iter(self._failures)))
        log.warning("dashboard: a failed login from %s", client)

    # ------------------------------------------------------------ sessions

    def new_session(self, name: str) -> tuple[Session, str]:
        """A session for ``name`` and its cookie value."""
        session = Session(name, secrets.token_urlsafe(24))
        return session, str(self._serializer.dumps([session.name, session.csrf]))

    def session(self, cookie: str | None) -> Session | None:
        """The session a cookie holds; None when missing, forged or expired."""
        if not cookie or len(cookie) > 512:
            return None
        try:
            value = self._serializer.loads(cookie, max_age=self.max_age)
        except (SignatureExpired, BadSignature):
            return None
        if not (isinstance(value, list) and len(value) == 2):
            return None
        name, csrf = value
        if not (isinstance(name, str) and isinstance(csrf, str) and NAME.fullmatch(name)):
            return None
        return Session(name, csrf)

    @staticmethod
    def csrf_ok(session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), session.csrf.encode())


def headers(*, widget: bool = False) -> dict[str, str]:
    """Every answer's headers: no caching, no framing, only the dashboard's own files (and,
    on the login page with ``widget``, Telegram's Login Widget: its script and its frame)."""
    script, frame = "'self'", "'none'"
    if widget:
        script, frame = "'self' https://telegram.org", "https://oauth.telegram.org"
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'self'; script-src {script}; img-src 'self'; "
            f"connect-src 'self'; form-action 'self'; frame-src {frame}; "
            "frame-ancestors 'none'; base-uri 'none'"
        ),
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        # (no-referrer would make the browser send the forms' Origin as "null", and treat a
        # POST from the dashboard itself as cross-site: no SameSite=Strict cookie)
        "Referrer-Policy": "same-origin",
        "X-Frame-Options": "DENY",
    }


def session_of(request: web.Request) -> Session:
    """The session the guard checked for this request."""
    return request[SESSION_KEY]


def same_origin(request: web.Request) -> bool:
    """No ``Origin`` (an older client) or this endpoint's own."""
    origin = request.headers.get("Origin")
    if origin is None or origin == "null":
        return origin is None
    return origin.split("://", 1)[-1] == request.host


def day_of(value: str | None) -> dt.date | None:
    """A ``YYYY-MM-DD`` query value, or None (missing or malformed)."""
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        return None
