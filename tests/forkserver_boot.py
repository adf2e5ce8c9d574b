"""The fork server's own program: tests/forkserver.py runs this file's text with ``python -c``.

It imports the modules every ``python -m bots.cli …`` (or a double's ``python -m tests.…``)
would import first, once, then serves requests on a Unix socket: per request it forks a child
that becomes a fresh-looking interpreter about to run ``python -m MODULE ARGS`` (the request's
standard streams, working directory, environment, ``sys.path[0]``, ``sys.argv``, signal
dispositions and standard streams rebuilt as CPython builds them at start), then runs the module
with :mod:`runpy` exactly as ``-m`` does. The parent reports the child's pid, and later its raw
wait status, on the request's connection.

Self-contained on purpose (nothing of ``tests`` imported): the server's ``sys.path`` is the one a
fresh interpreter with the same environment has, less its first entry (the working directory,
which is the child's business).

argv: ``-c SOCKET_PATH JSON_LIST_OF_MODULES_TO_PRELOAD``; prints one JSON line when ready.
"""

import ast
import atexit
import contextlib
import gc
import importlib
import importlib.util
import io
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import tempfile
import threading
import time
import types

#: what CPython builds its standard streams from (the environment is the server's own: every
#: request it serves has the same start-up environment, tests/forkserver.py sees to that)
_BUFFERED = not os.environ.get("PYTHONUNBUFFERED")


def _imports_of(module: str) -> list[str]:
    """The modules ``module``'s source imports at its top level (not ``module`` itself)."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # its package is not importable from here (no PYTHONPATH)
        return []
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return []
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def _preload(mains: list[str], extras: list[str]) -> None:
    """Import the top-level imports of ``mains`` (never the mains themselves: ``-m`` runs them
    as ``__main__``, once) and ``extras``; a module that cannot be imported is left to the child."""
    for name in [m for main in mains for m in _imports_of(main)] + extras:
        if name in mains:
            continue
        # (ImportError: `from package import name` of a name that is no module, or an extra)
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for main in mains:  # in case something imported one: the child runs it fresh
        _forget(main)


def _forget(module: str) -> None:
    sys.modules.pop(module, None)
    parent, _, child = module.rpartition(".")
    if parent and parent in sys.modules and hasattr(sys.modules[parent], child):
        delattr(sys.modules[parent], child)


def _origins() -> dict[str, str]:
    """Where each top-level package the server holds was imported from."""
    out = {}
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        path = getattr(module, "__file__", None)
        if path:
            out[name] = os.path.dirname(path) if path.endswith("__init__.py") else path
    return out


class _Server:
    def __init__(self, path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "child")
        self.selector.register(0, selectors.EVENT_READ, "lifeline")
        self.conns: dict[int, socket.socket] = {}  # fileno -> a client's connection
        self.pids: dict[int, socket.socket] = {}  # a running child -> its connection

    def serve(self) -> tuple[dict, list[int]]:
        """Serve until the lifeline closes (then exit); returns only in a forked child."""
        while True:
            for key, _ in self.selector.select():
                if key.data == "accept":
                    conn, _ = self.listener.accept()
                    self.conns[conn.fileno()] = conn
                    self.selector.register(conn, selectors.EVENT_READ, "conn")
                elif key.data == "child":
                    self._reap()
                elif key.data == "lifeline":
                    if not os.read(0, 4096):
                        os._exit(0)
                else:
                    child = self._read(key.fileobj)
                    if child is not None:
                        return child

    def _read(self, conn: socket.socket) -> tuple[dict, list[int]] | None:
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 8)
        except OSError:
            data, fds = b"", []
        if not data:  # the client went away: its child (if any) runs on, unreported
            self._drop(conn)
            for fd in fds:
                os.close(fd)
            return None
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            self._leave()
            return request, fds
        for fd in fds:
            os.close(fd)
        self.pids[pid] = conn
        conn.send(json.dumps({"pid": pid}).encode())
        return None

    def _drop(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        self.conns.pop(conn.fileno(), None)
        for pid, owner in list(self.pids.items()):
            if owner is conn:
                self.pids[pid] = None  # type: ignore[assignment]
        conn.close()

    def _reap(self) -> None:
        while True:
            with contextlib.suppress(BlockingIOError):
                os.read(self.wake_r, 4096)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.pids.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):  # the client is gone
                    conn.send(json.dumps({"status": status}).encode())
                self._drop(conn)

    def _leave(self) -> None:
        """In the child: let go of everything of the server's (before its fds are closed, so
        that no object of ours closes a number the program has opened by then)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.selector.close()
        for conn in self.conns.values():
            conn.close()
        self.listener.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


def _stdio() -> None:
    """sys.stdin/stdout/stderr as CPython's create_stdio makes them, on the new fds 0-2."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        encoding, errors = _ENCODINGS[fd]
        buffering = 0 if (not _BUFFERED and mode == "w") else -1
        buf = open(fd, mode + "b", buffering=buffering, closefd=False)  # noqa: SIM115
        raw = buf.raw if buffering else buf
        raw.name = f"<{name}>"
        line = _BUFFERED and (raw.isatty() or fd == 2)
        stream = io.TextIOWrapper(
            buf, encoding=encoding, errors=errors, newline="\n", line_buffering=line,
            write_through=not _BUFFERED,
        )  # fmt: skip
        stream.mode = mode
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _become(request: dict, fds: list[int]) -> None:
    """Turn this forked child into the fresh ``python -m MODULE ARGS`` of ``request``."""
    for fd, target in zip(fds, (0, 1, 2), strict=True):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    if request["session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environb.clear()
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    tempfile.tempdir = None
    sys.path.insert(0, os.getcwd())
    importlib.invalidate_caches()
    _stdio()
    sys.argv = ["-m", *request["args"]]
    sys.orig_argv = [sys.executable, "-m", request["module"], *request["args"]]
    _forget(request["module"])
    sys.modules["__main__"] = types.ModuleType("__main__")


def _freeze_for_children() -> None:
    """``gc.freeze()``: the children's collections need not touch (and copy) the server's
    objects. Through the bot's heap module when it was preloaded: a child's deliveries then
    know the heap is a parent's without walking it (about 50 ms each child)."""
    heap = sys.modules.get("digest_core.heap")
    if heap is not None:
        heap.freeze_for_children()
    else:
        gc.freeze()


def _main() -> tuple[dict, list[int]]:
    path, preload = sys.argv[1], json.loads(sys.argv[2])
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # -c's working directory: not the children's
    gc.disable()  # imports make objects that live on: passes over them would find nothing
    _preload(preload["mains"], preload["extras"])
    if threading.active_count() != 1:
        raise SystemExit("a preloaded module started a thread: cannot fork safely")
    gc.collect()
    _freeze_for_children()
    gc.enable()
    server = _Server(path)
    print(json.dumps({"ready": True, "origins": _origins()}), flush=True)
    return server.serve()


_ENCODINGS = {
    0: (sys.stdin.encoding, sys.stdin.errors),
    1: (sys.stdout.encoding, sys.stdout.errors),
    2: (sys.stderr.encoding, sys.stderr.errors),
}


def _exit_code(exc: SystemExit) -> int:
    """What CPython exits with for an uncaught SystemExit (printing a non-int code)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(Exception):  # as CPython: the exit code is what matters now
        print(code, file=sys.stderr)
    return 1


def _run(module: str) -> None:
    """Run ``module`` as ``python -m`` does, then end the process as CPython ends it (threads
    joined, atexit handlers, garbage collected, streams flushed, the same exit codes), less the
    final teardown of every module: that would free, page by page, the memory shared with the
    server, which costs a child ~0.35 s (a copy of each page) and a fresh process almost nothing."""
    interrupted = False
    try:
        runpy._run_module_as_main(module, alter_argv=True)  # type: ignore[attr-defined]
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code, interrupted = 1, True
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:
        sys.excepthook(*sys.exc_info())
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            code = 120
    if interrupted:  # CPython re-raises SIGINT so that the parent sees the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


if __name__ == "__main__":
    _request, _fds = _main()
    _become(_request, _fds)
    _run(_request["module"])
