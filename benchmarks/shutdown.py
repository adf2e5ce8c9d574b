"""Shutdown benchmark: seconds from SIGTERM to exit of `digest-bot run` while it is answering.

Run ``python -m benchmarks.shutdown`` (``--help`` for knobs). Each run starts the Telegram Bot
API double and the real bot as processes, makes the bot busy answering, sends SIGTERM and
times the exit. Two scenarios:

- ``held``: one reply whose sendMessage the double holds for two minutes (a stuck request);
- ``paced``: an admin sends ``--commands`` /issue commands in a group, so the replies queue
  behind Telegram's group limit (17/min with a burst of 3): a huge reply.

Figures: median seconds to exit over ``--runs`` runs, its ratio to the 10 s budget, and how
many users were told the bot is restarting.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.telegram_api import DEFAULT_TOKEN

REPO = Path(__file__).resolve().parents[1]
BUDGET = 10.0
ADMIN, READER, GROUP = 42, 5001, -4001
DAY = "2026-11-27"  # two messages on Telegram


def _config(tmp: Path, base_url: str) -> Path:
    path = tmp / "bench.toml"
    path.write_text(
        "\n".join([
            f'archive_dir = "{REPO / "archive"}"',
            f'database_url = "sqlite+aiosqlite:///{tmp / "bench.db"}"',
            'log_level = "WARNING"',
            "[schedule]",
            "enabled = false",
            "[telegram]",
            f'api_base_url = "{base_url}/bot"',
            f"admins = [{ADMIN}]",
            "poll_timeout_seconds = 1",
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    return path


def _until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def _requests(api: httpx.Client) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = api.get("/_fake/requests").json()["result"]
    return result


def one_run(scenario: str, commands: int) -> tuple[float, int]:
    """(seconds from SIGTERM to exit, restart notices sent)."""
    double = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.telegram_api"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert double.stdout is not None
        root = double.stdout.readline().strip().removesuffix("/bot")
        with tempfile.TemporaryDirectory() as tmp, httpx.Client(base_url=root) as api:
            api.post("/_fake/add_chat", json={"id": GROUP, "type": "group"})
            api.post("/_fake/add_chat", json={"id": READER, "type": "private"})
            config = _config(Path(tmp), root)
            env = {**os.environ, "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN}
            bot = subprocess.Popen(
                [sys.executable, "-m", "bots.cli", "run", "--config", str(config)],
                cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                _until(lambda: any(r["method"] == "getUpdates" for r in _requests(api)), "start")
                if scenario == "held":
                    api.post(
                        "/_fake/fail_next",
                        json={"chat_id": READER, "kind": "slow", "delay": 120,
                              "method": "sendMessage"},
                    )  # fmt: skip
                    api.post(
                        "/_fake/inject_message",
                        json={"chat_id": READER, "from_user": READER, "text": f"/issue {DAY}"},
                    )
                    wanted = 1
                else:
                    for _ in range(commands):
                        api.post(
                            "/_fake/inject_message",
                            json={"chat_id": GROUP, "from_user": ADMIN, "text": f"/issue {DAY}"},
                        )
                    wanted = 4  # the burst went out; the rest waits for the group's budget

                def replying() -> bool:
                    sent = [r for r in _requests(api) if r["method"] == "sendMessage"]
                    return len(sent) >= wanted

                _until(replying, "replies")
                began = time.monotonic()
                bot.send_signal(signal.SIGTERM)
                bot.wait(300)
                took = time.monotonic() - began
            finally:
                if bot.poll() is None:
                    bot.kill()
                    bot.wait()
            sent = api.get("/_fake/sent").json()["result"]
            told = sum("The bot is restarting" in str(m.get("text")) for m in sent)
            return took, told
    finally:
        double.send_signal(signal.SIGTERM)
        double.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--commands", type=int, default=8, help="paced: /issue commands")
    parser.add_argument("--scenario", choices=["held", "paced", "both"], default="both")
    args = parser.parse_args()
    scenarios = ["held", "paced"] if args.scenario == "both" else [args.scenario]
    for scenario in scenarios:
        runs = [one_run(scenario, args.commands) for _ in range(args.runs)]
        seconds = statistics.median(r[0] for r in runs)
        told = statistics.median(r[1] for r in runs)
        print(
            f"{scenario:>6}: SIGTERM to exit median {seconds:.1f} s over {args.runs} runs "
            f"({', '.join(f'{r[0]:.1f}' for r in runs)}), {seconds / BUDGET:.2f} x the "
            f"{BUDGET:.0f} s budget; restart notices sent: {told:g}"
        )


if __name__ == "__main__":
    main()
