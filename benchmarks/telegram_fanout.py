"""Telegram fan-out benchmark: one issue to 300 private chats and 50 channels against the double.

Run ``python -m benchmarks.telegram_fanout`` (``--help`` for knobs). Each run starts a fresh
Bot API double (``tests.fakes.telegram_api``, its own process, Telegram's flood limits x
``--scale``) and measures, in a fresh process of its own:

* ``ours``: the real service path, ``DigestService.post`` through the DeliveryEngine, the SQLite
  ledger and ``TelegramAdapter`` with the limits it ships (``TELEGRAM_LIMITS``);
* ``ours-window``: the same with window-safe pacing limits (a token bucket whose burst plus one
  window of refill never exceeds the double's sliding window), proposed for pacing.py;
* ``ours-nohttp``: ``ours`` with each sendMessage answered in the bot's process after 2 ms
  (:class:`Answering`: PTB, the adapter, pacing, the engine and the ledger as in ``ours``, no
  HTTP client or socket), so ``ours`` minus this is the HTTP client's CPU per message;
* ``ptb-loop``: the obvious way, a loop of ``bot.send_message`` through PTB's
  ``AIORateLimiter`` (30/s overall, 20/min per group; ``max_retries`` so nothing is lost).

Figures: ``ratio`` = ideal time / measured send phase (first to last accepted send, on the
double's clock), where the ideal is set by the double's overall limit of 30 messages per
second in any sliding window (per-chat limits do not bind: 2 parts per chat); ``wall_ratio``
uses the whole call instead (planning, ledger); ``flood_429s`` as counted by the double;
``lost`` = messages that never arrived; ``cpu_ms_per_msg``: the CPU time of the bot's process
(the client, with the engine and ledger: the double runs in a process of its own) over the
post, per message sent, and ``cpu_ratio`` its ratio to the target of 1 ms (issue #24, item 5;
the engine and ledger alone cost about 0.05 ms in benchmarks/scale.py, where a batch carries
hundreds of parts; paced at 30 a second a batch carries one or two, and ``ours-nohttp`` gives
what they cost then; ``python -m benchmarks.fanout --targets 350 --parts 2 --kind private``
gives the engine and ledger alone at this pace, with a fake adapter). The writer's own
connection on an SQLite file (digest_core/delivery/ledger/direct.py) took ``ours`` from 3.85
to 2.31 ms and ``ours-nohttp`` from 3.9 to 1.9; then a batch run as one function on
aiosqlite's thread, a send's end taking the next send's turn (delivery/fanout.py) and each
part's body encoded once (bots/telegram/request.py) took ``ours`` from 2.19 to 1.52 and
``ours-nohttp`` from 1.59 to 0.92, the HTTP client's share (``ours`` minus ``ours-nohttp``)
staying about 0.6 ms (medians of 3 interleaved runs each, December 2026). On a busier day of
the same machine (medians of 3): ``ours`` 1.66, ``ours-nohttp`` 1.11, the engine and ledger
alone at 30 a second 1.03: the client (PTB, httpx, the adapter) about 0.6 ms a message, the
rest the engine's wake-ups at a paced rate. At paid broadcast's pace (``--scale 33``, about
1,000 a second) the whole process costs 0.54 ms a message and ``ours-nohttp`` 0.29: one core
carries that rate about twice over. Then the send window's turns went out in clumps
(digest_core/delivery/pacing.py, ``clump_size``): one send at a time had cost a wake-up of the
loop for its turn, one for its answer and a transaction (a wake-up of aiosqlite's thread and
one of the loop) each, and a clump's sends share them. Medians of 3 (December 2026, the same
machine): ``ours`` 1.456 ms before (1.448-1.527, interleaved with the after runs of clumps
of 3), 0.953 with clumps of 3 (0.780-0.994), 0.611 with clumps of 5 (0.581-0.636): 0.61 of
the target of 1 ms; ``ours-nohttp`` 1.012, 0.399, 0.286. ``ratio`` 0.987 before and 0.987
after (300 private chats and 50 channels; 350 private chats 0.986, 350 channels 0.986), 0
429s, nothing lost.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import logging
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from bots.telegram.request import JsonRequest
from bots.telegram.spec import TELEGRAM_LIMITS
from digest_core.platform import PlatformLimits, Rate, TargetKind
from digest_core.testing import scaled_limits
from tests.fakes.telegram_api import DEFAULT_TOKEN, FloodLimits

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
ISSUE_DATE = "2026-11-27"  # two messages on Telegram
#: the bot's CPU per message sent (issue #24, item 5)
CPU_TARGET_MS = 1.0
PRIVATE_BASE = 10_000
CHANNEL_BASE = -1_005_000_000

#: Window-safe limits for the double's model (30 per 1 s; 3 per 3 s per private chat; 20 per
#: 60 s per group/channel): burst + rate x window <= count for every bucket; the overall one
#: leaves one message of each window for timing jitter between the bot and the API.
WINDOW_SAFE_LIMITS = PlatformLimits(
    overall=Rate(29.0, burst=1),
    per_target={
        TargetKind.PRIVATE: Rate(1 / 3, burst=2),
        TargetKind.GROUP: Rate(17 / 60, burst=3),
        TargetKind.CHANNEL: Rate(17 / 60, burst=3),
    },
)


@contextmanager
def double(scale: float, *, flood: bool = True) -> Iterator[tuple[str, httpx.Client]]:
    """A standalone Bot API double: its base_url and a client of its control API."""
    argv = [sys.executable, "-m", "tests.fakes.telegram_api", f"--scale={scale}"]
    if not flood:
        argv.append("--no-flood")
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        with httpx.Client(base_url=base_url.removesuffix("/bot"), timeout=30) as control:
            yield base_url, control
    finally:
        proc.terminate()
        proc.wait(10)


def add_chats(control: httpx.Client, privates: int, channels: int) -> tuple[list[int], list[int]]:
    users = [PRIVATE_BASE + i for i in range(privates)]
    chans = [CHANNEL_BASE - i for i in range(channels)]
    for chat in chans:
        control.post("/_fake/add_chat", json={"id": chat, "type": "channel"})
    for user in users:
        control.post("/_fake/add_chat", json={"id": user, "type": "private"})
    return users, chans


def send_phase(control: httpx.Client) -> tuple[float, int, int]:
    """(first-to-last accepted sendMessage on the double's clock, accepted sends, 429s)."""
    calls = [
        r for r in control.get("/_fake/requests").json()["result"] if r["method"] == "sendMessage"
    ]
    ok = [r["at"] for r in calls if r["status"] == 200]
    return max(ok) - min(ok), len(ok), sum(1 for r in calls if r["status"] == 429)


def ideal_seconds(messages: int, scale: float) -> float:
    """The least first-to-last time the double's overall sliding window allows."""
    limits = FloodLimits()
    return math.floor((messages - 1) / limits.global_count) * limits.global_window / scale


def write_config(tmp: Path, base_url: str, channels: list[int]) -> Path:
    archive = tmp / "archive"
    archive.mkdir()
    source = REPO / "archive" / f"{ISSUE_DATE}.txt"
    (archive / source.name).write_bytes(source.read_bytes())
    path = tmp / "bench.toml"
    path.write_text(
        "\n".join([
            f'archive_dir = "{archive}"',
            f'database_url = "sqlite+aiosqlite:///{tmp / "bench.db"}"',
            'log_level = "WARNING"',
            "[schedule]",
            "enabled = false",
            "[telegram]",
            f"channels = {json.dumps([str(c) for c in channels])}",
            f'api_base_url = "{base_url}"',
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    return path


class Answering(JsonRequest):
    """``ours-nohttp``'s request: a sendMessage is answered here, after :data:`ANSWER_SECONDS`
    (the loopback's latency, about), with a new message id; other calls go to the double."""

    ANSWER_SECONDS = 0.002
    _ids = itertools.count(1)

    async def do_request(
        self, url: str, method: str, *args: Any, **kwargs: Any
    ) -> tuple[int, bytes]:
        if not url.endswith("/sendMessage"):
            return await super().do_request(url, method, *args, **kwargs)
        await asyncio.sleep(self.ANSWER_SECONDS)
        return 200, b'{"ok":true,"result":{"message_id":%d}}' % next(self._ids)


async def run_ours(
    args: argparse.Namespace, limits: PlatformLimits, *, http: bool = True
) -> dict[str, float]:
    import datetime as dt
    import os

    from bots.registry import load_settings
    from bots.runtime import open_service
    from bots.telegram import TelegramAdapter
    from bots.telegram import adapter as telegram_adapter

    if not http:  # the adapter builds its request from this name
        telegram_adapter.JsonRequest = Answering  # type: ignore[misc]

    os.environ["DIGEST_BOT_TELEGRAM__TOKEN"] = DEFAULT_TOKEN
    with double(args.scale) as (base_url, control), tempfile.TemporaryDirectory() as tmp:
        users, chans = add_chats(control, args.privates, args.channels)
        settings = load_settings(write_config(Path(tmp), base_url, chans))
        async with open_service(settings, only="telegram") as service:
            for user in users:
                await service.ledger.subscribe("telegram", str(user))
            adapter = service.platforms["telegram"]
            assert isinstance(adapter, TelegramAdapter)
            adapter.limits = scaled_limits(limits, args.scale)
            await adapter.start(service, receive=False)
            try:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                reports = await service.post(dt.date.fromisoformat(ISSUE_DATE))
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            finally:
                await adapter.stop()
        phase, sent, floods = send_phase(control) if http else (wall, reports[0].sent, 0)
    report = reports[0]
    parts = len(report.targets) and max(t.sent + t.failed + t.skipped for t in report.targets)
    expected = (args.privates + args.channels) * parts
    ideal = ideal_seconds(expected, args.scale)
    return {
        "messages": sent,
        "send_phase_s": phase,
        "wall_s": wall,
        "ideal_s": ideal,
        "ratio": ideal / phase,
        "wall_ratio": ideal / wall,
        "flood_429s": floods,
        "lost": expected - report.sent,
        **_cpu(cpu, report.sent),
    }


def _cpu(seconds: float, messages: int) -> dict[str, float]:
    """The bot process's CPU per message sent, and its ratio to :data:`CPU_TARGET_MS`."""
    per = seconds * 1000 / max(messages, 1)
    return {"cpu_ms_per_msg": per, "cpu_ratio": per / CPU_TARGET_MS}


async def run_ptb_loop(args: argparse.Namespace) -> dict[str, float]:
    from telegram.ext import AIORateLimiter, ApplicationBuilder

    from bots.telegram.wire import split_payload
    from digest_core.archive import Archive
    from digest_core.rendering import RenderOptions, render
    from digest_core.rendering import telegram as telegram_render

    issue = Archive(REPO / "archive").on(__import__("datetime").date.fromisoformat(ISSUE_DATE))
    messages = render(issue, telegram_render, options=RenderOptions(buttons=True))
    with double(args.scale) as (base_url, control):
        users, chans = add_chats(control, args.privates, args.channels)
        limiter = AIORateLimiter(
            overall_max_rate=30,
            overall_time_period=1 / args.scale,
            group_max_rate=20,
            group_time_period=60 / args.scale,
            max_retries=args.ptb_retries,
        )
        app = (
            ApplicationBuilder()
            .token(DEFAULT_TOKEN)
            .base_url(base_url)
            .rate_limiter(limiter)
            .build()
        )
        lost = 0
        async with app:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for chat in [*chans, *users]:
                for message in messages:
                    kwargs, extra = split_payload(message.payload)
                    try:
                        await app.bot.send_message(chat, **kwargs, api_kwargs=extra or None)
                    except Exception as exc:  # the obvious loop logs and moves on
                        log.warning("%s: %s", chat, exc)
                        lost += 1
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        phase, sent, floods = send_phase(control)
    expected = (args.privates + args.channels) * len(messages)
    ideal = ideal_seconds(expected, args.scale)
    return {
        "messages": sent,
        "send_phase_s": phase,
        "wall_s": wall,
        "ideal_s": ideal,
        "ratio": ideal / phase,
        "wall_ratio": ideal / wall,
        "flood_429s": floods,
        "lost": lost,
        **_cpu(cpu, expected - lost),
    }


async def run_child(args: argparse.Namespace) -> dict[str, float]:
    if args.variant == "ours":
        return await run_ours(args, TELEGRAM_LIMITS)
    if args.variant == "ours-nohttp":
        return await run_ours(args, TELEGRAM_LIMITS, http=False)
    if args.variant == "ours-window":
        overall = Rate(args.window_rate, burst=1)
        return await run_ours(args, replace(WINDOW_SAFE_LIMITS, overall=overall))
    return await run_ptb_loop(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--privates", type=int, default=300)
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--scale", type=float, default=1.0, help="the double's limits x this")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--variants", default="ours,ours-window,ptb-loop", help="comma-separated, in run order"
    )
    parser.add_argument("--ptb-retries", type=int, default=5, help="AIORateLimiter max_retries")
    parser.add_argument(
        "--window-rate", type=float, default=29.0, help="ours-window: overall messages/s"
    )
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        logging.basicConfig(level=logging.ERROR)
        print(json.dumps(asyncio.run(run_child(args))))
        return
    variants = args.variants.split(",")
    if "ptb-loop" in variants and importlib.util.find_spec("aiolimiter") is None:
        print("ptb-loop skipped: pip install 'python-telegram-bot[rate-limiter]' to run it")
        variants.remove("ptb-loop")
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for i in range(args.runs):
        for variant in variants:
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.telegram_fanout", "--child",
                 f"--variant={variant}", f"--privates={args.privates}",
                 f"--channels={args.channels}", f"--scale={args.scale}",
                 f"--ptb-retries={args.ptb_retries}", f"--window-rate={args.window_rate}"],
                check=True, capture_output=True, text=True, cwd=REPO,
            ).stdout  # fmt: skip
            result = json.loads(out.strip().splitlines()[-1])
            results[variant].append(result)
            figures = ", ".join(f"{k}={v:.4g}" for k, v in result.items())
            print(f"run {i + 1} {variant:>11}: {figures}", flush=True)
    print(
        f"median of {args.runs} runs: {args.privates} private chats + {args.channels} channels, "
        f"issue {ISSUE_DATE}, the double's Telegram limits x{args.scale:g}"
    )
    for variant, rows in results.items():
        figures = ", ".join(f"{k}={statistics.median(r[k] for r in rows):.4g}" for k in rows[0])
        print(f"  {variant:>11}: {figures}")


if __name__ == "__main__":
    main()
