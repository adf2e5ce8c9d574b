"""The WeCom crash test's victim: one delivery of the longest bundled issue to many groups.

Run as ``python -m tests.bots.wecom.crash_run --api-base URL --ledger URL --targets N``
against a :class:`~tests.fakes.wecom_api.FakeWeCom` whose robots are ``g<i>`` with keys
:func:`key`; the test kills it with SIGKILL mid-way, then runs it again to completion.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random

from pydantic import SecretStr

from bots.wecom.adapter import WeComAdapter
from bots.wecom.settings import WeComSettings
from bots.wecom.spec import WECOM_LIMITS
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.loading import load_issue
from digest_core.testing import scaled_limits
from tests.bots.workchat_helpers import ARCHIVE

log = logging.getLogger(__name__)

ISSUE = ARCHIVE / "2026-11-27.txt"
#: the double runs its windows this much faster (and the adapter paces and waits to match)
SCALE = 60.0


def key(n: int) -> str:
    return f"crash-key-{n:04d}"


async def run(args: argparse.Namespace) -> int:
    settings = WeComSettings(
        targets=[f"g{n}" for n in range(args.targets)],
        webhooks={f"g{n}": SecretStr(key(n)) for n in range(args.targets)},
        api_base=args.api_base,
    )
    clock = SystemClock()
    adapter = WeComAdapter(
        settings, clock=clock, limits=scaled_limits(WECOM_LIMITS, SCALE), time_scale=SCALE
    )
    issue = load_issue(ISSUE)
    async with Ledger.open(args.ledger, clock=clock) as ledger, adapter:
        engine = DeliveryEngine(ledger, clock=clock, rng=random.Random(1))
        report = await engine.deliver(
            issue.ref, adapter, adapter.render(issue), adapter.channel_targets()
        )
    return 0 if report.ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--targets", type=int, default=10)
    raise SystemExit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
