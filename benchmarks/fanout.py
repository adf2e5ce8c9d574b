"""Fan-out benchmark: one 3-part issue to 10,000 fake targets under scaled Telegram pacing.

Run ``python -m benchmarks.fanout`` (``--help`` for knobs). Each run is a fresh process (so peak
RSS is that run's); the medians over ``--runs`` are printed last. The limits are
``time_scaled_limits(TELEGRAM_LIMITS, scale)`` (digest_core.testing): Telegram's pacing on a
clock running ``scale`` times faster (rates and bursts both scaled). Figures:

* rate ratio: the ideal send-phase time at the overall limit ((messages - burst) / rate;
  (messages - 1) / rate for a limit of "burst in any window", paced spread over the window)
  divided by the measured one (first send to last); 1.0 is the limit, above it is a bug;
* CPU ms per message over the whole ``deliver`` call (planning included);
* peak RSS of the process;
* ledger rows written (inserted + updated) per second of ``deliver``, and transactions.

Paced at Telegram's own rate (``--targets 300 --parts 2 --scale 1 --kind private``: 600
messages at 30 a second, a writer's batch holding a part or two) a message's CPU is mostly
wake-ups: on the shared 2-core machine an ``asyncio.sleep`` woken from idle cost 60-150 µs of
CPU and a bare trip to a thread and back about 100 µs, whatever they ran. A part took a
transaction for its claim and another for its record (1,015-1,152 for 600 messages), each two
trips to aiosqlite's thread (a wake-up of that thread and one of the event loop each), and
the dispatcher woke once per part: 1.51 CPU ms a message. With a batch in one trip
(digest_core/delivery/ledger/direct.py) and a send's end claiming the next send in the
transaction of its record (``Fanout._take_at_end``): 612-644 transactions and 0.88 ms; rate
ratio 0.9966 before and 0.9960 after (medians of 3 interleaved pairs, December 2026). What is
left is about three wake-ups of the loop a message (the send's answer, the transaction's, the
send's turn) and one of the driver's thread, and the Python run after each. Since a send
window's turns go out in clumps that share them (digest_core/delivery/pacing.py,
``clump_size``: 5 at a time on Telegram), ``--targets 350 --parts 2 --scale 1``: 0.264 ms a
message, 153 transactions for 700 messages, rate ratio 0.9994 (one run, December 2026; 0.84-0.95
ms and 711 transactions before).

``--subscribers N`` runs the planning scale case instead (no sends): ``Ledger.plan`` of a 3-part
issue to N private chats on a fresh SQLite file, then a re-post through ``deliver`` with nothing
left to send, then ``records(limit=1)`` (what start-up asks). Figures: wall time of each, the
event loop's longest stall during each (a probe task sleeps 10 ms in a loop and records its
largest overshoot; the target is at most 100 ms), and the peak RSS growth of the first plan per
subscriber (the target is at most 1 KB). For context, as the machine's load moves the stall:
the longest garbage-collector pass during the plan, and one full pass over the heap before it
(``--gc-freeze`` takes the objects alive before planning out of the collector's passes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import update

from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger, PartState
from digest_core.delivery.ledger import parts
from digest_core.platform import TargetKind
from digest_core.testing import (
    FakePlatform,
    make_issue,
    make_messages,
    make_targets,
    time_scaled_limits,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
#: the stall probe's sleep
PROBE_TICK = 0.010


async def run_once(args: argparse.Namespace) -> dict[str, float]:
    clock = SystemClock()
    limits = time_scaled_limits(TELEGRAM_LIMITS, args.scale)
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
    overall = limits.overall
    # a limit of "burst per window" is paced spread over its window (SendWindow), not in
    # whole-window bursts: its ideal is the rate's, (messages - 1) / rate
    ahead = overall.burst if overall.window is None else 1
    ideal = (n - ahead) / overall.per_second
    return {
        "messages": n,
        "wall_s": wall,
        "send_phase_s": phase,
        "rate_per_s": n / phase,
        "limit_per_s": limits.overall.per_second,
        "rate_ratio": ideal / phase,
        "cpu_ms_per_msg": cpu * 1000 / n,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rows_per_s": (stats.rows_inserted + stats.rows_updated) / wall,
        "rows_written": stats.rows_inserted + stats.rows_updated,
        "transactions": stats.transactions,
    }


class GcWatch:
    """The longest pass of the garbage collector while watching: a full pass stalls the loop
    for a time that grows with every object alive (the 100k targets themselves included)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.worst = max(self.worst, time.perf_counter() - self._start)

    @asynccontextmanager
    async def watching(self) -> AsyncIterator[GcWatch]:
        self.worst = 0.0
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)


class StallProbe:
    """A task that sleeps :data:`PROBE_TICK` in a loop and keeps the largest overshoot: how long
    the event loop was blocked at worst while it ran.

    ``worst_cpu`` is the part of it the event loop's thread ran (its CPU time over the tick,
    at most the overshoot): on a machine whose other processes keep the cores busy, a process
    waiting for a core overshoots without running, and ``worst`` grows with their load;
    ``worst_cpu`` is what this process's own work (and its garbage collector) blocked."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_cpu = 0.0

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StallProbe]:
        self.worst = self.worst_cpu = 0.0
        task = asyncio.create_task(self._probe())
        await asyncio.sleep(0)
        try:
            yield self
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _probe(self) -> None:
        while True:
            before, cpu_before = time.perf_counter(), time.thread_time()
            await asyncio.sleep(PROBE_TICK)
            over = time.perf_counter() - before - PROBE_TICK
            ran = time.thread_time() - cpu_before - PROBE_TICK
            self.worst = max(self.worst, over)
            self.worst_cpu = max(self.worst_cpu, min(over, ran))


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


async def _timed(probe: StallProbe, work: Awaitable[T]) -> tuple[T, float, float]:
    """``work``'s result, its wall seconds and the longest loop stall (ms) while it ran."""
    async with probe.running():
        wall0 = time.perf_counter()
        result = await work
        wall = time.perf_counter() - wall0
    return result, wall, probe.worst * 1000


async def scale_once(args: argparse.Namespace) -> dict[str, float]:
    """The planning scale case (see the module docstring)."""
    clock = SystemClock()
    probe = StallProbe()
    n = args.subscribers
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite+aiosqlite:///{Path(tmp) / 'ledger.sqlite3'}"
        async with Ledger.open(url, clock=clock) as ledger:
            platform = FakePlatform(clock, name="telegram")
            engine = DeliveryEngine(ledger, clock=clock)
            ref = make_issue().ref
            targets = make_targets(n, platform="telegram")
            messages = make_messages(args.parts)
            if args.gc_freeze:  # what a runtime may do once started: old objects out of GC
                gc.collect()
                gc.freeze()
            gc0 = time.perf_counter()
            gc.collect()  # what one full pass over this heap costs on this machine now
            gc_full = time.perf_counter() - gc0
            rss0 = _rss_mb()
            async with GcWatch().watching() as gcs:
                plan, plan_s, plan_stall = await _timed(
                    probe, ledger.plan(ref, "telegram", targets, args.parts)
                )
            peak_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss0
            planned = sum(len(tp.parts) for tp in plan.targets)
            assert planned == n * args.parts, planned
            del plan
            async with ledger._tx() as conn:  # as if every part had been sent
                await conn.execute(update(parts).values(state=PartState.SENT.value, message_id="m"))
            report, repost_s, repost_stall = await _timed(
                probe, engine.deliver(ref, platform, messages, targets)
            )
            assert report.sent == 0 and report.ok and not platform.calls
            _, records_s, _ = await _timed(probe, ledger.records(limit=1))
    return {
        "plan_s": plan_s,
        "plan_stall_ms": plan_stall,
        "plan_gc_max_ms": gcs.worst * 1000,
        "gc_full_pass_ms": gc_full * 1000,
        "plan_rss_mb": peak_growth,
        "plan_rss_kb_per_sub": peak_growth * 1024 / n,
        "repost_s": repost_s,
        "repost_stall_ms": repost_stall,
        "records1_ms": records_s * 1000,
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
    parser.add_argument(
        "--subscribers", type=int, default=0, help="run the planning scale case with N chats"
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="scale case: gc.freeze() the objects alive before planning (the targets too)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        once = scale_once if args.subscribers else run_once
        print(json.dumps(asyncio.run(once(args))))
        return
    child_argv = [
        f"--targets={args.targets}",
        f"--parts={args.parts}",
        f"--scale={args.scale}",
        f"--kind={args.kind}",
        f"--latency={args.latency}",
        f"--in-flight={args.in_flight}",
        f"--url={args.url}",
        f"--subscribers={args.subscribers}",
        *(["--gc-freeze"] if args.gc_freeze else []),
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
    if args.subscribers:
        print(
            f"median of {len(results)} runs (planning {args.subscribers} subscribers x "
            f"{args.parts} parts; targets: stall <= 100 ms, RSS growth <= 1 KB/subscriber):"
        )
    else:
        print(
            f"median of {len(results)} runs ({args.targets} targets x {args.parts} parts, "
            f"Telegram limits x{args.scale:g}, {args.kind} chats):"
        )
    medians = {key: statistics.median(r[key] for r in results) for key in results[0]}
    for key, value in medians.items():
        print(f"  {key:>19}: {value:.4g}")
    if args.subscribers:
        print(
            f"  stall/limit: plan {medians['plan_stall_ms'] / 100:.2f}, "
            f"re-post {medians['repost_stall_ms'] / 100:.2f}; "
            f"RSS/limit: {medians['plan_rss_kb_per_sub'] / 1:.2f}"
        )
        print(
            "  before issue #8 (100k): plan stall 2,700 ms, peak 366 MB; re-post 2.3 s; "
            "records(limit=1) 282-517 ms (a sort with no index on parts.updated_at)"
        )


if __name__ == "__main__":
    main()
