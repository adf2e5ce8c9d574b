"""The fork server (tests/forkserver.py) stands in for ``python -m`` faithfully: what the child
sees of its start, its streams, exit codes and signals are those of an exec'd interpreter."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver

pytestmark = pytest.mark.slow  # real processes

ROOT = Path(__file__).resolve().parents[1]
#: a module that reports what a fresh ``python -m`` sees, then exits as told
PROBE = """\
import json, os, sys
line = sys.stdin.readline()
print(json.dumps({
    "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "pid": os.getpid(),
    "ppid": os.getppid(), "env": os.environ.get("PROBE_VALUE"), "main": __name__,
    "file": __file__, "stdin": line, "encoding": sys.stdout.encoding,
    "line_buffering": [sys.stdout.line_buffering, sys.stderr.line_buffering],
    "session": os.getsid(0) == os.getpid(),
}))
print("to stderr", file=sys.stderr)
code = sys.argv[1] if len(sys.argv) > 1 else "0"
if code == "raise":
    raise RuntimeError("boom")
if code == "wait":
    sys.stdout.flush()
    sys.stdin.readline()
sys.exit(int(code) if code.isdigit() else code)
"""


@pytest.fixture(scope="module")
def mods(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The probe's folder: one for the module, so that its tests share one server."""
    folder = tmp_path_factory.mktemp("mods")
    (folder / "probe_mod.py").write_text(PROBE)
    return folder


@pytest.fixture
def probe(mods: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{mods}", "PROBE_VALUE": "v1"}
    return tmp_path, env


def both(
    cwd: Path, env: dict[str, str], *args: str, stdin: str = "hello\n"
) -> list[subprocess.CompletedProcess[str]]:
    """The same command exec'd and forked."""
    argv = [sys.executable, "-m", "probe_mod", *args]
    kwargs = {"cwd": cwd, "env": env, "input": stdin, "capture_output": True, "text": True}
    return [subprocess.run(argv, **kwargs, timeout=60), forkserver.run(argv, **kwargs, timeout=60)]


def test_the_child_sees_what_a_fresh_interpreter_sees(probe: tuple[Path, dict[str, str]]) -> None:
    cwd, env = probe
    execd, forked = both(cwd, env, "0")
    seen = [json.loads(done.stdout) for done in (execd, forked)]
    for key in ("argv", "cwd", "path0", "env", "main", "file", "stdin", "encoding",
                "line_buffering", "session"):  # fmt: skip
        assert seen[0][key] == seen[1][key], key
    assert seen[1]["argv"][1:] == ["0"] and seen[1]["stdin"] == "hello\n"
    assert seen[1]["pid"] != os.getpid() and seen[1]["ppid"] != os.getpid()  # the server's child
    assert execd.stderr == forked.stderr == "to stderr\n"
    assert execd.returncode == forked.returncode == 0


@pytest.mark.parametrize(("arg", "code"), [("3", 3), ("raise", 1), ("message", 1)])
def test_exit_codes_and_uncaught_errors_as_cpython(
    probe: tuple[Path, dict[str, str]], arg: str, code: int
) -> None:
    cwd, env = probe
    execd, forked = both(cwd, env, arg)
    assert execd.returncode == forked.returncode == code
    assert execd.stderr.splitlines()[-1] == forked.stderr.splitlines()[-1]


def test_signals_reach_it_by_pid_and_a_new_session_is_its_own(
    probe: tuple[Path, dict[str, str]],
) -> None:
    cwd, env = probe
    argv = [sys.executable, "-m", "probe_mod", "wait"]
    with forkserver.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    ) as proc:  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        seen = json.loads(proc.stdout.readline())
        assert seen["pid"] == proc.pid and seen["session"]
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.1)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL


async def test_the_asyncio_form_communicates_and_waits(
    probe: tuple[Path, dict[str, str]],
) -> None:
    cwd, env = probe
    pipe = asyncio.subprocess.PIPE
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "probe_mod", "5", cwd=cwd, env=env, stdin=pipe, stdout=pipe,
        stderr=pipe,
    )  # fmt: skip
    out, err = await proc.communicate(b"async\n")
    assert json.loads(out)["stdin"] == "async\n" and err == b"to stderr\n"
    assert proc.returncode == 5 and await proc.wait() == 5


def test_what_the_server_cannot_stand_in_for_is_execd(probe: tuple[Path, dict[str, str]]) -> None:
    cwd, env = probe
    (cwd / "bots").mkdir()  # a package of the working directory's own shadows the server's
    (cwd / "bots" / "__init__.py").write_text("")
    assert forkserver._server_for([sys.executable, "-m", "probe_mod"], cwd, env) is None
    assert forkserver._server_for([sys.executable, "-c", "pass"], ROOT, env) is None
    preloaded = {**env, "LD_PRELOAD": "/nonexistent.so"}
    assert forkserver._server_for([sys.executable, "-m", "probe_mod"], ROOT, preloaded) is None
    assert forkserver._server_for([sys.executable, "-m", "probe_mod"], ROOT, env) is not None


def test_a_server_serves_the_bot_where_the_tests_package_is_not_importable(
    tmp_path: Path,
) -> None:
    """Without ``PYTHONPATH`` (as ``make test`` runs), the tests' own modules cannot be
    preloaded: the server still starts and forks ``python -m bots.cli`` (installed), and a
    ``python -m tests.…`` fails there as it does exec'd."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    version = [sys.executable, "-m", "bots.cli", "--version"]
    assert forkserver._server_for(version, tmp_path, env) is not None
    forked = forkserver.run(version, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert forked.returncode == 0 and forked.stdout.startswith("digest-bot "), forked.stderr
    double = [sys.executable, "-m", "tests.fakes.telegram_api", "--help"]
    kwargs = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True, "timeout": 60}
    execd, forked = subprocess.run(double, **kwargs), forkserver.run(double, **kwargs)
    assert execd.returncode == forked.returncode == 1
    assert execd.stderr == forked.stderr and "No module named 'tests'" in forked.stderr
