"""`digest-bot doctor`'s checks: what a check is (:class:`Check`: ok, warn or fail, with its
fix), the core's own (the config file, the archive, the ledger, the kernel's clock), the clock
against a server's ``Date`` header, and the table.

Each platform's checks, which its spec declares (``PlatformSpec.doctor``: the token, the bot's
rights in every channel, the webhook), are built of these; :mod:`bots.cli.doctor` runs them all
(it reads the registry: this module does not, so the platforms' checks can import it). Nothing
is sent to any chat. Any failure makes ``doctor`` exit 1.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import email.utils
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from digest_core.models import counted
from digest_core.settings import Settings, default_warning

log = logging.getLogger(__name__)

#: a server clock this far from ours is a warning (the ``Date`` header has whole seconds) ...
CLOCK_WARN_SECONDS = 5.0
#: ... and this far a failure: schedules fire off time, and Discord's 3 s interaction
#: deadline is judged against clocks that disagree
CLOCK_FAIL_SECONDS = 30.0
#: seconds each HTTP check may take
TIMEOUT_SECONDS = 10.0
#: the fix for a wrong clock
CLOCK_FIX = "synchronise the clock (timedatectl set-ntp true, or chrony/ntpd)"


class Status(StrEnum):
    """The outcome of one check; only FAIL makes doctor exit 1."""

    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """One line of the table: what was checked, what was found, and the fix when not ok."""

    area: str
    name: str
    status: Status
    detail: str
    fix: str = ""


#: a platform's checks: ``checks(settings_section, now=...)`` -> the lines of the table; an
#: empty list when the section configures nothing to check
PlatformChecks = Callable[..., Awaitable[list[Check]]]


def ok(area: str, name: str, detail: str) -> Check:
    return Check(area, name, Status.OK, detail)


def warn(area: str, name: str, detail: str, fix: str) -> Check:
    return Check(area, name, Status.WARN, detail, fix)


def fail(area: str, name: str, detail: str, fix: str) -> Check:
    return Check(area, name, Status.FAIL, detail, fix)


def clock_check(
    area: str, date_header: str | None, *, sent: dt.datetime, received: dt.datetime
) -> Check:
    """Our clock against a server's ``Date`` header, read between ``sent`` and ``received``.

    The header has whole seconds, so the skew is judged against the request's middle, and
    only the part beyond the header's second and the round trip counts.
    """
    if not date_header:
        return warn(area, "clock", "the server sent no Date header", "none needed")
    try:
        theirs = email.utils.parsedate_to_datetime(date_header)
    except (TypeError, ValueError):
        return warn(area, "clock", f"unreadable Date header {date_header!r}", "none needed")
    middle = sent + (received - sent) / 2
    slack = (received - sent).total_seconds() / 2 + 1.0
    skew = (theirs - middle).total_seconds()
    beyond = max(abs(skew) - slack, 0.0)
    where = "behind" if skew > 0 else "ahead of"
    detail = f"this host is {abs(skew):.0f} s {where} the server"
    if beyond >= CLOCK_FAIL_SECONDS:
        return fail(area, "clock", detail, CLOCK_FIX)
    if beyond >= CLOCK_WARN_SECONDS:
        return warn(area, "clock", detail, CLOCK_FIX)
    return ok(area, "clock", f"within {max(slack, abs(skew)):.0f} s of the server")


def config_check(settings: Settings) -> Check:
    found = settings.config_path
    if found is not None:
        return ok("config", "file", f"{found.resolve()} loaded")
    warning = default_warning(settings)
    if warning is not None:
        return fail("config", "file", warning.detail, warning.fix)
    return ok("config", "file", "no config file; every path set by the environment")


def archive_check(settings: Settings) -> list[Check]:
    from digest_core.archive import Archive
    from digest_core.errors import DigestError

    folder = settings.archive_dir
    fix_dir = "set archive_dir (or DIGEST_BOT_ARCHIVE_DIR) to the folder of issue files"
    if not folder.is_dir():
        return [fail("archive", "folder", f"{folder.resolve()} is not a folder", fix_dir)]
    archive = Archive(folder, index=False)
    try:
        entries = archive.list()
    except (DigestError, OSError) as exc:
        return [fail("archive", "folder", f"{folder.resolve()}: {exc}", fix_dir)]
    if not entries:
        return [fail("archive", "folder", f"no issue files in {folder.resolve()}", fix_dir)]
    out = [ok("archive", "folder", f"{len(entries)} issues in {folder.resolve()}")]
    problems = archive.problems
    if problems:
        out.append(
            warn(
                "archive",
                "files",
                f"{len(problems)} files skipped, e.g. {problems[0]}",
                "digest-bot validate ARCHIVE_DIR shows each; fix or remove them",
            )
        )
    return out


def _sqlite_file_check(url_text: str) -> tuple[Check | None, str]:
    """(a verdict reached without opening the database, the database as shown): a missing
    SQLite file is not created by doctor."""
    from sqlalchemy.engine import make_url

    url = make_url(url_text)
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None, shown
    path = Path(str(url.database)).resolve()
    marker = path.with_name(path.name + ".marker")
    if path.exists():
        return None, str(path)
    if marker.exists():
        return fail(
            "ledger",
            "database",
            f"{path} is missing but {marker.name} says it existed",
            "restore the backup, or run with --new-ledger to start an empty one",
        ), str(path)
    return warn(
        "ledger",
        "database",
        f"{path} does not exist yet (created on the first start)",
        "none if this is a first start; otherwise point database_url at the ledger",
    ), str(path)


async def ledger_check(settings: Settings) -> Check:
    """Open the ledger as ``run`` would (identity, damage, schema)."""
    from digest_core.delivery import Ledger
    from digest_core.errors import ConfigError, DigestError

    verdict, shown = _sqlite_file_check(settings.database_url)
    if verdict is not None:
        return verdict
    try:
        async with Ledger.open(settings.database_url) as ledger:
            ledger_id = ledger.ledger_id
    except ConfigError as exc:
        return fail("ledger", "database", str(exc), "fix database_url")
    except DigestError as exc:
        return fail("ledger", "database", str(exc), "see the message; restore a backup if lost")
    except OSError as exc:
        return fail("ledger", "database", f"{shown}: {exc}", "check database_url and the server")
    return ok("ledger", "database", f"{shown} (ledger {ledger_id})")


#: adjtimex(2)'s answer when the kernel does not consider the clock synchronised
_TIME_ERROR = 5


def kernel_clock_check() -> Check:
    """The clock without a platform's server to compare with (the console alone): whether the
    kernel says NTP keeps it synchronised (``adjtimex(2)``, read only; Linux)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        state = int(libc.adjtimex(ctypes.create_string_buffer(512)))  # a zeroed timex: read
    except (OSError, AttributeError):
        state = -1
    if state < 0:
        detail = "cannot ask the kernel whether the clock is synchronised (not Linux?)"
        return warn("system", "clock", detail, CLOCK_FIX)
    if state == _TIME_ERROR:
        detail = "the kernel says the clock is not synchronised; posts go out by this clock"
        return warn("system", "clock", detail, CLOCK_FIX)
    return ok("system", "clock", "synchronised (the kernel's NTP state)")


def format_table(checks: Iterable[Check]) -> str:
    """The checks as an aligned table; a failed or warned check's fix on the line below."""
    rows = list(checks)
    head = ("STATUS", "AREA", "CHECK", "DETAIL")
    cols = [(c.status.value, c.area, c.name, c.detail) for c in rows]
    widths = [max(len(r[i]) for r in [head, *cols]) for i in range(3)]
    lines = []
    for i, row in enumerate([head, *cols]):
        lines.append(
            "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )
        if i and rows[i - 1].fix and rows[i - 1].status is not Status.OK:
            lines.append(" " * (sum(widths) + 6) + "fix: " + rows[i - 1].fix)
    failed = sum(c.status is Status.FAIL for c in rows)
    warned = sum(c.status is Status.WARN for c in rows)
    lines.append(f"{counted(len(rows), 'check')}: {failed} failed, {counted(warned, 'warning')}")
    return "\n".join(lines)
