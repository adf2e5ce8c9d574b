"""Backing up the ledger: SQLite's online backup API, or the ``pg_dump`` command for PostgreSQL."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import make_url

from digest_core.delivery.ledger.engine import sqlite_file
from digest_core.delivery.ledger.schema import CONFIG_KEY
from digest_core.errors import ConfigError, LedgerError

__all__ = ["Backup", "backup_sqlite", "pg_dump_command", "shell", "sqlite_source"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backup:
    """A finished SQLite backup."""

    source: Path
    path: Path
    size: int
    ledger_id: str | None


def backup_sqlite(source: Path, path: Path, *, timeout: float = 30.0) -> Backup:
    """Copy the SQLite ledger ``source`` to ``path`` while the bot may be running.

    SQLite's online backup API copies one consistent snapshot (in WAL mode a reader blocks
    no writer, so the bot keeps posting); the copy is written beside ``path`` and renamed
    into place once checked (``quick_check``), in rollback-journal mode: one self-contained
    file. ``path`` MUST NOT exist.

    Raises:
        LedgerError: ``source`` is missing or unreadable, ``path`` exists or cannot be
            written, or the copy does not check out.
    """
    if not source.is_file():
        raise LedgerError(f"no ledger at {source} ({CONFIG_KEY}): nothing to back up")
    if path.exists():
        raise LedgerError(f"{path} exists: name a new file for the backup, or remove it")
    partial = path.with_name(path.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        src = sqlite3.connect(source, timeout=timeout)
        try:
            dst = sqlite3.connect(partial)
            try:
                src.backup(dst)  # all pages in one step: one snapshot
                dst.execute("PRAGMA journal_mode=DELETE")
                found = dst.execute("PRAGMA quick_check(1)").fetchone()[0]
                if found != "ok":
                    raise LedgerError(f"the backup of {source} does not check out: {found}")
                ledger_id = None
                with contextlib.suppress(sqlite3.Error):
                    row = dst.execute("SELECT id FROM ledger_identity").fetchone()
                    ledger_id = None if row is None else str(row[0])
            finally:
                dst.close()
        finally:
            src.close()
        with partial.open("rb+") as f:
            os.fsync(f.fileno())
        os.replace(partial, path)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise LedgerError(f"cannot back up {source} to {path}: {exc}") from exc
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise LedgerError(
            f"cannot back up {source} to {path}: {exc.strerror or exc}"
            + (f": {exc.filename}" if exc.filename else "")
        ) from exc
    return Backup(source, path, path.stat().st_size, ledger_id)


def sqlite_source(url: str) -> Path | None:
    """The file of an SQLite ledger URL; None for other databases.

    Raises:
        ConfigError: an in-memory SQLite URL (there is nothing to back up).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    found = sqlite_file(url)
    if found is None:
        raise ConfigError("an in-memory ledger has nothing to back up", key=CONFIG_KEY)
    return found


def pg_dump_command(url: str, path: Path) -> tuple[list[str], list[str]]:
    """The ``pg_dump`` command that backs up the PostgreSQL ledger ``url`` to ``path``
    (custom format), and the ``pg_restore`` command that restores it; neither holds the
    password (``pg_dump`` reads it from ``~/.pgpass`` or ``PGPASSWORD``)."""
    parsed = make_url(url)
    conn: list[str] = []
    if parsed.host:
        conn.append(f"--host={parsed.host}")
    if parsed.port:
        conn.append(f"--port={parsed.port}")
    if parsed.username:
        conn.append(f"--username={parsed.username}")
    database = parsed.database or ""
    dump = ["pg_dump", *conn, "--format=custom", f"--file={path}", f"--dbname={database}"]
    restore = [
        "pg_restore",
        *conn,
        "--clean",
        "--if-exists",
        "--no-owner",
        f"--dbname={database}",
        str(path),
    ]
    return dump, restore


def shell(argv: list[str]) -> str:
    """``argv`` quoted for a POSIX shell."""
    return shlex.join(argv)
