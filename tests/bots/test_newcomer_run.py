"""Issue #13's "done when": a newcomer's first `make run`, scripted on a terminal (a pty).

A fresh copy of the repository (what `git ls-files` lists, as a clone has it) gets a `.venv`
that points at the already-built one running these tests, with its install stamp up to date,
so make installs nothing: the test runs in CI without installing twice.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def fresh_clone(dest: Path) -> Path:
    """The repository's files as a clone has them (tracked, plus new files not yet committed),
    without .venv, var/ or caches; its archive/ holds the tests' sample issues instead of the
    checkout's own (which an editor changes)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / name)
    shutil.rmtree(dest / "archive", ignore_errors=True)
    shutil.copytree(SAMPLE_ARCHIVE, dest / "archive")
    return dest


def prebuilt_venv(clone: Path) -> None:
    """``clone/.venv`` using the interpreter and tools running this test; make finds its
    install stamp newer than pyproject.toml and the lock file, so it installs nothing."""
    venv = clone / ".venv"
    venv.mkdir()
    (venv / "bin").symlink_to(BIN, target_is_directory=True)
    for stamp in (".run-deps", ".dev-deps"):
        (venv / stamp).touch()


class Terminal:
    """A command on a pseudo-terminal of its own, as a person at a terminal runs it."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        import pty

        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal, stdin/stdout/stderr
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = ""
        self.status: int | None = None

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def read_until(self, pattern: str, *, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (m := re.search(pattern, self.output)) is None:
            if not self._read(deadline - time.monotonic()):
                raise AssertionError(f"no {pattern!r} within {timeout} s; got:\n{self.output}")
        return m

    def wait(self, *, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            pass
        while self.status is None and time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
            else:
                time.sleep(0.05)
        if self.status is None:
            raise AssertionError(f"still running after {timeout} s:\n{self.output}")
        return self.status

    def _read(self, within: float) -> bool:
        """Read what is there (waiting up to ``within`` s); False at the end of the output."""
        if within <= 0:
            return False
        ready, _, _ = select.select([self.fd], [], [], within)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the other side is closed
            return False
        if not chunk:
            return False
        self.output += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")
        return True

    def kill(self) -> None:
        if self.status is None:
            with_group = os.getpgid(self.pid)
            os.killpg(with_group, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                    reason="needs make and git")  # fmt: skip
@pytest.mark.skipif(not (BIN / "digest-bot").exists(), reason="needs an installed digest-bot")
def test_make_run_in_a_fresh_clone_greets_answers_today_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    clone = fresh_clone(tmp_path / "digest-bot")
    prebuilt_venv(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIGEST_BOT_", "MAKE"))}
    env["TZ"] = "America/New_York"  # the newcomer's own time differs from the digest's zone
    term = Terminal(["make", "run"], cwd=clone, env=env)
    try:
        # the greeting: the current issue, the next post in both zones, what to type
        term.read_until(r"current issue: \d{4}-\d\d-\d\d", timeout=60)
        next_post = term.read_until(
            r"next post: (\d{4}-\d\d-\d\d \d\d:\d\d) Asia/Shanghai "
            r"\(your time: \d{4}-\d\d-\d\d \d\d:\d\d E[SD]T\)",
            timeout=10,
        )
        assert next_post[1].endswith("08:00")  # config/digest-bot.toml's post_time
        term.read_until(r"/today.*/help", timeout=10)
        assert "installing" not in term.output  # the pre-built venv was used as it is
        term.read_until(r"digest-bot> ", timeout=10)  # the prompt (issue 20, item 3)
        term.type("/today\n")
        term.read_until(r"digest-bot> /today\n(.*\n)*.*【重点】", timeout=30)
        term.type("\x03")  # Ctrl-C: SIGINT to the terminal's foreground group (make and bot)
        status = term.wait(timeout=30)
    finally:
        term.kill()
    # the bot stopped by itself; make, interrupted too, ends by SIGINT as a shell expects, and
    # reports no failed recipe (it would if the bot had exited non-zero)
    assert (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0) or (
        os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGINT
    )
    assert "stopping" in term.output
    assert "Traceback" not in term.output and "make: ***" not in term.output
    assert (clone / "var" / "digest-bot.db").exists()  # the ledger was made where promised


def test_make_run_says_where_the_command_is_after_installing(tmp_path: Path) -> None:
    """Item 9: the install step of `make run` ends by naming .venv/bin/digest-bot (a dry
    run: nothing is installed)."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    clone = fresh_clone(tmp_path / "digest-bot")
    dry = subprocess.run(["make", "-n", "run"], cwd=clone, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert "the digest-bot command is .venv/bin/digest-bot" in dry.stdout
    assert "source .venv/bin/activate" in dry.stdout
