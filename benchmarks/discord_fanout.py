"""Discord fan-out benchmark: one issue to 500 channels through the loopback Discord double.

Run ``python -m benchmarks.discord_fanout`` (``--help`` for knobs). The real bot does the work:
``DigestService.post`` with the ledger (a temp SQLite file), the core's pacing and the real
discord.py client posting over HTTP to ``tests.fakes.discord_api.FakeDiscord`` with Discord's
rate limits (50 requests/s global, 5 messages per 5 s per channel; ``--scale`` shrinks the
double's windows and speeds the bot's pacing by the same factor). Each run is a fresh process
(peak RSS is the bot's alone: the double runs in a process of its own); medians are printed
last. ``--no-http`` answers each message create in the bot's process after 2 ms instead (the
adapter builds and sends each part as before; discord.py's request, aiohttp, the socket and
the answer's JSON are left out): a run without it minus one with it is the Discord client's
HTTP path per message. Figures:

* wall / ideal: the ``post`` call's wall time over the ideal at Discord's limits,
  max((messages - 1) / 50 per second, (parts - 5) / 5 per 5 s), and ``ratio`` its inverse
  (issue #24, item 6: 0.96 when filed); ``ratio_window`` the same against the least time
  "50 in any second" allows, 50 at a time (a second less);
* 429s: answered by the double's global bucket, by its per-channel buckets (target 0), total;
* peak RSS of the bot process, and its CPU ms per message sent (the discord.py client, with
  the engine and ledger: the double runs in a process of its own) with ``cpu_ratio``, its
  ratio to the target of 1 ms (issue #24, item 5; 3.5 ms when that issue was filed). On a
  shared 2-core machine in December 2026, 5.0 ms before and 4.05 after the ledger's writes
  were merged (a send's record waits for the next claim's transaction, a target's next
  claim shares its part before's: 1.92 transactions a message, then 1.03), the pool's
  reset on check-in skipped when nothing is open, discord.py's bucket sweep amortised and
  each message's JSON encoded once (medians of 3, both run side by side; alone, 6-7 ms
  before, 4.0 after when the machine was quieter). At 50 messages a second the ledger was
  still the largest part: its writes come a part at a time, and each transaction took a pool
  checkout and several trips to aiosqlite's thread through SQLAlchemy. Since the writer keeps
  a connection of its own on an SQLite file and runs each statement of a batch in one trip
  (digest_core/delivery/ledger/direct.py), 2.54 ms became 1.68 (medians of 3 interleaved
  pairs, December 2026); what is left is spread over discord.py's request with aiohttp and its
  JSON decoding, the engine's tasks and pacing, and the event loop. The Discord client's HTTP
  path, a run minus its ``--no-http`` twin (the same answering put in by hand before the flag;
  medians of 3 interleaved, two sets, December 2026): 0.61 and 0.56 ms a message before, 0.51
  and 0.42 after each channel's route was kept with its URL parsed once, bodies went out in
  UTF-8 and aiohttp's timer per request went; the whole process's figure did not move beyond
  the shared machine's noise (1.66 ms before and after, medians of 15 interleaved runs each,
  1.04-2.84). Sampled at 50 a second, a send is about half aiohttp's request and a fifth the
  answer's JSON (the double answers it escaped to ASCII, 22.7 kB; in UTF-8, as Discord
  answers, it is 11.8 kB), the rest discord.py's bookkeeping and the adapter's own (nonce,
  body, route, request timeout). On this machine a process woken from idle pays 40-150 µs of
  CPU whatever it runs, and Python run just after costs about 3 times what it costs warm: at
  50 sends a second most of a message's CPU is that, spread over every wake-up and every piece
  of code a send touches. On a busier day of the same machine (medians of 3 interleaved
  pairs): the whole process 1.86 ms, ``--no-http`` 1.13, the engine and ledger alone at 50 a
  second (``python -m benchmarks.fanout --targets 500 --parts 2 --scale 1.6667 --kind
  private``, a fake adapter) 0.91: discord.py, aiohttp and the adapter about 0.95 ms a
  message. At paid-broadcast pace (``--scale 0.05``, about 930 a second) the whole process
  costs 0.52 ms a message and ``--no-http`` 0.26. Then the send window's turns went out in
  clumps of 5, 10 a second (digest_core/delivery/pacing.py, ``clump_size``): a wake-up of
  the loop for each send's turn, one for its answer and a transaction each became one of
  each for 5 sends. Medians of 3 (December 2026): 1.603 ms before (1.544-1.660, interleaved
  with after runs), 0.687 after (0.652-0.702): 0.69 of the target; ``ratio`` 0.996 before,
  0.993 after, 0 429s. Clumps of 8 cost 0.61 ms but went at 0.962 of the limit: 50 is not
  a multiple of 8, so a clump waited for the answers of two clumps before it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GUILD = 920_000_000_000_000_001
FIRST_CHANNEL = 920_000_000_000_001_000
#: the bot's CPU per message sent (issue #24, item 5)
CPU_TARGET_MS = 1.0
#: Discord's limits (https://discord.com/developers/docs/topics/rate-limits): 50 requests a
#: second per bot; message create 5 per 5 s per channel
GLOBAL_RATE = 50
CHANNEL_COUNT, CHANNEL_WINDOW = 5, 5.0

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------- the double's process


async def serve_fake(args: argparse.Namespace) -> None:
    """Run the double with ``args.channels`` channels; print its address as a JSON line, then
    answer each "stats" line on stdin with the counters as a JSON line; stop at EOF."""
    from tests.fakes.discord_api import FakeDiscord

    async with FakeDiscord(rate_scale=args.scale) as fake:
        channels = [FIRST_CHANNEL + i for i in range(args.channels)]
        await fake.add_guild(GUILD, "benchmark", channels=channels)
        print(json.dumps({"api_base": fake.api_base, "token": fake.token}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            if line.strip() == "stats":
                c = fake.counters
                stored = sum(len(fake.messages(ch)) for ch in channels)
                print(
                    json.dumps(
                        {
                            "statuses": {str(k): v for k, v in c.statuses.items()},
                            "rate_limited": dict(c.rate_limited),
                            "requests": dict(c.requests),
                            "stored": stored,
                        }
                    ),
                    flush=True,
                )


# ------------------------------------------------------------------------- one run of the bot


def run_child(args: argparse.Namespace) -> dict[str, float]:
    """Start the double in its own process, post through it, collect both sides' figures."""
    fake = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.discord_fanout", "--fake", *_passed(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert fake.stdin is not None and fake.stdout is not None
    try:
        info = json.loads(fake.stdout.readline())
        figures = asyncio.run(post_once(args, info["api_base"], info["token"]))
        fake.stdin.write("stats\n")
        fake.stdin.flush()
        stats = json.loads(fake.stdout.readline())
    finally:
        with contextlib.suppress(OSError):
            fake.stdin.close()
        fake.wait(timeout=10)
    n = int(figures["messages"])
    created = 0 if args.no_http else n  # (with --no-http the double sees none of them)
    assert created == stats["stored"], (figures, stats)
    limited = stats["rate_limited"]
    return {
        **figures,
        "global_429": limited.get("global", 0),
        "bucket_429": limited.get("bucket", 0),
        "total_429": stats["statuses"].get("429", 0),
        # requests besides the posts (logging in: the global limit counts them too)
        "other_requests": sum(stats["requests"].values())
        - stats["statuses"].get("429", 0)
        - created,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


async def post_once(args: argparse.Namespace, api_base: str, token: str) -> dict[str, float]:
    """``DigestService.post`` of one issue to every channel, as ``digest-bot post`` does it."""
    import datetime as dt

    from bots.discord import DiscordAdapter
    from bots.registry import load_settings
    from bots.runtime import open_service
    from digest_core.delivery import PartOutcome, PartState

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "digest-bot.toml"
        channels = ", ".join(f'"{FIRST_CHANNEL + i}"' for i in range(args.channels))
        config.write_text(
            f'archive_dir = "{REPO / "archive"}"\n'
            f'database_url = "sqlite+aiosqlite:///{Path(tmp) / "ledger.sqlite3"}"\n'
            'log_level = "WARNING"\n'
            "[schedule]\nenabled = false\n"
            "[discord]\n"
            f"channels = [{channels}]\n"
            f'api_base_url = "{api_base}"\n',
            encoding="utf-8",
        )
        os.environ["DIGEST_BOT_DISCORD__TOKEN"] = token
        settings = load_settings(config)
        day = dt.date.fromisoformat(args.date)
        async with open_service(settings, only="discord") as service:
            adapter = service.platforms["discord"]
            assert isinstance(adapter, DiscordAdapter)
            # the double's windows are `scale` times Discord's: pace as much faster
            adapter.limits = _limits(args)
            await adapter.start(service, receive=False)
            if args.no_http:
                assert adapter.client is not None
                _answer_creates_here(adapter.client.http)
            sent_at: list[float] = []

            def progress(outcome: PartOutcome) -> None:
                if outcome.state is PartState.SENT:
                    sent_at.append(time.perf_counter())

            try:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                [report] = await service.post(day, progress=progress)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            finally:
                await adapter.stop()
            parts = len(await service.ledger.records(platform="discord")) // args.channels
    n = report.sent
    assert report.ok and n == args.channels * parts, report
    # Discord's own limits, whatever our pacing: 50 requests/s, 5 messages per 5 s a channel
    channel_ideal = max(0, parts - CHANNEL_COUNT) * CHANNEL_WINDOW / CHANNEL_COUNT
    ideal = max((n - 1) / GLOBAL_RATE, channel_ideal) * args.scale
    # at 50 in any second, sent 50 at a time (the least time the limit allows)
    ideal_window = max((math.ceil(n / GLOBAL_RATE) - 1) * 1.0, channel_ideal) * args.scale
    return {
        "channels": args.channels,
        "messages": n,
        "wall_s": wall,
        "ideal_s": ideal,
        "wall_over_ideal": wall / ideal,
        "ratio": ideal / wall,
        "ideal_window_s": ideal_window,
        "ratio_window": ideal_window / wall,
        "send_phase_s": max(sent_at) - min(sent_at),
        "rate_per_s": n / wall,
        "cpu_ms_per_msg": cpu * 1000 / n,
        "cpu_ratio": cpu * 1000 / n / CPU_TARGET_MS,
    }


#: ``--no-http``: how long a create waits for its answer (the loopback double's, about)
ANSWER_SECONDS = 0.002


def _answer_creates_here(http: Any) -> None:
    """``--no-http``: each message create is answered in this process after
    :data:`ANSWER_SECONDS` with a new message id (``http.request`` replaced on that instance
    for the create route; other requests go to the double). The adapter builds and sends each
    part as before (nonce, body, route, request timeout); discord.py's request, aiohttp, the
    socket and the answer's JSON are left out."""
    request = http.request
    ids = itertools.count(1)

    async def answered(route: Any, **kwargs: Any) -> Any:
        if route.method != "POST" or route.path != "/channels/{channel_id}/messages":
            return await request(route, **kwargs)
        await asyncio.sleep(ANSWER_SECONDS)
        return {"id": str(next(ids)), "channel_id": str(route.channel_id)}

    http.request = answered


def _limits(args: argparse.Namespace) -> Any:
    """The pacing of the run: DISCORD_LIMITS (with ``--overall``'s global rate) sped up by
    ``1 / scale``."""
    from dataclasses import replace

    from bots.discord.spec import DISCORD_LIMITS
    from digest_core.platform import Rate
    from digest_core.testing import scaled_limits

    limits = DISCORD_LIMITS
    if args.overall:
        rate, burst = args.overall.split("/")
        limits = replace(limits, overall=Rate(float(rate), int(burst)))
    return scaled_limits(limits, 1 / args.scale)


def _passed(args: argparse.Namespace) -> list[str]:
    passed = ["--channels", str(args.channels), "--scale", str(args.scale), "--date", args.date]
    passed += ["--no-http"] if args.no_http else []
    return passed + (["--overall", args.overall] if args.overall else [])


# ------------------------------------------------------------------------- driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, default=500)
    parser.add_argument(
        "--date", default="2026-11-27", help="issue from archive/ (default: a two-message one)"
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="the double's rate windows x this (1 = Discord's)"
    )
    parser.add_argument(
        "--overall",
        metavar="RATE/BURST",
        help="try a token bucket as global pacing instead of DISCORD_LIMITS' window (e.g. 50/1)",
    )
    parser.add_argument(
        "--no-http",
        action="store_true",
        help="answer each message create in the bot's process after 2 ms (no discord.py "
        "request, aiohttp or socket): a run without it minus one with it is the HTTP "
        "client's CPU per message",
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fake:
        asyncio.run(serve_fake(args))
        return
    if args.child:
        logging.basicConfig(level=logging.ERROR)
        print(json.dumps(run_child(args)))
        return
    results: list[dict[str, Any]] = []
    for i in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.discord_fanout", "--child", *_passed(args)],
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(result)
        print(f"run {i + 1}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in result.items()))
    print(
        "median: "
        + ", ".join(f"{k}={_fmt(statistics.median(r[k] for r in results))}" for k in results[0])
    )


def _fmt(value: float) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
