"""Start-up benchmark: wall time of `digest-bot --help`, `archive search` and `run` to ready.

Run ``python -m benchmarks.startup`` (``--runs``, ``--files``, ``--imports``). The packages are
byte-compiled first (``compileall``, as an installed package is), then each figure is the
median of ``--runs`` fresh processes of the installed console script (``digest-bot`` beside
the interpreter; ``python -m bots.cli`` when there is none), as a ratio to its target (issue
#24, item 3):

* ``digest-bot --help``: what every command pays before doing anything (target 0.15 s);
* ``digest-bot archive search`` of a word no issue has, with the 5 bundled issues and with
  ``--files`` (default 3,650: ten years) re-dated copies (target 0.3 s);
* the same search with ``--files`` and the search index the bot keeps beside its ledger
  (built first, as a running bot builds it: about 12 s at 3,650 files), which ``archive
  search`` reads instead of scanning every file;
* ``digest-bot run`` on the console (no tokens) until its "digest-bot running on" record, with
  a ledger that exists (the start before the timed ones creates it) (target 0.5 s).

``--baseline DIR`` (a checkout of an older commit, e.g. ``git worktree add /tmp/old <commit>``)
adds each figure of that code, run the same way (``python -m bots.cli`` with ``PYTHONPATH``, both
byte-compiled), the runs of the two interleaved so that a busy machine slows both alike.

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


def environment(tree: Path | None = None) -> dict[str, str]:
    """This environment without the bot's own settings (the embedded defaults apply); with
    ``tree``, the code imported is that checkout's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def kept_index(folder: Path) -> None:
    """Build the search index a bot running in ``folder`` keeps beside its ledger."""
    from digest_core.archive import Archive
    from digest_core.archive.fulltext import index_path_for
    from digest_core.settings import Settings
    from digest_core.testing import build_index

    relative = index_path_for(Settings().database_url)
    assert relative is not None
    archive = Archive(folder / "archive", index=folder / relative)
    build_index(archive)
    archive.close()


def workdir(tmp: Path, files: int) -> Path:
    """A folder as `make run` sees it: config/digest-bot.toml and an archive of ``files``."""
    folder = tmp / f"w{files}"
    (folder / "config").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "digest-bot.toml", folder / "config" / "digest-bot.toml")
    (folder / "archive").mkdir()
    make_archive(folder / "archive", files)
    return folder


def timed(
    argv: list[str], cwd: Path, runs: int, trees: list[Path | None]
) -> list[tuple[float, float]]:
    """Median (wall, CPU) seconds of ``runs`` processes of ``argv`` run to their exit, for each
    of ``trees`` (None: as installed), their runs interleaved."""
    walls: list[list[float]] = [[] for _ in trees]
    cpus: list[list[float]] = [[] for _ in trees]
    for _ in range(runs):
        for n, tree in enumerate(trees):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            cmd = argv if tree is None else [sys.executable, "-m", "bots.cli", *argv[1:]]
            subprocess.run(cmd, cwd=cwd, env=environment(tree), capture_output=True, check=False)
            walls[n].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus[n].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(walls, cpus, strict=True)]


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until_ready(argv: list[str], cwd: Path, tree: Path | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds from the start of ``argv`` to the line :data:`READY`; then
    SIGTERM."""
    if tree is not None:
        argv = [sys.executable, "-m", "bots.cli", *argv[1:]]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**environment(tree), "PYTHONUNBUFFERED": "1"},
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


def ready(cwd: Path, runs: int, trees: list[Path | None]) -> list[tuple[float, float]]:
    until_ready([*command(), "run"], cwd)  # creates the ledger: a restart is what is timed
    times: list[list[tuple[float, float]]] = [[] for _ in trees]
    for _ in range(runs):
        for n, tree in enumerate(trees):
            times[n].append(until_ready([*command(), "run"], cwd, tree))
    return [
        (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for ts in times
    ]


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
    parser.add_argument("--baseline", type=Path, help="a checkout of older code to compare")
    args = parser.parse_args()
    trees: list[Path | None] = [None] if args.baseline is None else [ROOT, args.baseline]
    for package in ("bots", "digest_core"):
        for tree in (ROOT, args.baseline):
            if tree is not None:
                compileall.compile_dir(tree / package, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        small, big = workdir(Path(tmp), 5), workdir(Path(tmp), args.files)
        indexed = workdir(Path(tmp) / "indexed", args.files)
        kept_index(indexed)
        search = [*command(), "archive", "search", MISS]
        figures = [
            ("--help", "", timed([*command(), "--help"], small, args.runs, trees)),
            ("archive search", "5 files", timed(search, small, args.runs, trees)),
            ("archive search", f"{args.files} files", timed(search, big, args.runs, trees)),
            ("archive search", "+ bot's index", timed(search, indexed, args.runs, trees)),
            ("run to ready", "console", ready(small, args.runs, trees)),
        ]
        print(f"start-up, seconds (median of {args.runs} fresh processes, byte-compiled)")
        head = f"  {'command':<16}{'case':<15}{'wall':>7}{'ratio':>7}{'CPU':>8}{'ratio':>7}"
        print(head + ("  target" if args.baseline is None else f"{'old CPU':>9}  target"))
        for name, case, results in figures:
            target = TARGETS[name]
            wall, cpu = results[0]
            old = f"{results[1][1]:>9.3f}" if len(results) > 1 else ""
            print(
                f"  {name:<16}{case:<15}{wall:>7.3f}{wall / target:>7.2f}{cpu:>8.3f}"
                f"{cpu / target:>7.2f}{old}  <= {target} s"
            )
        if args.imports:
            for argv in (["--help"], ["archive", "search", MISS], ["run"]):
                print(f"slowest imports of {' '.join(argv)} (cumulative ms):")
                for ms, module in slowest_imports(argv, small):
                    print(f"  {ms:>8.1f}  {module}")


if __name__ == "__main__":
    main()
