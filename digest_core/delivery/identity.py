"""The ledger's identity: an id kept in the database and in a marker file beside it, so a start
on a missing, brand-new or different database where the bot had one is refused."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from digest_core.errors import LedgerError

log = logging.getLogger(__name__)

#: what accepts an empty (or different) ledger where a marker says there was another one
NEW_LEDGER_FLAG = "--new-ledger"
RUN_NEW_LEDGER = f"digest-bot run {NEW_LEDGER_FLAG}"


def new_ledger_id() -> str:
    return secrets.token_hex(16)


def marker_for(database: Path) -> Path:
    """The marker of an SQLite file: ``<file>.marker`` beside it."""
    return database.with_name(database.name + ".marker")


def read_marker(marker: Path) -> str | None:
    """The ledger id recorded in ``marker``, or None if there is no marker.

    Raises:
        LedgerError: the marker exists but cannot be read.
    """
    try:
        text = marker.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(
            f"cannot read the ledger marker {marker}: {exc}; remove it if the ledger beside it "
            "is the right one",
            where=str(marker),
        ) from exc
    lines = text.splitlines()
    return lines[0].strip() if lines and lines[0].strip() else None


def write_marker(marker: Path, ledger_id: str) -> None:
    """Record ``ledger_id`` in ``marker`` (atomically); a failure is logged, not raised: the
    ledger works without it, it only loses the start-up check."""
    tmp = marker.with_name(marker.name + ".tmp")
    try:
        tmp.write_text(
            f"{ledger_id}\n"
            "# digest-bot: the id of the ledger beside this file. Do not delete it: it lets the\n"
            "# bot refuse to start on an empty ledger if the database is lost.\n",
            encoding="ascii",
        )
        tmp.replace(marker)
    except OSError as exc:
        log.warning("could not write the ledger marker %s: %s", marker, exc)


def check_identity(
    *,
    shown: str,
    marker: Path,
    expected: str | None,
    found: str | None,
    exists: bool,
    new_ledger: bool,
) -> None:
    """Refuse a ledger that is not the one ``marker`` recorded (id ``expected``).

    ``found`` is the id in the database (None: a new or foreign database), ``exists`` whether
    the database was there before it was opened. Without a marker (a first start, or an
    older version of the bot) and with ``new_ledger``, anything goes.

    Raises:
        LedgerError: one line naming the database, the marker and how to restore a backup.
    """
    if expected is None or new_ledger or found == expected:
        return
    if not exists:
        what = "is missing"
    elif found is None:
        what = "is a new, empty database"
    else:
        what = f"is another ledger (id {found[:8]}…)"
    raise LedgerError(
        f"ledger {shown} (database_url) {what}, but {marker} records the ledger this bot "
        f"used (id {expected[:8]}…); refusing to start, or every channel would get the posts "
        f"again and subscribers would be lost. Restore it: copy your backup to {shown} "
        f"(removing any {shown}-wal and {shown}-shm left beside it) and start again; or run "
        f"`{RUN_NEW_LEDGER}` once to accept an empty ledger",
        where=shown,
    )
