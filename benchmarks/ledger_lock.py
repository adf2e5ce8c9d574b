"""Ledger lock benchmark: a second SQLite client holds the write lock mid-post.

Run ``python -m benchmarks.ledger_lock`` (``--help`` for knobs). One delivery of 406 parts (14
targets x 29 parts) to a FakePlatform with a real SQLite ledger (production settings: WAL, 5 s
busy timeout); once ``--at`` parts are sent, another process runs ``BEGIN EXCLUSIVE`` and holds
it ``--hold`` seconds. Figures per run, medians last:

* sent: parts the platform got in the end (406 is the whole post), and how many twice;
* resume: seconds from the lock's release to the end of the post (the target is "within
  seconds"); the delivery's wall time;
* alerts: trouble notices the ledger's health raised (the target is one, then one "cleared").
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets

log = logging.getLogger(__name__)

TARGETS, PARTS = 14, 29
LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


async def one_run(folder: Path, *, at: int, hold: float) -> dict[str, float]:
    clock = SystemClock()
    db = folder / "ledger.sqlite3"
    platform = FakePlatform(
        clock, limits=PlatformLimits(overall=Rate(300.0, 30), per_target={}), latency=0.01
    )
    alerts: list[str] = []
    released = 0.0
    reached = asyncio.Event()
    platform.on_sent = lambda _: reached.set() if len(platform.sent) >= at else None
    async with Ledger.open(f"sqlite+aiosqlite:///{db}", clock=clock) as ledger:
        health = getattr(ledger, "health", None)  # absent before the fix
        if health is not None:
            health.subscribe(lambda t, cleared: alerts.append("cleared" if cleared else t.error))
        engine = DeliveryEngine(ledger, clock=clock)

        async def lock() -> None:
            nonlocal released
            await reached.wait()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", LOCKER, str(db), str(hold), stdout=asyncio.subprocess.PIPE
            )
            assert proc.stdout is not None
            await proc.stdout.readline()
            await proc.wait()
            released = time.monotonic()

        locker = asyncio.create_task(lock())
        start = time.monotonic()
        completed = False
        try:
            await engine.deliver(
                make_issue().ref, platform, make_messages(PARTS), make_targets(TARGETS)
            )
            completed = True
        except Exception as exc:
            log.warning("the delivery failed: %s", str(exc).splitlines()[0])
        end = time.monotonic()
        await locker
    copies = Counter((s.target.id, s.message.payload["part"]) for s in platform.sent)
    return {
        "sent": len(copies),
        "twice": sum(n - 1 for n in copies.values()),
        # nan: the post never completed
        "resume_s": end - released if completed else float("nan"),
        "wall_s": end - start,
        "alerts": len(alerts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hold", type=float, default=8.0, help="seconds the lock is held")
    parser.add_argument("--at", type=int, default=41, help="parts sent before the lock")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    rows = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            row = asyncio.run(one_run(Path(tmp), at=args.at, hold=args.hold))
        rows.append(row)
        print(f"run {n + 1}: " + ", ".join(f"{k}={v:.3g}" for k, v in row.items()))
    print(
        f"median of {len(rows)} (of {TARGETS * PARTS} parts, lock held {args.hold:g} s): "
        + ", ".join(f"{k}={statistics.median(r[k] for r in rows):.3g}" for k in rows[0])
    )


if __name__ == "__main__":
    main()
