"""Start-up benchmark: wall time of `digest-bot --help`, `archive search` and `run` to ready.

Run ``python -m benchmarks.startup`` (``--runs``, ``--files``, ``--imports``). The packages are
byte-compiled first (``compileall``, as an installed package is), then each figure is the
median of ``--runs`` fresh processes of the installed console script (``digest-bot`` beside
the interpreter; ``python -m bots.cli`` when there is none), as a ratio to its target (issue
#24, item 3):

* ``digest-bot --help``: what every command pays before doing anything (target 0.15 s);
* ``digest-bot archive search`` of a word no issue has, with the 5 bundled issues and with
  ``--files`` (default 3,650: ten years) re-dated copies (target 0.3 s);
* ``digest-bot run`` on the console (no tokens) until its "digest-bot running on" record, with
  a ledger that exists (the start before the timed ones creates it) (target 0.5 s).

Each figure also has the process's CPU seconds (user + system, median): on a machine whose
other processes keep the cores busy, wall time includes waiting for a core, and the CPU time
is what start-up itself costs.

``--imports`` adds, for each command, the modules whose import took longest (cumulative, from
``python -X importtime``), which is where start-up goes.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.archive import MISS, make_archive

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"--help": 0.15, "archive search": 0.3, "run to ready": 0.5}
READY = b"digest-bot running on"


def command() -> list[str]:
    """The installed console script, else the module."""
    script = Path(sys.executable).parent / "digest-bot"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bots.cli"]


def environment() -> dict[str, str]:
    """This environment without the bot's own settings (the embedded defaults apply)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}


def workdir(tmp: Path, files: int) -> Path:
    """A folder as `make run` sees it: config/digest-bot.toml and an archive of ``files``."""
    folder = tmp / f"w{files}"
    (folder / "config").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "digest-bot.toml", folder / "config" / "digest-bot.toml")
    (folder / "archive").mkdir()
    make_archive(folder / "archive", files)
    return folder


def timed(argv: list[str], cwd: Path, runs: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``runs`` processes of ``argv`` run to their exit."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=environment(), capture_output=True, check=False)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until_ready(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds from the start of ``argv`` to the line :data:`READY`; then
    SIGTERM."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**environment(), "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.PIPE,  # kept open: the console waits for commands, as on a terminal
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if READY in line:
                return time.perf_counter() - t0, _cpu_of(proc.pid)
        raise RuntimeError(f"{' '.join(argv)} exited with {proc.wait()} before it was ready")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def ready(cwd: Path, runs: int) -> tuple[float, float]:
    until_ready([*command(), "run"], cwd)  # creates the ledger: a restart is what is timed
    times = [until_ready([*command(), "run"], cwd) for _ in range(runs)]
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def slowest_imports(args: list[str], cwd: Path, top: int = 12) -> list[tuple[float, str]]:
    """The ``top`` imports of one run with the largest cumulative time, in ms."""
    argv = [sys.executable, "-X", "importtime", "-c", "from bots.cli import main; main()", *args]
    if args == ["run"]:  # stop it once ready; -X importtime writes as it goes
        argv = [sys.executable, "-X", "importtime", "-m", "bots.cli", "run"]
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    rows = []
    for raw in proc.stderr:
        if READY in raw:
            break
        found = re.match(rb"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", raw)
        if found and len(found[2]) <= 5:  # three levels: the package, and what it pulls in
            rows.append((int(found[1]) / 1000, found[3].decode()))
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=3650)
    parser.add_argument("--imports", action="store_true", help="the slowest imports too")
    args = parser.parse_args()
    for package in ("bots", "digest_core"):
        compileall.compile_dir(ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        small, big = workdir(Path(tmp), 5), workdir(Path(tmp), args.files)
        search = [*command(), "archive", "search", MISS]
        figures = [
            ("--help", "", timed([*command(), "--help"], small, args.runs)),
            ("archive search", "5 files", timed(search, small, args.runs)),
            ("archive search", f"{args.files} files", timed(search, big, args.runs)),
            ("run to ready", "console", ready(small, args.runs)),
        ]
        print(f"start-up, seconds (median of {args.runs} fresh processes, byte-compiled)")
        print(f"  {'command':<16}{'case':<12}{'wall':>7}{'ratio':>7}{'CPU':>8}{'ratio':>7}  target")
        for name, case, (wall, cpu) in figures:
            target = TARGETS[name]
            print(
                f"  {name:<16}{case:<12}{wall:>7.3f}{wall / target:>7.2f}{cpu:>8.3f}"
                f"{cpu / target:>7.2f}  <= {target} s"
            )
        if args.imports:
            for argv in (["--help"], ["archive", "search", MISS], ["run"]):
                print(f"slowest imports of {' '.join(argv)} (cumulative ms):")
                for ms, module in slowest_imports(argv, small):
                    print(f"  {ms:>8.1f}  {module}")


if __name__ == "__main__":
    main()
