"""A throwaway PostgreSQL server for tests: one per session (per xdist worker), a database per test.

Interface (stable; other test modules and scripts build on it):

- fixture ``pg_server`` (session): a running :class:`PgServer`; skips the test when no
  PostgreSQL binaries are found, unless ``DIGEST_BOT_REQUIRE_PG=1`` (set by ``.ci/run``), when
  it fails instead.
- fixture ``pg_url`` (function): ``postgresql+asyncpg://postgres@127.0.0.1:PORT/NAME``, a fresh
  empty database made for this test (``CREATE DATABASE … TEMPLATE template0``) and dropped
  after it.
- :meth:`PgServer.start` / :meth:`PgServer.stop` / :meth:`PgServer.create_database` /
  :meth:`PgServer.drop_database` / :meth:`PgServer.url` for scripts and multi-process tests;
  :meth:`PgServer.restart` (``pg_ctl restart -m fast``), or :meth:`PgServer.shut_down` (or
  :meth:`PgServer.shutting_down`, held mid-shutdown) and :meth:`PgServer.start_again`, for
  tests of a server that goes away;
  ``python -m tests.pg`` starts a server, prints its admin URL (database ``postgres``) on
  one line, and serves until stdin closes or it gets SIGTERM/SIGINT.

The server runs as ``nobody`` when we are root (PostgreSQL refuses root), listens on a free
loopback port with trust authentication (user ``postgres``, no password), keeps its data in a
temporary folder removed by :meth:`PgServer.stop`, and trades durability for speed
(``fsync=off``). It dies with the process that started it (``setpriv --pdeathsig``), so a
killed test run leaves no server behind.

Binaries: ``DIGEST_BOT_PG_BIN`` (a folder holding ``initdb`` and ``postgres``), else the newest
``/usr/lib/postgresql/*/bin``, else ``initdb`` on ``PATH``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import ports

#: the superuser the server is initialised with (trust authentication, no password)
USER = "postgres"
HOST = "127.0.0.1"
#: the async driver URL scheme the ledger uses
SCHEME = "postgresql+asyncpg"
REQUIRE_ENV = "DIGEST_BOT_REQUIRE_PG"
BIN_ENV = "DIGEST_BOT_PG_BIN"

# speed over durability: a crashed test server is thrown away anyway
_SETTINGS = {
    "listen_addresses": HOST,
    "unix_socket_directories": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "timezone": "UTC",
    "log_min_messages": "warning",
    "logging_collector": "off",
}


class PgUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bin() -> Path:
    """The folder holding ``initdb`` and ``postgres``; raises :class:`PgUnavailable`."""
    env = os.environ.get(BIN_ENV)
    candidates: list[Path] = [Path(env)] if env else []
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += versions
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    raise PgUnavailable(
        f"no PostgreSQL server binaries (initdb, postgres) found; set {BIN_ENV} or install "
        "them (apt-get install -y --no-install-recommends postgresql)"
    )


_PREFIX = "digest-bot-pg-"
_OWNER = "owner.pid"


def _remove_stale() -> None:
    """Delete the folders of servers whose test process died without stopping them (the
    server itself died with it)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            pid = int((folder / _OWNER).read_text())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):
            continue  # being set up right now, or not ours


def _free_port() -> int:
    return ports.free_port()


def _as_unprivileged() -> tuple[list[str], int | None, int | None]:
    """The command prefix that drops root (and kills the child with its parent), and the
    uid/gid that must own the data folder (None when we are not root)."""
    prefix: list[str] = []
    uid = gid = None
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0:
        if setpriv is None:
            raise PgUnavailable("running as root and setpriv is missing: cannot drop to nobody")
        user = pwd.getpwnam("nobody")
        uid, gid = user.pw_uid, user.pw_gid
        prefix = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    elif setpriv is not None:
        prefix = [setpriv]
    if prefix:
        prefix.append("--pdeathsig=SIGQUIT")  # an immediate shutdown when we die
    return prefix, uid, gid


def _postmaster(bin_dir: Path, root: Path, port: int) -> subprocess.Popen[bytes]:
    """Start the server of the cluster in ``root``/data on ``port`` (not waiting for it)."""
    prefix, _uid, _gid = _as_unprivileged()
    args = [str(bin_dir / "postgres"), "-D", str(root / "data"), "-p", str(port)]
    for key, value in _SETTINGS.items():
        args += ["-c", f"{key}={value}"]
    with (root / "server.log").open("ab") as log:
        return subprocess.Popen(
            [*prefix, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=root,
            start_new_session=True,  # Ctrl-C in the terminal is for pytest, not it
        )


class PgServer:
    """One running PostgreSQL server on loopback; see the module docstring."""

    def __init__(self, proc: subprocess.Popen[bytes], root: Path, port: int, bin_dir: Path):
        self.proc = proc
        self.root = root
        self.port = port
        self.bin_dir = bin_dir
        self._names = itertools.count(1)

    @classmethod
    def start(cls, *, bin_dir: Path | None = None, timeout: float = 30.0) -> PgServer:
        """initdb a new cluster in a temporary folder and start it on a free port; returns
        once it accepts connections. Raises :class:`PgUnavailable` without binaries and
        RuntimeError (with the server's log) when it does not come up."""
        bin_dir = bin_dir or find_bin()
        prefix, uid, gid = _as_unprivileged()
        _remove_stale()
        root = Path(tempfile.mkdtemp(prefix=_PREFIX))
        try:
            (root / _OWNER).write_text(str(os.getpid()))
            os.chmod(root, 0o700)
            if uid is not None and gid is not None:
                os.chown(root, uid, gid)
            data = root / "data"
            init = subprocess.run(
                [
                    *prefix,
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    USER,
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                    "--no-instructions",
                ],
                capture_output=True,
                cwd=root,
            )
            if init.returncode:
                raise RuntimeError(f"initdb failed: {init.stderr.decode(errors='replace')}")
            last = ""
            for _attempt in range(3):  # the free port may be taken before we bind it
                port = _free_port()
                proc = _postmaster(bin_dir, root, port)
                server = cls(proc, root, port, bin_dir)
                if server._wait_ready(timeout):
                    return server
                server._kill()
                last = (root / "server.log").read_text(errors="replace")
            raise RuntimeError(f"PostgreSQL did not start:\n{last}")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                self.sql("SELECT 1")
            except RuntimeError:
                time.sleep(0.05)
            else:
                return True
        return False

    def sql(self, statement: str, *, database: str = "postgres") -> str:
        """Run one SQL statement with ``psql`` as the superuser; its output (unaligned,
        tuples only). RuntimeError with psql's message when it fails."""
        psql = self.bin_dir / "psql"
        done = subprocess.run(
            [
                str(psql if psql.is_file() else "psql"),
                "-h", HOST, "-p", str(self.port), "-U", USER, "-d", database,
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement,
            ],
            capture_output=True,
            env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"psql: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode()

    def url(self, database: str = "postgres", *, scheme: str = SCHEME) -> str:
        """The SQLAlchemy URL of ``database`` on this server (no password)."""
        return f"{scheme}://{USER}@{HOST}:{self.port}/{database}"

    def create_database(self, name: str | None = None, *, template: str = "template0") -> str:
        """Create a database (a new unique name unless given) as a copy of ``template``;
        returns its name."""
        name = name or f"t{os.getpid()}_{next(self._names)}"
        self.sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name``, disconnecting whoever is still connected."""
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def shut_down(self, *, timeout: float = 30.0) -> None:
        """A fast shutdown, as ``pg_ctl stop -m fast`` does (SIGINT): sessions are ended with
        SQLSTATE 57P01, new connections refused with 57P03 ("the database system is shutting
        down") until the server exits, then refused by the closed port. Returns once it has
        exited; :meth:`start_again` brings it back."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout)

    def start_again(self, *, timeout: float = 30.0) -> None:
        """Start the cluster again on the same port after :meth:`shut_down`; returns once it
        accepts connections (RuntimeError with its log otherwise). Call it from a thread that
        outlives the server (the main one): the server dies with the thread that started it."""
        self.proc = _postmaster(self.bin_dir, self.root, self.port)
        if not self._wait_ready(timeout):
            log = (self.root / "server.log").read_text(errors="replace")
            raise RuntimeError(f"PostgreSQL did not start again:\n{log[-3000:]}")

    @contextlib.contextmanager
    def shutting_down(self, *, timeout: float = 30.0) -> Iterator[None]:
        """Hold the server in the middle of a shutdown for the block, then let it exit (bring
        it back with :meth:`start_again`): what a client meets while a restart's shutdown
        checkpoint runs, for as long as the test needs. A session of ours stays open while a
        smart shutdown (SIGTERM) waits for it, every other session is ended (SQLSTATE 57P01,
        as a fast shutdown does), and every new connection is refused with 57P03 ("the
        database system is shutting down")."""
        psql = self.bin_dir / "psql"
        holder = subprocess.Popen(
            [
                str(psql if psql.is_file() else "psql"),
                "-h", HOST, "-p", str(self.port), "-U", USER, "-d", "postgres",
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
            ],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert holder.stdin is not None and holder.stdout is not None
        try:

            def ask(statement: str) -> str:
                assert holder.stdin is not None and holder.stdout is not None
                holder.stdin.write(f"{statement};\n")
                holder.stdin.flush()
                return holder.stdout.readline().strip()

            assert ask("SELECT 'connected'") == "connected"
            self.proc.send_signal(signal.SIGTERM)  # smart: waits for our session
            ask(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            yield
        finally:
            holder.stdin.close()
            holder.wait(timeout)
            self.proc.wait(timeout)

    def restart(self, *, timeout: float = 30.0) -> None:
        """What ``pg_ctl restart -m fast`` does: :meth:`shut_down`, then :meth:`start_again`."""
        self.shut_down(timeout=timeout)
        self.start_again(timeout=timeout)

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # immediate shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stop(self) -> None:
        """Stop the server and delete its data."""
        self._kill()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (skipped when there is none, unless required)."""
    try:
        server = PgServer.start()
    except PgUnavailable as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A ``postgresql+asyncpg://`` URL to a fresh, empty database, dropped after the test."""
    name = pg_server.create_database()
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


def main() -> int:
    """``python -m tests.pg``: start a server, print its admin URL, serve until stdin closes."""
    server = PgServer.start()
    try:
        print(server.url(), flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
