"""Render benchmark: parse + render (Telegram and Discord) of each bundled issue.

Run ``python -m benchmarks.render`` (``--runs``, ``--repeat``). For every issue in the archive it
times the whole path a post takes before the network — read the file, parse it, render every
message for Telegram and for Discord — and prints the median over the runs, per issue, with the
ratio to the 5 ms budget. A second column shows parsing alone, for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from digest_core.loading import load_issue
from digest_core.rendering import Flavor, Part, RenderOptions, render

ROOT = Path(__file__).resolve().parents[1]
BUDGET_MS = 5.0


def once(path: Path) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    issue = load_issue(path)
    t1 = time.perf_counter()
    n = 0
    for flavor in (Flavor.TELEGRAM, Flavor.DISCORD):
        n += len(render(issue, flavor, Part.ALL, options=RenderOptions(buttons=True)))
    t2 = time.perf_counter()
    return (t2 - t0) * 1000, (t1 - t0) * 1000, n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archive", type=Path, default=ROOT / "archive")
    parser.add_argument("--runs", type=int, default=200, help="timed runs per issue")
    args = parser.parse_args()
    files = sorted(p for p in args.archive.iterdir() if p.suffix in (".txt", ".json", ".yaml"))
    print(f"parse + render (telegram + discord), median of {args.runs} runs per issue")
    print(f"{'issue':<16}{'chars':>7}{'msgs':>6}{'total ms':>10}{'parse ms':>10}{'/budget':>9}")
    medians = []
    for path in files:
        for _ in range(5):  # warm up imports and caches
            once(path)
        totals, parses = [], []
        for _ in range(args.runs):
            total, parse, n = once(path)
            totals.append(total)
            parses.append(parse)
        med = statistics.median(totals)
        medians.append(med)
        chars = len(path.read_text(encoding="utf-8"))
        print(
            f"{path.name:<16}{chars:>7}{n:>6}{med:>10.3f}{statistics.median(parses):>10.3f}"
            f"{med / BUDGET_MS:>9.3f}"
        )
    overall = statistics.median(medians)
    print(
        f"median per issue: {overall:.3f} ms = {overall / BUDGET_MS:.3f} "
        f"of the {BUDGET_MS} ms budget"
    )


if __name__ == "__main__":
    main()
