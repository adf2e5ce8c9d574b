"""The crash test's victim: one delivery to a slow FakePlatform that appends each send to a file.

Run as ``python -m tests.delivery.crash_run --url URL --log FILE``; the test kills it with
SIGKILL mid-way, then runs it again to completion. It exits with :data:`EXIT_BUSY` (and says
who holds the lease) when another live process is delivering.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import os

from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryBusy, DeliveryEngine, Ledger
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import FakePlatform, Sent, make_issue, make_messages, make_targets

log = logging.getLogger(__name__)

LIMITS = PlatformLimits(overall=Rate(500.0, 50), per_target={})
EXIT_BUSY = 3


class SkewedClock(SystemClock):
    """The real clock with a wall clock ``skew`` seconds off: a host whose clock is wrong."""

    def __init__(self, skew: float) -> None:
        self.skew = dt.timedelta(seconds=skew)

    def now(self) -> dt.datetime:
        return super().now() + self.skew


async def run(args: argparse.Namespace) -> int:
    clock = SkewedClock(args.skew)
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(sent: Sent) -> None:
        # durable before send() returns, as a real platform's copy of the message would be
        os.write(fd, f"{sent.target.id} {sent.message.payload['part']}\n".encode())
        os.fsync(fd)

    try:
        async with Ledger.open(args.url, clock=clock) as ledger:
            platform = FakePlatform(clock, limits=LIMITS, latency=args.latency, on_sent=record)
            engine = DeliveryEngine(ledger, clock=clock, max_in_flight=args.in_flight)
            print(f"owner {ledger.owner}", flush=True)
            report = await engine.deliver(
                make_issue().ref, platform, make_messages(args.parts), make_targets(args.targets)
            )
    except DeliveryBusy as exc:
        print(f"busy: {exc}", flush=True)
        return EXIT_BUSY
    finally:
        os.close(fd)
    print(f"sent {report.sent}")
    return 0 if report.ok else 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--targets", type=int, default=30)
    parser.add_argument("--parts", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--skew", type=float, default=0.0, help="wall clock off by, s")
    raise SystemExit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
