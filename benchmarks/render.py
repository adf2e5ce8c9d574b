"""Render benchmark: parse + render (Telegram and Discord) of each bundled issue.

Run ``python -m benchmarks.render`` (``--rounds``, ``--runs``, ``--archive``). For every issue in
the archive it times the whole path a post takes before the network — read the file, parse it,
render every message for Telegram and for Discord. Each round times every issue ``--runs`` times
(issues in turn, so a burst of load on a shared machine hits them alike); an issue's figure is the
median over the rounds of the round medians. It prints per issue that figure (wall clock, and the
process's CPU time beside it, which shows what load on other processes added), parsing alone,
and the ratio to the 5 ms budget; then the median per issue and the worst issue against the
targets (issue #8 item 10: median ≤ 1 ms, worst ≤ 2.5 ms) and the budget, with the figures from
before the escaping was rewritten for reference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from digest_core.loading import load_issue
from digest_core.rendering import Part, RenderOptions, render
from digest_core.rendering import discord as discord_render
from digest_core.rendering import telegram as telegram_render

ROOT = Path(__file__).resolve().parents[1]
BUDGET_MS = 5.0
#: Targets of issue #8 item 10, for the median per issue and for the worst issue.
TARGET_MEDIAN_MS = 1.0
TARGET_WORST_MS = 2.5
#: Reference figures (ms) from before the per-character escaping loop was replaced: as the
#: tracker put them, and this script run on the code of main at 004d76e (median of 3 runs, taken
#: in turn with 3 runs of the new code; 2 shared CPUs, load average about 4). The worst issue
#: was 2026-11-27.txt then too.
BEFORE = {
    "tracker #8": {"median": 2.0, "worst": 5.3},
    "main 004d76e": {"median": 2.304, "worst": 5.949},
}


def once(path: Path) -> tuple[float, float, float, int]:
    """One parse + render of ``path``: (wall ms, CPU ms, parse wall ms, messages)."""
    c0 = time.process_time()
    t0 = time.perf_counter()
    issue = load_issue(path)
    t1 = time.perf_counter()
    n = 0
    for flavor in (telegram_render, discord_render):
        n += len(render(issue, flavor, Part.ALL, options=RenderOptions(buttons=True)))
    t2 = time.perf_counter()
    c1 = time.process_time()
    return (t2 - t0) * 1000, (c1 - c0) * 1000, (t1 - t0) * 1000, n


def _medians(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    wall, cpu, parse = (statistics.median(column) for column in zip(*rows, strict=True))
    return wall, cpu, parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archive", type=Path, default=ROOT / "archive")
    parser.add_argument("--rounds", type=int, default=5, help="rounds over all issues")
    parser.add_argument("--runs", type=int, default=60, help="timed runs per issue per round")
    args = parser.parse_args()
    files = sorted(p for p in args.archive.iterdir() if p.suffix in (".txt", ".json", ".yaml"))
    load = os.getloadavg()[0]
    print(
        f"parse + render (telegram + discord): median of {args.rounds} rounds of the median of "
        f"{args.runs} runs, per issue"
    )
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (wall times run high under load)")
    for path in files:  # warm up imports and caches
        for _ in range(5):
            once(path)
    rounds: dict[Path, list[tuple[float, float, float]]] = {p: [] for p in files}
    messages: dict[Path, int] = {}
    for _ in range(args.rounds):
        for path in files:
            runs = [once(path) for _ in range(args.runs)]
            messages[path] = runs[-1][3]
            rounds[path].append(_medians([r[:3] for r in runs]))
    print(
        f"{'issue':<16}{'chars':>7}{'msgs':>6}{'wall ms':>9}{'cpu ms':>9}{'parse ms':>10}"
        f"{'/budget':>9}"
    )
    walls: dict[Path, float] = {}
    cpus: dict[Path, float] = {}
    for path in files:
        wall, cpu, parse = _medians(rounds[path])
        walls[path], cpus[path] = wall, cpu
        chars = len(path.read_text(encoding="utf-8"))
        print(
            f"{path.name:<16}{chars:>7}{messages[path]:>6}{wall:>9.3f}{cpu:>9.3f}{parse:>10.3f}"
            f"{wall / BUDGET_MS:>9.3f}"
        )
    median = statistics.median(walls.values())
    worst_path = max(walls, key=lambda p: walls[p])
    worst = walls[worst_path]
    before = "  ".join(f"{k}: {v['median']:.3g} / {v['worst']:.3g}" for k, v in BEFORE.items())
    print(
        f"median per issue: {median:.3f} ms = {median / TARGET_MEDIAN_MS:.2f} of the "
        f"{TARGET_MEDIAN_MS} ms target, {median / BUDGET_MS:.2f} of the {BUDGET_MS} ms budget"
    )
    print(
        f"worst issue:      {worst:.3f} ms ({worst_path.name}) = {worst / TARGET_WORST_MS:.2f} of "
        f"the {TARGET_WORST_MS} ms target, {worst / BUDGET_MS:.2f} of the {BUDGET_MS} ms budget"
    )
    cpu_median, cpu_worst = statistics.median(cpus.values()), cpus[worst_path]
    print(f"cpu time:         median {cpu_median:.3f} ms, worst issue {cpu_worst:.3f} ms")
    print(f"before (median / worst, ms)  {before}")
    ratio_m = BEFORE["main 004d76e"]["median"] / median
    ratio_w = BEFORE["main 004d76e"]["worst"] / worst
    print(f"speed-up over main 004d76e: median {ratio_m:.1f}x, worst {ratio_w:.1f}x")


if __name__ == "__main__":
    main()
