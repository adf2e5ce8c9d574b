"""The one exception tree of digest-bot.

::

    DigestError
    ├── ConfigError            file, key, what is wrong
    ├── LedgerError            the ledger database cannot be used: which file, why, the fix
    │   └── LedgerLost         deleted or replaced under the running bot
    ├── IssueError
    │   ├── IssueNotFound      no issue for that date / in the archive
    │   ├── IssueFormatError   path, line, detail
    │   └── IssuePublished     adding a file over a published issue without --correct
    ├── CommandRefused         a command from a user without the capability it needs
    ├── BadArgument            a command's words or options that do not fit its arguments
    ├── NotRunning             an admin command while the bot's delivery is not running
    └── DeliveryError          platform, target
        ├── DeliveryBusy       another process holds the delivery lease of the platform
        ├── TransientError     network, 5xx, timeouts: retry with backoff and jitter
        │   ├── RateLimited    retry_after seconds
        │   └── OutcomeUnknown cut after the request may have left: retried, may be a duplicate
        ├── TargetGone         blocked, kicked, deleted, no permission: stop sending there
        ├── TargetMoved        new id (Telegram group -> supergroup)
        ├── MessageGone        the message to edit, delete or pin no longer exists
        ├── NotPermitted       the bot lacks a right for this action (pin, delete) there
        └── Rejected           the platform refused our payload: a bug, never retried

Adapters translate SDK errors at the boundary with ``raise X(...) from exc``.
Only the CLI turns errors into exit codes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path


class DigestError(Exception):
    """Base of every error digest-bot raises on purpose."""


class ConfigError(DigestError):
    """A configuration value is missing or wrong."""

    def __init__(self, detail: str, *, file: str | Path | None = None, key: str | None = None):
        self.file = str(file) if file is not None else None
        self.key = key
        self.detail = detail
        where = ": ".join(p for p in (self.file, key) if p)
        super().__init__(f"{where}: {detail}" if where else detail)


class LedgerError(DigestError):
    """The ledger database cannot be used as it is (corrupt, unwritable, not the one the bot
    had). The message is one line naming the file (or URL) and ``database_url``, and the fix.
    """

    def __init__(self, detail: str, *, where: str = ""):
        self.where = where
        self.detail = detail
        super().__init__(detail)


class LedgerLost(LedgerError):
    """The ledger's database was deleted or replaced while the bot ran: nothing more may be
    sent or recorded (the records would go to a file no one will read)."""


class LeadershipLost(LedgerError):
    """This process led (scheduled, posted, received commands) and lost the leader's lease:
    another process leads now. ``digest-bot run`` stops; a supervisor restarts it as a
    standby."""


class IssueError(DigestError):
    """Something is wrong with an issue or it cannot be found."""


class IssueNotFound(IssueError):
    """No issue exists for the requested date (or the archive is empty)."""

    def __init__(self, detail: str, *, date: dt.date | None = None):
        self.date = date
        super().__init__(detail)


class IssueFormatError(IssueError):
    """An issue file (or structured data) failed to load.

    ``str(err)`` is ``path:line: detail`` (``path: detail`` when no line applies), the form
    compilers use, so editors can jump to the place; where the file has several problems (a
    JSON or YAML file's fields), ``more`` holds the others and :meth:`lines` gives each its
    own line.
    """

    def __init__(
        self,
        path: str | Path,
        line: int | None,
        detail: str,
        *,
        more: Sequence[tuple[int | None, str]] = (),
    ):
        self.path = str(path)
        self.line = line
        self.detail = detail
        #: the other problems of the same file, (line, detail) each, in order
        self.more = tuple(more)
        first = self._at(line, detail)
        super().__init__(f"{first}; and {len(self.more)} more problems" if self.more else first)

    def _at(self, line: int | None, detail: str) -> str:
        return f"{self.path}:{line}: {detail}" if line is not None else f"{self.path}: {detail}"

    def lines(self) -> list[str]:
        """Every problem as its own ``path:line: detail`` line (a terminal shows them all;
        ``str()`` is the first and how many more, for one-line places such as ``status``)."""
        return [self._at(self.line, self.detail), *(self._at(n, d) for n, d in self.more)]


class IssuePublished(IssueError):
    """An issue file would replace the issue of a day already published (its post time has
    passed): refused unless the editor says it is a correction. ``path`` is the file that
    holds the published issue."""

    def __init__(self, detail: str, *, date: dt.date, path: str | Path):
        self.date = date
        self.path = str(path)
        super().__init__(detail)


class CommandRefused(DigestError):
    """``/command`` (or the action ``command``: an upload, a confirmation's cancel) needs
    ``capability`` and the user does not have it. The core answers it in one place
    (:meth:`Commands.refuse <digest_core.commands.dispatch.Commands.refuse>`): one private refusal,
    logged and audited with ``outcome`` (not when ``audited`` is False: nothing was attempted),
    telling ``told`` (default: /command is for admins only)."""

    def __init__(
        self,
        command: str,
        capability: str,
        *,
        told: str = "",
        outcome: str = "refused",
        audited: bool = True,
    ):
        self.command = command
        self.capability = capability
        self.told = told
        self.outcome = outcome
        self.audited = audited
        super().__init__(f"/{command} needs the {capability!r} capability")


class BadArgument(DigestError):
    """A command's arguments do not fit its declaration; ``problem`` says why, in both
    languages (the core answers it with the problem and the command's usage)."""

    def __init__(self, problem: str):
        self.problem = problem
        super().__init__(problem)


class NotRunning(DigestError):
    """An admin command needs the running bot's delivery (the admin backend) and there is
    none (a one-shot console, a test): the core answers it in one line."""


class DeliveryError(DigestError):
    """Sending to one target failed."""

    def __init__(self, detail: str, *, platform: str = "", target: str = ""):
        self.platform = platform
        self.target = target
        self.detail = detail
        where = ":".join(p for p in (platform, target) if p)
        super().__init__(f"{where}: {detail}" if where else detail)


class DeliveryBusy(DeliveryError):
    """Another process is delivering on this platform (it holds the delivery lease).

    ``holder`` names it (``host:pid:token``); ``expires_at`` is when its lease lapses unless
    renewed, or None for an OS lock (an SQLite ledger), held for as long as that process runs.
    Retry once it is done (what it has sent is not sent again).
    """

    def __init__(self, platform: str, *, holder: str, expires_at: dt.datetime | None):
        until = (
            "for as long as it runs (an OS lock beside the ledger)"
            if expires_at is None
            else f"until {expires_at:%Y-%m-%d %H:%M:%S} UTC unless renewed"
        )
        super().__init__(
            f"another process is delivering on {platform}: lease held by {holder} {until}; "
            "try again once it has finished",
            platform=platform,
        )
        self.holder = holder
        self.expires_at = expires_at


class TransientError(DeliveryError):
    """A failure worth retrying later (network, 5xx, timeout)."""


class RateLimited(TransientError):
    """The platform asked us to wait ``retry_after`` seconds before sending to this target."""

    def __init__(self, detail: str, *, retry_after: float, platform: str = "", target: str = ""):
        self.retry_after = float(retry_after)
        super().__init__(detail, platform=platform, target=target)


class OutcomeUnknown(TransientError):
    """The send was cut after the request may have reached the platform (a read timeout, a
    stop or a dropped connection mid-send): the message may have arrived.

    The core records the part as outcome-unknown (counted with the parts in flight, as a
    possible duplicate) and sends it again: at least once, never silently "not sent".
    """


class TargetGone(DeliveryError):
    """The target cannot receive messages any more (blocked, kicked, deleted, forbidden)."""


class TargetMoved(DeliveryError):
    """The target has a new id (a Telegram group upgraded to a supergroup)."""

    def __init__(self, detail: str, *, new_target: str, platform: str = "", target: str = ""):
        self.new_target = new_target
        super().__init__(detail, platform=platform, target=target)


class MessageGone(DeliveryError):
    """The message to edit, delete or pin no longer exists (someone deleted it); the target
    itself still receives messages."""


class NotPermitted(DeliveryError):
    """The bot lacks the right for this action on one message (pin, delete) in the target;
    sending there still works. Retrying cannot help until an admin grants the right."""


class Rejected(DeliveryError):
    """The platform refused the payload itself; retrying the same payload cannot help."""
