"""OS locks beside an SQLite ledger: its leases, held for the life of a process, never by a clock.

On one SQLite file every process is on one host, so the kernel can judge who holds a lease:
each lease is an exclusive ``flock`` on its own file in ``<ledger>.locks/`` (``leader.lock``,
``deliver%3Atelegram.lock``…). The kernel releases it when its holder closes it or dies, even by
SIGKILL; nothing lapses while the holder lives, however long the database stays locked, and no
host's clock (SQLite's ``CURRENT_TIMESTAMP`` is the process's own) takes part.

Why a file of its own and ``flock`` (not ``fcntl``/``lockf`` byte ranges, nor the database file):

- ``flock`` belongs to the open file description, so two ledgers in one process exclude each
  other as two processes do, and closing some other descriptor of the file releases nothing.
  POSIX (``lockf``) locks belong to the process: a second open in the same process would share
  them, and closing *any* descriptor of the file drops them all.
- SQLite itself takes POSIX locks on the database file and its ``-shm``, and opens and closes
  those files as it pleases; a lock of ours there could be dropped by SQLite's own ``close()``
  (and on NFS, where Linux emulates ``flock`` with POSIX locks, it would meet SQLite's).
- Descriptors from :func:`os.open` are not inherited by child processes (``O_CLOEXEC``), so a
  program the bot starts cannot keep a dead bot's lease.

The holder writes its owner id (``host:pid:token``) into the file, so a process that finds the
lock taken can say who holds it. The file must stay in place: :meth:`FileLocks.intact` tells a
holder whose lock file was deleted or replaced (another process may lock the new one).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
from pathlib import Path
from urllib.parse import quote

if sys.platform != "win32":
    import fcntl

__all__ = ["AVAILABLE", "FOLDER_SUFFIX", "FileLocks", "locks_folder"]

log = logging.getLogger(__name__)

#: whether this system has ``flock`` (not Windows: there an SQLite ledger keeps its leases as
#: rows, judged by SQLite's clock, the host's own)
AVAILABLE = sys.platform != "win32"

#: the folder of the lock files beside the ledger ``<file>``: ``<file>.locks``
FOLDER_SUFFIX = ".locks"


def locks_folder(database: Path) -> Path:
    """The folder holding the lock files of the SQLite ledger ``database``."""
    return database.with_name(database.name + FOLDER_SUFFIX)


def _busy(exc: OSError) -> bool:
    return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class FileLocks:
    """The leases of one ledger instance as ``flock`` locks on files in :attr:`folder`.

    Not reentrant itself (the ledger counts holds): :meth:`try_lock` of a name this instance
    holds already succeeds without a second lock. Every call is one or two system calls that
    do not wait (``LOCK_NB``), so they are made on the event loop.
    """

    def __init__(self, database: Path) -> None:
        self.folder = locks_folder(database.resolve())
        #: lease name -> the descriptor holding its lock
        self._fds: dict[str, int] = {}
        #: lease name -> the owner its file still named when this instance locked it: a
        #: holder that ended without releasing it (killed, crashed)
        self.left_by: dict[str, str] = {}

    def prepare(self) -> None:
        """Create :attr:`folder` (at open, so an unwritable folder is found then).

        Raises:
            OSError: it cannot be created, or this user cannot create files in it.
        """
        self.folder.mkdir(exist_ok=True)
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "Permission denied", str(self.folder))

    def path(self, name: str) -> Path:
        """The lock file of the lease ``name`` (the name quoted: any name is one file)."""
        return self.folder / f"{quote(name, safe='-_.~')}.lock"

    def holds(self, name: str) -> bool:
        """True while this instance holds the lock ``name``."""
        return name in self._fds

    def try_lock(self, name: str, owner: str) -> str | None:
        """Take the lock ``name`` without waiting and record ``owner`` in its file; None when
        this instance holds it (now or already), else who holds it (see :meth:`holder`).

        Raises:
            OSError: the lock file cannot be opened or locked for another reason.
        """
        if name in self._fds:
            return None
        path = self.path(name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except PermissionError:  # another user's file: it locks all the same, read-only
            fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if not _busy(exc):
                raise
            return self._read_owner(path)
        self._fds[name] = fd
        try:
            left = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip()
            if left and left != owner:
                self.left_by[name] = left
            else:
                self.left_by.pop(name, None)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{owner}\n".encode(), 0)
        except OSError as exc:  # the lock holds all the same; only the name is not shown
            log.warning("%s: could not record the holder: %s", path, exc)
        return None

    def holder(self, name: str) -> str | None:
        """Who holds the lock ``name`` (an owner id, as its holder recorded it), or None when
        no one does. For a lock of another instance: it is tried for a moment (shared, without
        waiting) and given back at once."""
        if name in self._fds:
            return self._read_owner(self.path(name))
        path = self.path(name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if not _busy(exc):
                raise
            return self._read_owner(path)
        finally:
            os.close(fd)  # (also gives back the shared lock if it was taken)
        return None

    def intact(self, name: str) -> bool:
        """True while this instance holds ``name`` and its file is still the one locked (not
        deleted or replaced: another process could lock a new file of that name)."""
        fd = self._fds.get(name)
        if fd is None:
            return False
        try:
            st, held = os.stat(self.path(name)), os.fstat(fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)

    def unlock(self, name: str) -> None:
        """Give the lock ``name`` back (nothing if this instance does not hold it)."""
        fd = self._fds.pop(name, None)
        if fd is None:
            return
        with contextlib.suppress(OSError):  # (the name would only be shown stale)
            os.ftruncate(fd, 0)
        os.close(fd)  # the lock goes with the last descriptor of its open file

    def close(self) -> None:
        """Give every lock back."""
        for name in list(self._fds):
            self.unlock(name)

    @staticmethod
    def _read_owner(path: Path) -> str:
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            text = ""
        return text or f"another process (holding {path})"
