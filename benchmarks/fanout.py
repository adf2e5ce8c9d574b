"""Fan-out benchmark: one 3-part issue to 10,000 fake targets under scaled Telegram pacing.

Run ``python -m benchmarks.fanout`` (``--help`` for knobs). Each run is a fresh process (so peak
RSS is that run's); the medians over ``--runs`` are printed last. The limits are
``TELEGRAM_LIMITS.time_scaled(scale)``: Telegram's pacing on a clock running ``scale`` times
faster (rates and bursts both scaled). Figures:

* rate ratio: the ideal send-phase time at the overall limit ((messages - burst) / rate)
  divided by the measured one (first send to last); 1.0 is the limit, above it is a bug;
* CPU ms per message over the whole ``deliver`` call (planning included);
* peak RSS of the process;
* ledger rows written (inserted + updated) per second of ``deliver``, and transactions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from digest_core.clock import SystemClock
from digest_core.delivery import TELEGRAM_LIMITS, DeliveryEngine, Ledger
from digest_core.platform import TargetKind
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets

log = logging.getLogger(__name__)


async def run_once(args: argparse.Namespace) -> dict[str, float]:
    clock = SystemClock()
    limits = TELEGRAM_LIMITS.time_scaled(args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite+aiosqlite:///{Path(tmp) / 'ledger.sqlite3'}"
        async with Ledger.open(url, clock=clock) as ledger:
            platform = FakePlatform(clock, name="telegram", limits=limits, latency=args.latency)
            engine = DeliveryEngine(ledger, clock=clock, max_in_flight=args.in_flight)
            issue = make_issue()
            targets = make_targets(args.targets, platform="telegram", kind=TargetKind(args.kind))
            messages = make_messages(args.parts)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            report = await engine.deliver(issue.ref, platform, messages, targets)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            stats = ledger.stats
    n = len(platform.sent)
    assert n == args.targets * args.parts == report.sent, (n, report.sent)
    times = platform.times()
    phase = max(times) - min(times)
    ideal = (n - limits.overall.burst) / limits.overall.per_second
    return {
        "messages": n,
        "wall_s": wall,
        "send_phase_s": phase,
        "rate_per_s": n / phase,
        "limit_per_s": limits.overall.per_second,
        "rate_ratio": ideal / phase,
        "cpu_ms_per_msg": cpu * 1000 / n,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rows_per_s": stats.rows_written / wall,
        "rows_written": stats.rows_written,
        "transactions": stats.transactions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--parts", type=int, default=3)
    parser.add_argument("--scale", type=float, default=100.0, help="pacing limits x this")
    parser.add_argument("--kind", default="private", choices=[k.value for k in TargetKind])
    parser.add_argument("--latency", type=float, default=0.005, help="fake send latency, s")
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--url", default="", help="ledger URL (default: a temp SQLite file)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(run_once(args))))
        return
    child_argv = [
        f"--targets={args.targets}",
        f"--parts={args.parts}",
        f"--scale={args.scale}",
        f"--kind={args.kind}",
        f"--latency={args.latency}",
        f"--in-flight={args.in_flight}",
        f"--url={args.url}",
    ]
    results = []
    for i in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.fanout", *child_argv, "--child"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result = json.loads(out)
        results.append(result)
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.4g}" for k, v in result.items()))
    print(
        f"median of {len(results)} runs ({args.targets} targets x {args.parts} parts, "
        f"Telegram limits x{args.scale:g}, {args.kind} chats):"
    )
    for key in results[0]:
        print(f"  {key:>15}: {statistics.median(r[key] for r in results):.4g}")


if __name__ == "__main__":
    main()
