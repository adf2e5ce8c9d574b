"""Retention benchmark: pruning one old day of N subscribers × 3 parts, on SQLite and PostgreSQL.

Run ``python -m benchmarks.retention`` (``--help`` for knobs). For each database, a fresh
ledger gets one delivery of a 3-part issue dated 120 days ago to N private chats (all sent),
then :meth:`Ledger.prune` with ``keep_days`` 90 folds it into N summaries and deletes the
rows in batches of ``--batch`` with ``--pause`` seconds between them. Figures (medians over
``--runs``): wall time of the pruning, part rows deleted per second of it (pauses included),
the event loop's longest stall while it runs (a probe sleeps 10 ms in a loop and records its
largest overshoot; the target is at most 100 ms), and the longest wait of a state change
submitted every 50 ms meanwhile (what a delivery running at the same time would feel).

PostgreSQL: a throwaway server from tests/pg.py (needs its binaries; skipped without).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import update

from benchmarks.fanout import StallProbe
from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, PartState
from digest_core.delivery.ledger import parts
from digest_core.delivery.ledger.retention import DEFAULT_BATCH
from digest_core.testing import make_issue, make_targets


async def run_once(url: str, n: int, batch: int, pause: float) -> dict[str, float]:
    clock = SystemClock()
    today = clock.now().date()
    old = make_issue(today - dt.timedelta(days=120)).ref
    async with Ledger.open(url, clock=clock) as ledger:
        await ledger.plan(old, "fake", make_targets(n), 3)
        async with ledger._tx() as conn:  # all sent, long ago
            await conn.execute(
                update(parts).values(
                    state=PartState.SENT.value, updated_at=clock.now() - dt.timedelta(days=120)
                )
            )
        live = (await ledger.plan(make_issue(today).ref, "fake", make_targets(1), 1)).targets[0]
        row = live.parts[0].id
        waits: list[float] = []
        done = asyncio.Event()

        async def writer() -> None:
            while not done.is_set():
                t = time.perf_counter()
                await ledger.release(row, "probe")  # a no-op state change, committed
                waits.append(time.perf_counter() - t)
                await asyncio.sleep(0.05)

        probe = StallProbe()
        async with probe.running():
            task = asyncio.create_task(writer())
            t0 = time.perf_counter()
            report = await ledger.prune(
                before=today - dt.timedelta(days=90),
                audit_before=clock.now() - dt.timedelta(days=400),
                batch=batch,
                pause=pause,
            )
            wall = time.perf_counter() - t0
            done.set()
            await task
    assert report.parts == 3 * n and report.summaries == n, report
    return {
        "wall_s": wall,
        "rows_per_s": report.parts / wall,
        "stall_ms": probe.worst * 1000,
        "write_wait_ms": max(waits, default=0.0) * 1000,
        "batches": report.batches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    server = None
    urls: dict[str, object] = {"sqlite": None}
    if not args.no_pg:
        try:
            from tests.pg import PgServer, PgUnavailable

            try:
                server = PgServer.start()
                urls["postgresql"] = None
            except PgUnavailable as exc:
                print(f"postgresql: skipped ({exc})")
        except ImportError:
            print("postgresql: skipped (run from the repository root)")
    try:
        for kind in urls:
            results = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    if kind == "sqlite":
                        url = f"sqlite+aiosqlite:///{Path(tmp) / 'l.db'}"
                    else:
                        assert server is not None
                        url = server.url(server.create_database())
                    results.append(
                        asyncio.run(run_once(url, args.subscribers, args.batch, args.pause))
                    )
            med = {k: statistics.median(r[k] for r in results) for k in results[0]}
            print(
                f"{kind:10} {args.subscribers} subscribers ({3 * args.subscribers} rows), "
                f"batch {args.batch}, pause {args.pause}s: prune {med['wall_s']:.1f} s, "
                f"{med['rows_per_s']:,.0f} rows/s, {med['batches']:.0f} batches, "
                f"longest loop stall {med['stall_ms']:.0f} ms ({med['stall_ms'] / 100:.2f} "
                f"of the 100 ms target), longest state-change wait "
                f"{med['write_wait_ms']:.0f} ms"
            )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
