"""Scale benchmark: one day's issue to 1k / 10k / 100k private subscribers, SQLite and PostgreSQL.

Run ``python -m benchmarks.scale`` (``--help`` for knobs). Pacing is disabled (limits of 10^9
messages/s) and the platform answers at once, so the engine and the ledger are the bottleneck.
The messages are the real Telegram parts of the longest bundled issue (the subscriber format
chosen with ``--format``); the subscribers are rows of the ledger's subscribers table, read
as a post reads them. Each run is a fresh process (peak RSS is that run's) on a fresh database;
the medians over ``--runs`` are printed last with their ratio to the issue's targets:

* CPU ms per message over ``deliver`` (planning included) — target <= 0.05 (issue #24, item
  4; 0.1 before);
* ledger rows written per second of ``deliver``;
* the event loop's longest stall during ``deliver`` (a probe task sleeping 10 ms) — <= 40 ms
  (100 before), and the part of it the loop's thread ran (``StallProbe.worst_cpu``: the rest
  is the process waiting for a core, which the machine's other load decides);
* peak RSS of the process — <= 200 MB at 100k;
* the ledger's growth for the day (SQLite: file + WAL after a checkpoint; PostgreSQL:
  ``pg_database_size`` after a VACUUM) in MB;
* PostgreSQL's throughput (messages per wall second) over SQLite's at each size — >= 0.7.

PostgreSQL is a throwaway server started like the tests' (``tests/pg.py``: loopback, as
``nobody``; fsync and synchronous_commit off, so its figures are an upper bound for a durable
server); ``--db sqlite`` skips it.

``--pacing`` prints the real-pacing case instead, from the pacing model (no sends): the wall
time of a 100k delivery in each subscriber format, with and without paid broadcast, and its
ratio to the platform limit (see :func:`pacing_table`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

from benchmarks.fanout import StallProbe
from digest_core.archive import Archive
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.ledger.schema import subscribers
from digest_core.models import Issue
from digest_core.platform import PartKey, PlatformLimits, Rate, Target, TargetKind
from digest_core.rendering import Message, Part, RenderOptions, render
from digest_core.rendering import telegram as telegram_render

ROOT = Path(__file__).resolve().parents[1]
#: pacing off: the engine is the bottleneck
UNLIMITED = PlatformLimits(
    overall=Rate(1e9, burst=10**9),
    per_target={k: Rate(1e9, burst=10**9) for k in TargetKind},
)
TARGETS = {"cpu_ms_per_msg": 0.05, "stall_ms": 40.0, "peak_rss_mb": 200.0}
PG_RATIO_TARGET = 0.7


class NullPlatform:
    """A platform that accepts every message at once and remembers only how many."""

    name = "telegram"
    flavor = telegram_render
    limits = UNLIMITED
    post_options = RenderOptions(buttons=True)

    def __init__(self) -> None:
        self.count = 0

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        self.count += 1
        return str(self.count)


def longest_issue() -> Issue:
    archive = Archive(ROOT / "archive", index=False)
    issues = [archive.on(entry.date) for entry in archive.list()]
    return max(issues, key=lambda i: len(render(i, telegram_render, Part.ALL)))


def subscriber_messages(issue: Issue, fmt: str) -> list[Message]:
    """The messages a private subscriber gets: the whole issue, or the compact one."""
    options = RenderOptions(buttons=True)
    part = Part.ALL if fmt == "full" else Part.TOC  # compact: what TelegramAdapter sends
    return list(render(issue, telegram_render, part, options=options))


async def _add_subscribers(ledger: Ledger, n: int) -> None:
    since = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [
        {"platform": "telegram", "chat_id": str(10**9 + i), "active": True, "since": since}
        for i in range(n)
    ]
    for start in range(0, n, 5000):
        async with ledger._tx() as conn:
            await conn.execute(insert(subscribers), rows[start : start + 5000])


async def _size_mb(ledger: Ledger, url: str, path: Path | None) -> float:
    if path is not None:
        async with ledger._tx() as conn:
            await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        files = [path, path.with_name(path.name + "-wal")]
        return sum(f.stat().st_size for f in files if f.exists()) / 2**20
    async with ledger._engine.connect() as conn:
        autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(text("VACUUM"))
        size = (
            await autocommit.execute(text("SELECT pg_database_size(current_database())"))
        ).scalar()
    return float(size or 0) / 2**20


async def run_once(args: argparse.Namespace) -> dict[str, float]:
    clock = SystemClock()
    issue = longest_issue()
    messages = subscriber_messages(issue, args.format)
    with tempfile.TemporaryDirectory() as tmp:
        path = None if args.url else Path(tmp) / "ledger.sqlite3"
        url = args.url or f"sqlite+aiosqlite:///{path}"
        async with Ledger.open(url, clock=clock) as ledger:
            await _add_subscribers(ledger, args.subscribers)
            size0 = await _size_mb(ledger, url, path)
            platform = NullPlatform()
            engine = DeliveryEngine(ledger, clock=clock)
            gc.collect()
            probe = StallProbe()
            stats0 = ledger.stats.rows_inserted + ledger.stats.rows_updated
            async with probe.running():
                cpu0, wall0 = time.process_time(), time.perf_counter()
                targets = await ledger.subscribers("telegram")
                report = await engine.deliver(issue.ref, platform, messages, targets)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            rows = ledger.stats.rows_inserted + ledger.stats.rows_updated - stats0
            size = await _size_mb(ledger, url, path) - size0
    n = platform.count
    assert n == args.subscribers * len(messages) == report.sent, (n, report.sent)
    return {
        "messages": n,
        "parts": len(messages),
        "wall_s": wall,
        "msgs_per_s": n / wall,
        "cpu_ms_per_msg": cpu * 1000 / n,
        "rows_per_s": rows / wall,
        "stall_ms": probe.worst * 1000,
        "stall_cpu_ms": probe.worst_cpu * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "ledger_mb_per_day": size,
    }


def pacing_table(issue: Issue) -> list[str]:
    """The real-pacing case from the pacing model: 100k private subscribers.

    A delivery of M messages at an overall rate R (burst B) takes (M - B) / R seconds at
    best; the per-chat limit (1/s, burst 3) never binds when the overall rate is spread over
    100k chats. The platform limit is Telegram's 30 msg/s (1000 msg/s with paid broadcast);
    the ratio is the model's time over the time at exactly the limit (M / limit).
    """
    from bots.telegram.spec import PAID_BROADCAST_LIMITS, TELEGRAM_LIMITS

    n = 100_000
    lines = [
        f"{'format':>8} {'paid':>5} {'parts':>5} {'messages':>9} {'rate/s':>7} "
        f"{'wall':>9} {'limit wall':>10} {'ratio':>6}"
    ]
    for fmt in ("full", "compact"):
        parts = len(subscriber_messages(issue, fmt))
        for paid, limits, limit in (
            (False, TELEGRAM_LIMITS, 30.0),
            (True, PAID_BROADCAST_LIMITS, 1000.0),
        ):
            m = n * parts
            rate = limits.overall.per_second
            # (a limit of "burst in any window" is paced spread over its window: no burst)
            ahead = limits.overall.burst if limits.overall.window is None else 1
            wall = (m - ahead) / rate
            ideal = m / limit
            lines.append(
                f"{fmt:>8} {'yes' if paid else 'no':>5} {parts:>5} {m:>9,} {rate:>7g} "
                f"{_hms(wall):>9} {_hms(ideal):>10} {wall / ideal:>6.3f}"
            )
    return lines


def _hms(seconds: float) -> str:
    h, rest = divmod(round(seconds), 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


def _child(args: argparse.Namespace, url: str, n: int) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "benchmarks.scale", "--child",
        f"--subscribers={n}", f"--url={url}", f"--format={args.format}",
    ]  # fmt: skip
    out = subprocess.run(argv, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="subscriber counts")
    parser.add_argument("--db", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", default="full", choices=["full", "compact"])
    parser.add_argument("--pacing", action="store_true", help="print the real-pacing case")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--subscribers", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(run_once(args))))
        return
    if args.pacing:
        print("\n".join(pacing_table(longest_issue())))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    dbs = args.db.split(",")
    server = None
    if "postgresql" in dbs:
        sys.path.insert(0, str(ROOT))
        from tests.pg import PgServer

        server = PgServer.start()
    medians: dict[tuple[str, int], dict[str, float]] = {}
    try:
        for n in sizes:
            for db in dbs:
                results = []
                for i in range(args.runs):
                    url = ""
                    if server is not None and db == "postgresql":
                        name = f"scale_{n}_{i}"
                        server.create_database(name)
                        url = server.url(name)
                    result = _child(args, url, n)
                    if server is not None and db == "postgresql":
                        server.drop_database(name)
                    results.append(result)
                    print(
                        f"{db} {n:>7} run {i + 1}: "
                        + ", ".join(f"{k}={v:.4g}" for k, v in result.items()),
                        flush=True,
                    )
                medians[db, n] = {k: statistics.median(r[k] for r in results) for k in results[0]}
    finally:
        if server is not None:
            server.stop()
    _print_table(medians, sizes, dbs, runs=args.runs, fmt=args.format)


def _print_table(
    medians: dict[tuple[str, int], dict[str, float]],
    sizes: list[int],
    dbs: list[str],
    *,
    runs: int,
    fmt: str,
) -> None:
    cpu, stall, rss = (TARGETS[k] for k in ("cpu_ms_per_msg", "stall_ms", "peak_rss_mb"))
    print(f"\nmedians of {runs} runs, {fmt} format, pacing off (ratio = figure / target):")
    print(
        f"(targets: CPU <= {cpu} ms/msg, stall <= {stall:.0f} ms, RSS <= {rss:.0f} MB; "
        "stall CPU: the part of the stall this process ran)"
    )
    head = (
        f"{'db':>10} {'subs':>7} {'msgs':>7} {'msg/s':>8} {'CPU ms/msg':>11} {'rows/s':>8} "
        f"{'stall ms':>10} {'stall CPU':>10} {'RSS MB':>7} {'MB/day':>7}"
    )
    print(head)
    for n in sizes:
        for db in dbs:
            m = medians[db, n]
            print(
                f"{db:>10} {n:>7} {m['messages']:>7.0f} {m['msgs_per_s']:>8.0f} "
                f"{m['cpu_ms_per_msg']:>5.3f} ({m['cpu_ms_per_msg'] / cpu:.2f}) "
                f"{m['rows_per_s']:>8.0f} {m['stall_ms']:>4.0f} ({m['stall_ms'] / stall:.2f}) "
                f"{m['stall_cpu_ms']:>4.0f} ({m['stall_cpu_ms'] / stall:.2f}) "
                f"{m['peak_rss_mb']:>4.0f} ({m['peak_rss_mb'] / rss:.2f}) "
                f"{m['ledger_mb_per_day']:>7.1f}"
            )
        if "sqlite" in dbs and "postgresql" in dbs:
            ratio = medians["postgresql", n]["msgs_per_s"] / medians["sqlite", n]["msgs_per_s"]
            print(f"{'':>10} {n:>7} PostgreSQL/SQLite throughput {ratio:.2f} (target >= 0.7)")


if __name__ == "__main__":
    main()
