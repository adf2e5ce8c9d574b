"""Archive benchmark: /today and a /search miss with 5 vs 3,650 issue files, and the CLI search.

Run ``python -m benchmarks.archive`` (``--runs``, ``--files``; ``--issues`` is the same knob).

First, ten years at the cost of one day (issue 24): for 5 and for ``--files`` issue files, each
in fresh processes, the first start ever (the search index built from nothing), then a
*restart* as ``digest-bot run`` does it (the index file kept beside the ledger): the first
``/today`` sent at once, the time until the start-up work (bringing the index up to date) is
done, the first ``/search`` miss, ``/today`` and ``/search`` p50/p99 under ``--users`` (200)
concurrent readers (three rounds, each reader's command timed from its start) with the process
CPU time per command under that load (a figure other processes on the machine hardly move,
unlike latency), and the peak RSS of that process; then the ratio of the 3,650 figure to the
5 figure against the targets (first command <= 2x, RSS <= 1.3x, p99 <= 1.5x). ``--baseline
DIR`` runs the same processes on the code checked out in DIR (e.g. ``git worktree add /tmp/old
main``) and prints old, new and new/old. ``--restart-only``: just this table.

Then the older tables. It writes ten years of issues
(the bundled ones, re-dated) into a temporary folder, then for 5 and for 3,650 files prints the
median cost of one ``/today`` and of one ``/search`` that finds nothing (an absent word, and a
"hard" miss made of character pairs that all occur in the archive but never together), the
ratio 3,650 / 5 against the target of 2x, and the wall time of ``digest-bot archive search``
(a fresh process, as an editor runs it) against its 0.5 s target, for three misses: a Chinese
word (compared on raw bytes), an ASCII word and a word with a space (``--cli-only``: just
these).

The cost of a command is the wall time of ``Commands.handle`` once the archive is warm (the
service has been answering for a while); the first command after start-up is printed apart,
and the first ``/search`` of a fresh archive both before any index exists (a scan) and once the
index ``run`` starts building at start-up is done.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from digest_core.archive import Archive
from digest_core.commands import Request
from digest_core.commands.dispatch import Commands
from digest_core.testing import ManualClock

# the restart table's targets: the 3,650-file figure over the 5-file one
RESTART_TARGETS = {"first /today (ms)": 2.0, "peak RSS (MB)": 1.3, "/today p99 (ms)": 1.5,
                   "/search p99 (ms)": 1.5}  # fmt: skip

ROOT = Path(__file__).resolve().parents[1]
TODAY = dt.date(2026, 11, 30)
MISS = "量子纠缠"  # no issue mentions it
HARD_MISS = "推理训练"  # 推理 and 训练 are everywhere; 理训 never occurs
TARGET_RATIO = 2.0
CLI_TARGET_S = 0.5
#: what `digest-bot archive search` is timed with: a Chinese, an ASCII and a spaced miss
CLI_MISSES = (MISS, "zzzznotfound", "all reduce")


def make_archive(folder: Path, files: int) -> None:
    """``files`` issues, one a day ending on TODAY, the bundled texts taken in turn."""
    sources = sorted((ROOT / "archive").glob("*.txt"))
    texts = [p.read_bytes() for p in sources]
    for n in range(files):
        day = TODAY - dt.timedelta(days=n)
        (folder / f"{day.isoformat()}.txt").write_bytes(texts[n % len(texts)])


async def _median_ms(commands: Commands, request: Request, runs: int) -> tuple[float, float]:
    """(first call, median of the next ``runs`` calls) in milliseconds."""
    t0 = time.perf_counter()
    await commands.handle(request)
    first = (time.perf_counter() - t0) * 1000
    await asyncio.sleep(0.5)  # let anything the first call started in the background settle
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await commands.handle(request)
        times.append((time.perf_counter() - t0) * 1000)
    return first, statistics.median(times)


async def measure(folder: Path, runs: int) -> dict[str, tuple[float, float]]:
    zone = dt.timezone(dt.timedelta(hours=8))
    out = {}
    for name, request in (
        ("/today", Request("today")),
        (f"/search {MISS}", Request("search", (MISS,))),
        (f"/search {HARD_MISS}", Request("search", (HARD_MISS,))),
    ):
        clock = ManualClock(dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC), autoadvance=False)
        archive = Archive(folder)
        commands = Commands(archive, clock, zone)
        if name != "/today":  # warm the archive as a running bot's is a while after start
            t0 = time.perf_counter()
            build = _index_builder(archive)  # (before #8: the first search)
            if build is not None:
                await asyncio.to_thread(build)
            else:
                await asyncio.to_thread(archive.search, MISS)
            out["build the index (s)"] = (time.perf_counter() - t0, 0.0)
        out[name] = await _median_ms(commands, request, runs)
    # the first /search of a bot just started: scanning (nothing built yet), or after the
    # index `run` builds in the background at start (issue 18) is done
    for figure, at_start in (("1st /search, scan (ms)", False), ("1st /search, built (ms)", True)):
        clock = ManualClock(dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC), autoadvance=False)
        archive = Archive(folder)
        commands = Commands(archive, clock, zone)
        if at_start:
            archive.index_in_background()
            await asyncio.to_thread(_build_index, archive)  # returns once every file is loaded
        t0 = time.perf_counter()
        await commands.handle(Request("search", (HARD_MISS,)))
        out[figure] = ((time.perf_counter() - t0) * 1000, 0.0)
    out["peak RSS (MB)"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0.0)
    return out


def cli_search(folder: Path, runs: int, word: str = MISS) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "bots.cli", "--archive", str(folder), "archive", "search", word],
            cwd=ROOT, capture_output=True, check=False,
        )  # fmt: skip
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _index_builder(archive: Archive) -> Callable[[], int] | None:
    """What brings ``archive``'s search index up to date in this thread:
    :func:`digest_core.testing.build_index`, or for a ``--baseline`` from before it the
    archive's own ``build_index``; None before #8 (no index)."""
    try:
        from digest_core.testing import build_index
    except ImportError:
        return getattr(archive, "build_index", None)
    return functools.partial(build_index, archive)


def _build_index(archive: Archive) -> None:
    build = _index_builder(archive)
    assert build is not None, "this archive has no search index"
    build()


def cold_search(folder: Path, runs: int, word: str = MISS) -> float:
    """The archive's part of `digest-bot archive search`: a new Archive (no index), one search."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            archive = Archive(folder, index=False)
        except TypeError:  # the archive before #8 had no index to turn off
            archive = Archive(folder)
        archive.search(word, limit=20)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cli_baseline(runs: int) -> float:
    """A fresh `digest-bot --help`: what any CLI call costs before touching the archive."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "bots.cli", "--help"], cwd=ROOT, capture_output=True, check=False
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def open_archive(folder: Path, index: Path) -> Archive:
    """The archive as ``digest-bot run`` opens it: with its index file beside the ledger (the
    archive before issue 24 kept an in-memory index and takes no path)."""
    try:
        return Archive(folder, index=index)
    except TypeError:
        return Archive(folder)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _crowd(commands: Commands, request: Request, users: int, rounds: int) -> list[float]:
    """Latencies (ms) of ``users`` readers sending ``request`` at once, ``rounds`` times."""

    async def one() -> float:
        t0 = time.perf_counter()
        await commands.handle(request)
        return (time.perf_counter() - t0) * 1000

    out: list[float] = []
    for _ in range(rounds):
        out.extend(await asyncio.gather(*(one() for _ in range(users))))
    return out


async def restarted(folder: Path, index: Path, users: int) -> dict[str, float]:
    """One bot process started on ``folder`` (see the module): its figures."""
    clock = ManualClock(dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC), autoadvance=False)
    zone = dt.timezone(dt.timedelta(hours=8))
    started = time.perf_counter()
    archive = open_archive(folder, index)
    commands = Commands(archive, clock, zone)
    archive.index_in_background()  # as `run` does at start
    t0 = time.perf_counter()
    await commands.handle(Request("today"))
    first = (time.perf_counter() - t0) * 1000
    # the start-up work: waited for (the index built here returns once it is up to date)
    await asyncio.to_thread(_build_index, archive)
    ready = time.perf_counter() - started
    t0 = time.perf_counter()
    await commands.handle(Request("search", (MISS,)))
    first_search = (time.perf_counter() - t0) * 1000
    cpu = time.process_time()
    today = await _crowd(commands, Request("today"), users, 3)
    today_cpu = (time.process_time() - cpu) * 1000 / len(today)
    cpu = time.process_time()
    search = await _crowd(commands, Request("search", (MISS,)), users, 3)
    search_cpu = (time.process_time() - cpu) * 1000 / len(search)
    return {
        "first /today (ms)": first,
        "start-up work (s)": ready,
        "first /search (ms)": first_search,
        "/today p50 (ms)": _p(today, 0.5),
        "/today p99 (ms)": _p(today, 0.99),
        "/search p50 (ms)": _p(search, 0.5),
        "/search p99 (ms)": _p(search, 0.99),
        "/today CPU (ms)": today_cpu,  # per command, under load: unlike latency, not
        "/search CPU (ms)": search_cpu,  # inflated by other processes on the machine
        "peak RSS (MB)": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def built(folder: Path, index: Path) -> dict[str, float]:
    """The first start ever: the index built from nothing (its file's size)."""
    t0 = time.perf_counter()
    archive = open_archive(folder, index)
    _build_index(archive)
    took = time.perf_counter() - t0
    close = getattr(archive, "close", None)  # the file as it stays: its log checkpointed
    if close is not None:
        close()
    size = sum(p.stat().st_size for p in index.parent.glob(index.name + "*"))
    return {"first start, build (s)": took, "index file (MB)": size / 1e6}


def _child(args: argparse.Namespace) -> None:
    folder, index = Path(args.child[1]), Path(args.child[2])
    if args.child[0] == "build":
        out = built(folder, index)
    else:
        out = asyncio.run(restarted(folder, index, args.users))
    print(json.dumps(out))


def _figures(code: Path, mode: str, folder: Path, index: Path, users: int) -> dict[str, float]:
    """Run one child process of this benchmark on the ``digest_core`` in ``code``; its
    figures."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "benchmarks").symlink_to(ROOT / "benchmarks")
        Path(tmp, "digest_core").symlink_to(code / "digest_core")
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.archive", "--child", mode, str(folder),
             str(index), f"--users={users}"],
            cwd=tmp, env={**os.environ, "PYTHONPATH": tmp}, capture_output=True, text=True,
            check=True,
        ).stdout  # fmt: skip
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def measure_restart(code: Path, folder: Path, runs: int, users: int) -> dict[str, float]:
    """Medians of ``runs``: a first start, then restarts of a bot on ``folder``."""
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp, "digest-bot.search.sqlite")
        out = _figures(code, "build", folder, index, users)
        served = [_figures(code, "serve", folder, index, users) for _ in range(runs)]
    out.update({k: statistics.median(r[k] for r in served) for k in served[0]})
    return out


def restart_table(small: Path, big: Path, args: argparse.Namespace) -> None:
    """The issue-24 figures, for this code (and ``--baseline``'s)."""
    codes = [("new", ROOT)]
    if args.baseline:
        codes.insert(0, ("old", Path(args.baseline).resolve()))
    results = {}
    for label, code in codes:
        results[label] = (
            measure_restart(code, small, args.restart_runs, args.users),
            measure_restart(code, big, args.restart_runs, args.users),
        )
    n = args.files
    print(f"restart of a bot (fresh processes, median of {args.restart_runs}), {args.users} users")
    head = "".join(f"{f'{lb} 5':>10}{f'{lb} {n}':>11}{f'{lb} x':>7}" for lb, _ in codes)
    print(f"{'figure':<24}{head}{'  new/old' if args.baseline else ''}  target")
    for key in results["new"][0]:
        line = f"{key:<24}"
        for label, _ in codes:
            few, many = results[label][0][key], results[label][1][key]
            line += f"{few:>10.2f}{many:>11.2f}{many / few if few else float('inf'):>7.2f}"
        if args.baseline:
            old, new = results["old"][1][key], results["new"][1][key]
            line += f"{new / old if old else float('inf'):>9.3f}"
        target = RESTART_TARGETS.get(key)
        if target is not None:
            ratio = results["new"][1][key] / results["new"][0][key]
            line += f"  <= {target:g}x of 5 files: {ratio / target:.2f} of target"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed commands per figure")
    parser.add_argument("--cli-runs", type=int, default=5)
    parser.add_argument("--files", "--issues", type=int, default=3650)
    parser.add_argument("--users", type=int, default=200, help="readers at once (restart)")
    parser.add_argument("--restart-runs", type=int, default=3)
    parser.add_argument("--baseline", help="a checkout of the old code to compare with")
    parser.add_argument("--cli-only", action="store_true", help="only the CLI figures")
    parser.add_argument("--restart-only", action="store_true", help="only the restart figures")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp, "small"), Path(tmp, "big")
        small.mkdir()
        big.mkdir()
        make_archive(small, 5)
        make_archive(big, args.files)
        if not args.cli_only:
            restart_table(small, big, args)
        if not args.cli_only and not args.restart_only:
            commands_table(small, big, args)
        if not args.restart_only:
            cli_table(small, big, args)
        shutil.rmtree(tmp, ignore_errors=True)


def commands_table(small: Path, big: Path, args: argparse.Namespace) -> None:
    """The bot's commands with 5 and with ``args.files`` issue files."""
    few = asyncio.run(measure(small, args.runs))
    many = asyncio.run(measure(big, args.runs))
    print(f"median of {args.runs} commands, ms (first call after start in brackets)")
    print(f"{'command':<22}{'5 files':>16}{f'{args.files} files':>18}{'ratio':>8}  target")
    for name in few:
        if "(" in name:  # a figure, not a command
            print(f"{name:<22}{few[name][0]:>16.2f}{many[name][0]:>18.2f}")
            continue
        f1, f = few[name]
        m1, m = many[name]
        ratio = m / f if f else float("inf")
        print(
            f"{name:<22}{f:>8.3f} [{f1:>6.1f}]{m:>9.3f} [{m1:>6.1f}]{ratio:>8.2f}"
            f"  <= {TARGET_RATIO:g}x"
        )


def cli_table(small: Path, big: Path, args: argparse.Namespace) -> None:
    """`digest-bot archive search` in a fresh process, for each of :data:`CLI_MISSES`."""
    runs, files = args.cli_runs, args.files
    print(f"digest-bot archive search, a miss (fresh process, median of {runs}):")
    print(f"  --help alone  {cli_baseline(runs):.3f} s")
    print(f"  {'word':<14}{'5 files':>9}{f'{files} files':>13}{'search alone':>14}  target")
    for word in CLI_MISSES:
        few, many = cli_search(small, runs, word), cli_search(big, runs, word)
        cold = cold_search(big, runs, word)  # a new Archive (no index), one search
        print(
            f"  {word!r:<{14 - sum(ord(c) > 0x2E80 for c in word)}}{few:>8.3f}s{many:>12.3f}s"
            f"{cold:>13.3f}s  {many / CLI_TARGET_S:.2f} x {CLI_TARGET_S} s"
        )


if __name__ == "__main__":
    main()
