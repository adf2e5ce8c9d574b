"""The minute job of readers' own times and follows (digest_core/subscriptions/delivery.py): what
one run costs.

Run ``python -m benchmarks.personal`` (``--help`` for knobs). A fresh SQLite ledger holds N timed
subscribers (times spread over the day, half in Asia/Shanghai, half in Europe/Berlin, a third of
them compact) and F followers of 3 words each; the bundled archive is the issues. The platform
is a double that answers at once under very wide pacing, so the figures are the core's own work.
Printed, as medians over ``--runs``:

* the due run: the first run at 09:00 in Shanghai on 2026-11-27 (every subscriber whose time
  fell in the last 6 hours gets the issue; followers whose word is in it get their message):
  wall seconds, messages sent;
* the quiet run: a run with everything due sent (what a minute costs beyond its new times):
  wall seconds, and that time against the 60-second period (the target is well under 1%).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import statistics
import tempfile
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from digest_core.archive import Archive
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.ledger.preferences import Format
from digest_core.platform import PlatformLimits, Rate, TargetKind
from digest_core.publishing.embargo import Embargo
from digest_core.subscriptions.delivery import Personal, Visibility
from digest_core.testing import FakePlatform, SettableClock

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY = dt.date(2026, 11, 27)
WIDE = PlatformLimits(
    overall=Rate(1e6, burst=10_000),
    per_target={k: Rate(1e6, burst=10_000) for k in TargetKind},
)
WORDS = ("蒸馏", "量化", "不存在的词")


async def run_once(subscribers: int, followers: int) -> dict[str, float]:
    clock = SettableClock(dt.datetime(2026, 11, 26, 9, tzinfo=SHANGHAI))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'ledger.db'}"
        async with Ledger.open(url, clock=clock) as ledger:
            platform = FakePlatform(clock, name="fake", limits=WIDE)
            for i in range(subscribers):
                chat = str(10_000 + i)
                await ledger.subscribe("fake", chat)
                minute = (i * 37) % 1440
                await ledger.set_preference(
                    "fake",
                    chat,
                    at=dt.time(minute // 60, minute % 60),
                    zone="Asia/Shanghai" if i % 2 else "Europe/Berlin",
                    format=Format.COMPACT if i % 3 == 0 else Format.FULL,
                )
            for i in range(followers):
                for word in WORDS:
                    await ledger.follow("fake", str(50_000 + i), word)
            archive = Archive(ROOT / "archive")

            personal = Personal(
                archive=archive,
                ledger=ledger,
                engine=DeliveryEngine(ledger, clock=clock),
                clock=clock,
                zone=SHANGHAI,
                visibility=Visibility(Embargo(zone=SHANGHAI, post_time=dt.time(8), clock=clock)),
                platforms={"fake": platform},
                lock=lambda day, name: asyncio.Lock(),
            )
            clock.set(dt.datetime(2026, 11, 27, 9, tzinfo=SHANGHAI))
            started = time.perf_counter()
            reports = await personal.run_due()
            due = time.perf_counter() - started
            sent = sum(r.sent for r in reports)
            # later in the same minute: no new time came (the next minute's would add those)
            clock.set(dt.datetime(2026, 11, 27, 9, 0, 30, tzinfo=SHANGHAI))
            started = time.perf_counter()
            again = await personal.run_due()
            quiet = time.perf_counter() - started
            assert sum(r.sent for r in again) == 0, "the quiet run sent something"
    return {"due_s": due, "sent": sent, "quiet_s": quiet}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--followers", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for n in args.subscribers:
        runs = [asyncio.run(run_once(n, args.followers)) for _ in range(args.runs)]
        due = statistics.median(r["due_s"] for r in runs)
        quiet = statistics.median(r["quiet_s"] for r in runs)
        sent = statistics.median(r["sent"] for r in runs)
        print(
            f"{n} timed subscribers, {args.followers} followers: due run {due:.2f} s "
            f"({sent:.0f} messages), quiet run {quiet * 1000:.0f} ms = "
            f"{quiet / 60:.2%} of the minute (median of {args.runs})"
        )


if __name__ == "__main__":
    main()
