"""Telegram command benchmark: /today from 200 users at once, the real bot against the double.

Run ``python -m benchmarks.telegram_commands`` (``--help`` for knobs). Each run is a fresh
process holding the real service and ``TelegramAdapter`` (long polling, concurrent updates);
the Bot API double runs as its own process with Telegram's flood limits x ``--scale``, so the
peak RSS is the bot's (plus this small driver). All users' commands are injected at once.

``--files N`` serves from an archive of N issue files (ten years is 3,650), generated in a
temporary folder, instead of the bundled 5; ``--command search`` sends a ``/search`` that
finds nothing instead of ``/today``.

Figures per run: ``bot_p50_ms``/``bot_p99_ms``: bot-side latency of one command, from the
handler's start to its last reply accepted, minus the time spent waiting for the pacing budget
(Telegram allows 30 messages/s, so 200 users x N messages take N x 200 / 30 s whatever the bot
does: that is the double's pacing, excluded); ``total_p99_ms`` includes it; ``replies`` and
``lost`` count reply messages; ``flood_429s`` as counted by the double; ``peak_rss_mb``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.telegram_fanout import REPO, WINDOW_SAFE_LIMITS, double
from digest_core.testing import build_index, scaled_limits
from tests.fakes.telegram_api import DEFAULT_TOKEN

log = logging.getLogger(__name__)

USER_BASE = 20_000
MISS = "量子纠缠"  # no issue mentions it


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _config(tmp: Path, base_url: str, archive: Path) -> Path:
    path = tmp / "bench.toml"
    path.write_text(
        "\n".join([
            f'archive_dir = "{archive}"',
            f'database_url = "sqlite+aiosqlite:///{tmp / "bench.db"}"',
            'log_level = "WARNING"',
            "[schedule]",
            "enabled = false",
            "[telegram]",
            f'api_base_url = "{base_url}"',
            "poll_timeout_seconds = 1",
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    return path


async def run_once(args: argparse.Namespace) -> dict[str, float]:
    from bots.registry import load_settings
    from bots.runtime import open_service
    from bots.telegram import TelegramAdapter
    from bots.telegram.handlers import AnswerTiming

    os.environ["DIGEST_BOT_TELEGRAM__TOKEN"] = DEFAULT_TOKEN
    timings: list[AnswerTiming] = []
    done = asyncio.Event()

    def answered(timing: AnswerTiming) -> None:
        timings.append(timing)
        if len(timings) >= args.users:
            done.set()

    users = [USER_BASE + i for i in range(args.users)]
    with double(args.scale) as (base_url, control), tempfile.TemporaryDirectory() as tmp:
        for user in users:
            control.post("/_fake/add_chat", json={"id": user, "type": "private"})
        archive = REPO / "archive"
        if args.files != 5:
            from benchmarks.archive import make_archive

            archive = Path(tmp, "archive")
            archive.mkdir()
            make_archive(archive, args.files)
        settings = load_settings(_config(Path(tmp), base_url, archive))
        async with open_service(settings, only="telegram") as service:
            adapter = service.platforms["telegram"]
            assert isinstance(adapter, TelegramAdapter)
            if args.limits == "window":
                adapter.limits = WINDOW_SAFE_LIMITS
            adapter.limits = scaled_limits(adapter.limits, args.scale)
            adapter.on_answered = answered
            # the first command warms the archive as a running bot's is (the listing; with an
            # index, wait for it to be built)
            parts = len((await service.commands.handle(_request(args.command))).messages)
            if args.command == "search":
                await asyncio.to_thread(build_index, service.archive)
            await adapter.start(service)
            try:
                async with httpx.AsyncClient(base_url=control.base_url, timeout=30) as inject:
                    text = "/today" if args.command == "today" else f"/search {MISS}"
                    started = time.perf_counter()
                    await asyncio.gather(*(
                        inject.post("/_fake/inject_message",
                                    json={"chat_id": u, "from_user": u, "text": text})
                        for u in users
                    ))  # fmt: skip
                    await asyncio.wait_for(done.wait(), args.timeout)
                    wall = time.perf_counter() - started
            finally:
                await adapter.stop()
        calls = [r for r in control.get("/_fake/requests").json()["result"]
                 if r["method"] == "sendMessage"]  # fmt: skip
    replies = sum(1 for r in calls if r["status"] == 200)
    bot_side = [(t.total - t.paced) * 1000 for t in timings]
    total = [t.total * 1000 for t in timings]
    return {
        "users": len(timings),
        "bot_p50_ms": _percentile(bot_side, 0.5),
        "bot_p99_ms": _percentile(bot_side, 0.99),
        "bot_max_ms": max(bot_side),
        "total_p50_ms": _percentile(total, 0.5),
        "total_p99_ms": _percentile(total, 0.99),
        "wall_s": wall,
        "replies": replies,
        "lost": args.users * parts - replies,
        "flood_429s": sum(1 for r in calls if r["status"] == 429),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _request(command: str) -> Any:
    from digest_core.commands import Request
    from digest_core.rendering import telegram as telegram_render

    args = () if command == "today" else (MISS,)
    return Request(command, args, platform="telegram", flavor=telegram_render, user="0", chat="0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--scale", type=float, default=1.0, help="the double's limits x this")
    parser.add_argument(
        "--limits", choices=["shipped", "window"], default="shipped",
        help="the adapter's pacing: TELEGRAM_LIMITS or the window-safe proposal",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=5, help="issue files in the archive")
    parser.add_argument("--command", choices=["today", "search"], default="today")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        logging.basicConfig(level=logging.ERROR)
        print(json.dumps(asyncio.run(run_once(args))))
        return
    results = []
    for i in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.telegram_commands", "--child",
             f"--users={args.users}", f"--scale={args.scale}", f"--limits={args.limits}",
             f"--timeout={args.timeout}", f"--files={args.files}",
             f"--command={args.command}"],
            check=True, capture_output=True, text=True, cwd=REPO,
        ).stdout  # fmt: skip
        result = json.loads(out.strip().splitlines()[-1])
        results.append(result)
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.4g}" for k, v in result.items()), flush=True)
    print(
        f"median of {args.runs} runs: /{args.command} from {args.users} users at once, "
        f"{args.files} issue files, "
        f"the double's Telegram limits x{args.scale:g}, {args.limits} pacing limits:"
    )
    for key in results[0]:
        print(f"  {key:>13}: {statistics.median(r[key] for r in results):.4g}")


if __name__ == "__main__":
    main()
