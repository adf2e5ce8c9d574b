"""Failover benchmark: from SIGKILLing the leader mid-post to the standby leading, and to the post
finished, on one host and across two, and on an SQLite file, against the 30 s target.

Run ``python -m benchmarks.failover`` (``--runs``, ``--lease``: the leader's lease in seconds,
default 15 as shipped). Each run starts a PostgreSQL database (tests/pg.py), the Telegram
double with 60 channels, and two ``digest-bot run`` processes; the issue arrives, the leader is
SIGKILLed after 15 posts, and the figures are taken from the standby's /readyz and the double.
On one host the standby sees the leader's pid is gone; across hosts (``unshare --uts``, needs
root) it waits for the lease to lapse. On an SQLite file (``sqlite``) the leadership is an OS
lock the kernel frees with the killed leader, whatever ``--lease`` says. Prints the median of
the runs and its ratio to 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path

from tests.bots.failover_harness import (
    CHANNELS,
    SAMPLE,
    TAKEOVER_LIMIT,
    Bot,
    can_unshare,
    eventually,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram
from tests.pg import PgServer


async def one_run(
    server: PgServer, *, apart: bool, lease: float, sqlite: bool = False
) -> tuple[float, float, int]:
    """(seconds to lead, seconds to the post finished, messages repeated) after the kill; on an
    SQLite file in a temporary folder with ``sqlite``, else a database of ``server``."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        database = None if sqlite else server.create_database()
        url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}" if database is None else None
        bots: list[Bot] = []
        try:
            async with FakeTelegram() as tg:
                for chat in CHANNELS:
                    tg.add_chat(chat, "channel", title=f"channel {chat}")
                config, archive, today = write_config(
                    tmp_path, url or server.url(database or ""), tg, lease=lease
                )
                bots.append(Bot("one", config, tmp_path, host="host-one" if apart else None))
                bots.append(Bot("two", config, tmp_path, host="host-two" if apart else None))
                roles = await asyncio.gather(*(b.wait_ready(within=60) for b in bots))
                first, second = bots if roles[0] == "leader" else reversed(bots)
                staged = tmp_path / f"{today}.txt"
                shutil.copy(SAMPLE, staged)
                os.replace(staged, archive / staged.name)
                await eventually(lambda: len(tg.sent()) >= 15, within=60, step=0.02)
                first.kill()
                killed = time.monotonic()
                await second.wait_role("leader", within=120)
                led = time.monotonic() - killed
                await eventually(
                    lambda: len({m.chat_id for m in tg.sent()}) == len(CHANNELS),
                    within=120,
                    step=0.05,
                )
                done = time.monotonic() - killed
                repeated = len(tg.sent()) - len(CHANNELS)
                second.proc.send_signal(signal.SIGTERM)
                await asyncio.to_thread(second.proc.wait, 30)
        finally:
            for bot in bots:
                bot.kill()
            if database is not None:
                server.drop_database(database)
    return led, done, repeated


async def main_async(args: argparse.Namespace) -> None:
    server = PgServer.start()
    try:
        cases = [("one host", False, False)]
        cases += [("two hosts", True, False)] if can_unshare() else []
        cases += [("sqlite", False, True)]
        print(f"lease {args.lease:g} s, {len(CHANNELS)} channels, {args.runs} runs per case")
        for name, apart, sqlite in cases:
            runs = [
                await one_run(server, apart=apart, lease=args.lease, sqlite=sqlite)
                for _ in range(args.runs)
            ]
            led = statistics.median(r[0] for r in runs)
            done = statistics.median(r[1] for r in runs)
            print(
                f"{name:>9}: leading after {led:5.1f} s (median; {led / TAKEOVER_LIMIT:.2f} of "
                f"the {TAKEOVER_LIMIT:.0f} s target), post finished after {done:5.1f} s, "
                f"repeated {max(r[2] for r in runs)} at most; runs: "
                + ", ".join(f"{r[0]:.1f}/{r[1]:.1f}" for r in runs)
            )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lease", type=float, default=15.0, help="[leader] lease_seconds")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
