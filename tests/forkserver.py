"""The tests' ``python -m MODULE …`` processes, forked from a server that has imported their
modules already: real processes of their own, without paying the interpreter's imports each time.

Every ``digest-bot`` process of the suite spent about 0.4 s of CPU (and as long again on a busy
machine) importing pydantic, SQLAlchemy, the chat SDKs and the bot before doing anything, and
the suite starts hundreds. A server (tests/forkserver_boot.py, one per test process and start-up
environment, started at first use) imports what ``python -m bots.cli`` imports at its top level
(and the platforms' adapters, the ledger's drivers, the doubles' modules), then forks a child
per process: its own pid, session if asked, standard streams (the pipes or files given, as
``subprocess`` passes them), working directory and environment; ``sys.path[0]``, ``sys.argv``
and ``sys.std*`` rebuilt as CPython builds them at start; the module run by :mod:`runpy` as
``-m`` runs it. Signals reach it by its pid; its exit status comes back through the server.

Interface: :class:`Popen`, :func:`run` and :func:`create_subprocess_exec`, drop-in for
``subprocess.Popen``, ``subprocess.run`` and ``asyncio.create_subprocess_exec``. They start the
interpreter as usual (exec) whenever the server could not stand in faithfully:

- the command is not exactly ``[sys.executable, "-m", MODULE, …]``;
- ``preexec_fn``, ``pass_fds``, ``close_fds=False``, user/group/umask/process-group changes;
- ``LD_PRELOAD``/``LD_LIBRARY_PATH`` or libfaketime's ``FAKETIME*`` in the environment (they act
  at exec); any other variable the interpreter reads at start (``PYTHON*``, locale, ``TZ``,
  ``TMPDIR``, ``HOME``) picks a server started with the same values;
- the working directory holds its own copy of a package the server imported from elsewhere;
- ``TESTS_FORKSERVER=0`` (everything exec'd, as before: to compare or to rule it out).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bots.registry import PLATFORMS

ROOT = Path(__file__).resolve().parents[1]
BOOT = Path(__file__).with_name("forkserver_boot.py")
OFF_ENV = "TESTS_FORKSERVER"
#: modules the tests run with ``-m``: their top-level imports are preloaded
MAINS = ["bots.cli", "tests.fakes.telegram_api"]
#: what a running bot imports later (its platforms, the ledger's drivers, its HTTP endpoint)
EXTRAS = [
    "bots.runtime",
    # every platform's declaration and settings: loading the settings imports them all
    *PLATFORMS.values(),
    "bots.telegram.adapter",
    "bots.discord.adapter",
    "bots.email.adapter",
    "bots.feishu.adapter",
    "bots.dingtalk.adapter",
    "bots.wecom.adapter",
    "bots.http",
    "bots.metrics",
    "bots.site_http",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.dialects.sqlite.aiosqlite",
    "sqlalchemy.dialects.postgresql.asyncpg",
    # imported at first use: the ledger's SQLite driver, httpx's transport (PTB's client)
    "aiosqlite",
    "httpcore",
    "anyio._backends._asyncio",
]
#: variables that act when a program is exec'd: such a process is exec'd too
_AT_EXEC = ("LD_PRELOAD", "LD_LIBRARY_PATH", "FAKETIME")
#: variables the interpreter reads as it starts: a server per set of values
_AT_START = ("LANG", "LANGUAGE", "TZ", "TMPDIR", "HOME")


def _start_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted((k, v) for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k in _AT_START)
    )


class _Server:
    """One fork server process (see tests/forkserver_boot.py)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="digest-bot-forkserver-")
        self.path = os.path.join(self.folder, "socket")
        self.log = open(os.path.join(self.folder, "server.log"), "w+b")  # noqa: SIM115
        preload = json.dumps({"mains": MAINS, "extras": EXTRAS})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BOOT.read_text(encoding="utf-8"), self.path, preload],
            cwd="/", env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log,
        )  # fmt: skip
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        line = self.proc.stdout.readline() if ready else b""
        self.log.seek(0)
        noise = self.log.read().decode(errors="replace")
        self.origins: dict[str, str] | None = None
        if line and not noise:  # anything printed while importing: not a fresh start's output
            self.origins = json.loads(line)["origins"]
        else:
            self.close()

    @property
    def ok(self) -> bool:
        return self.origins is not None and self.proc.poll() is None

    def serves(self, cwd: str) -> bool:
        """Whether a fresh interpreter in ``cwd`` would import what the server holds (the working
        directory comes first on ``-m``'s ``sys.path``)."""
        assert self.origins is not None
        for name, origin in self.origins.items():
            for local in (os.path.join(cwd, name), os.path.join(cwd, name + ".py")):
                if os.path.exists(local) and os.path.realpath(local) != os.path.realpath(origin):
                    return False
        return True

    def spawn(
        self, module: str, args: list[str], cwd: str, env: Mapping[str, str], fds: list[int],
        session: bool,
    ) -> tuple[socket.socket, int]:  # fmt: skip
        """Fork a child for ``python -m module args``; its connection and pid."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = {"module": module, "args": args, "cwd": cwd, "env": dict(env),
                       "session": session}  # fmt: skip
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
            reply = conn.recv(1 << 16)
            if not reply:
                raise OSError("the fork server closed the connection")
            return conn, int(json.loads(reply)["pid"])
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.log.close()
        for name in ("socket", "server.log"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


_servers: dict[tuple[tuple[str, str], ...], _Server | None] = {}
_lock = threading.Lock()


def _server_for(
    args: Any, cwd: Any, env: Mapping[str, str] | None, **options: Any
) -> tuple[_Server, str, list[str], str, dict[str, str]] | None:
    """The server that can start ``args`` faithfully, and (module, rest, cwd, env); or None."""
    if os.environ.get(OFF_ENV) == "0" or not isinstance(args, (list, tuple)):
        return None
    argv = [os.fspath(a) for a in args]
    if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m" or argv[2].startswith("-"):
        return None
    defaults = {"executable": None, "preexec_fn": None, "close_fds": True, "pass_fds": (),
                "shell": False, "gid": None, "gids": None, "uid": None, "umask": -1,
                "process_group": None, "restore_signals": True}  # fmt: skip
    for name, default in defaults.items():
        value = options.get(name, default)
        if name == "process_group" and value == -1:
            value = None
        if name == "gids" and value == []:
            value = None
        if value != default and not (name == "pass_fds" and not value):
            return None
    environ = dict(os.environ if env is None else env)
    if any(k.startswith(_AT_EXEC) for k in environ):
        return None
    where = os.path.realpath(os.fspath(cwd) if cwd is not None else os.getcwd())
    if not os.path.isdir(where):
        return None  # let subprocess raise what it raises
    key = _start_key(environ)
    with _lock:
        if key not in _servers:
            server = _Server(environ)
            _servers[key] = server if server.ok else None
        server = _servers[key]
        if server is not None and not server.ok:
            _servers[key] = server = None
    if server is None or not server.serves(where):
        return None
    return server, argv[2], argv[3:], where, environ


_CHILD = inspect.signature(subprocess.Popen._execute_child)  # type: ignore[attr-defined]


class Popen(subprocess.Popen):  # type: ignore[type-arg]
    """``subprocess.Popen``, forked from a server where it can be (see the module docstring)."""

    _conn: socket.socket | None = None

    def _execute_child(self, *args: Any) -> None:
        bound = _CHILD.bind(self, *args).arguments
        options = {k: v for k, v in bound.items() if k not in ("self", "args", "cwd", "env")}
        target = _server_for(bound["args"], bound["cwd"], bound["env"], **options)
        if target is None:
            super()._execute_child(*args)  # type: ignore[misc]
            return
        server, module, rest, cwd, env = target
        p2cread, c2pwrite, errwrite = bound["p2cread"], bound["c2pwrite"], bound["errwrite"]
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
               errwrite if errwrite != -1 else 2]  # fmt: skip
        try:
            self._conn, self.pid = server.spawn(
                module, rest, cwd, env, fds, bool(bound["start_new_session"])
            )
            self._child_created = True
            self._status: int | None = None
        finally:
            self._close_pipe_fds(  # type: ignore[attr-defined]
                p2cread, bound["p2cwrite"], bound["c2pread"], c2pwrite, bound["errread"], errwrite
            )

    def _forked_status(self, block: bool) -> int | None:
        """The child's raw wait status, once the server has sent it."""
        conn = self._conn
        assert conn is not None
        if self._status is None:
            conn.setblocking(block)
            try:
                data = conn.recv(1 << 16)
            except BlockingIOError:
                return None
            if not data:
                raise ChildProcessError(f"the fork server lost process {self.pid}")
            self._status = int(json.loads(data)["status"])
            conn.close()
        return self._status

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if self._conn is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc,no-any-return]
        status = self._forked_status(block=not wait_flags & os.WNOHANG)
        return (0, 0) if status is None else (self.pid, status)

    def _internal_poll(self, _deadstate: int | None = None, **kwargs: Any) -> int | None:
        if self._conn is None:
            return super()._internal_poll(_deadstate, **kwargs)  # type: ignore[misc,no-any-return]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                if self.returncode is None:
                    status = self._forked_status(block=False)
                    if status is not None:
                        self._handle_exitstatus(status)  # type: ignore[attr-defined]
            except ChildProcessError:
                if _deadstate is not None:
                    self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode


def run(
    *popenargs: Any,
    input: Any = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with :class:`Popen` (the same code as the standard library's)."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            process.kill()
            exc.stdout, exc.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        retcode = process.poll()
        assert retcode is not None
        if check and retcode:
            raise subprocess.CalledProcessError(retcode, process.args, stdout, stderr)
    return subprocess.CompletedProcess(process.args, retcode, stdout, stderr)


class AsyncProcess:
    """What ``asyncio.create_subprocess_exec`` returns (its ``Process``), for a forked child."""

    def __init__(self, popen: Popen, limit: int) -> None:
        self._popen = popen
        self._limit = limit
        self.pid = popen.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        if self._popen.stdin is not None:
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(loop=loop), self._popen.stdin
            )
            self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        for name in ("stdout", "stderr"):
            pipe = getattr(self._popen, name)
            if pipe is not None:
                reader = asyncio.StreamReader(limit=self._limit, loop=loop)
                await loop.connect_read_pipe(
                    lambda r=reader: asyncio.StreamReaderProtocol(r, loop=loop), pipe
                )
                setattr(self, name, reader)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        """Wait for the child to exit; its return code."""
        conn = self._popen._conn
        assert conn is not None
        if self._popen.poll() is None:
            loop = asyncio.get_running_loop()
            exited = loop.create_future()

            def readable() -> None:
                if self._popen.poll() is not None and not exited.done():
                    exited.set_result(None)

            fd = conn.fileno()
            loop.add_reader(fd, readable)
            try:
                readable()
                await exited
            finally:
                loop.remove_reader(fd)
        code = self._popen.poll()
        assert code is not None
        return code

    async def communicate(self, input: bytes | None = None) -> tuple[bytes | None, bytes | None]:
        async def feed() -> None:
            if self.stdin is None:
                return
            if input:
                self.stdin.write(input)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    await self.stdin.drain()
            self.stdin.close()

        async def read(stream: asyncio.StreamReader | None) -> bytes | None:
            return None if stream is None else await stream.read()

        _, out, err = await asyncio.gather(feed(), read(self.stdout), read(self.stderr))
        await self.wait()
        return out, err

    def send_signal(self, sig: int) -> None:
        self._popen.send_signal(sig)

    def terminate(self) -> None:
        self._popen.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self._popen.send_signal(signal.SIGKILL)


async def create_subprocess_exec(
    program: Any,
    *args: Any,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    limit: int = 2**16,
    **kwds: Any,
) -> Any:
    """``asyncio.create_subprocess_exec``, forked from a server where it can be."""
    argv = [program, *args]
    options = {k: v for k, v in kwds.items() if k not in ("cwd", "env")}
    if _server_for(argv, kwds.get("cwd"), kwds.get("env"), **options) is None:
        return await asyncio.create_subprocess_exec(
            program, *args, stdin=stdin, stdout=stdout, stderr=stderr, limit=limit, **kwds
        )
    popen = Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, bufsize=0, **kwds)
    process = AsyncProcess(popen, limit)
    await process._connect()
    return process


def close_all() -> None:
    """Stop every server and remove its folder (at exit; a server whose test process died
    stops by itself when its lifeline, its standard input, closes)."""
    with _lock:
        for server in _servers.values():
            if server is not None:
                server.close()
        _servers.clear()


atexit.register(close_all)


__all__ = ["AsyncProcess", "Popen", "close_all", "create_subprocess_exec", "run"]
