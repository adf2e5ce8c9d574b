"""Email benchmark: one issue to 10,000 readers through a local SMTP server, pacing off.

Run ``python -m benchmarks.email`` (``--readers N``, ``--runs N``, ``--connections N``,
``--dkim``). The relay is aiosmtpd in its own process (it counts messages and keeps no bytes),
so the figures are the bot's: the real service's ``post`` on a fresh SQLite ledger, the email
adapter building each reader's mail and sending it over its pool of reused connections. Each
run is a fresh process (its peak RSS is that run's) with a relay of its own; pacing is off
(10^9 messages/s). Per run and as medians over the runs, with their ratio to the targets:

* messages per wall second of the delivery — target >= 500 (the relay shares the machine:
  its CPU, printed too, is not the bot's but slows it where cores are few);
* CPU ms per message: user + system of the bot's process (the ledger's thread included) over
  the delivery — target <= 1;
* peak RSS of the bot's process — target <= 200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import json
import os
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SECRET = "benchmark-secret-of-enough-length"
DAY = dt.date(2026, 11, 30)
#: figure -> (target, True when higher is better)
TARGETS = {"messages_per_s": (500.0, True), "cpu_ms_per_message": (1.0, False),
           "peak_rss_mb": (200.0, False)}  # fmt: skip


def relay(port: int) -> None:
    """The relay process: accept everything, count, print ``ready``, then its CPU seconds."""
    from aiosmtpd.controller import Controller

    class Count:
        n = 0

        async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
            Count.n += 1
            return "250 OK"

    controller = Controller(Count(), hostname="127.0.0.1", port=port, server_hostname="relay")
    controller.start()
    print("ready", flush=True)
    sys.stdin.read()
    controller.stop()
    used = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{used.ru_utime + used.ru_stime:.2f}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp: Path, port: int, connections: int, dkim: Path | None) -> Path:
    extra = (
        f'dkim_selector = "s1"\ndkim_domain = "example.org"\ndkim_key_file = "{dkim}"\n'
        if dkim
        else ""
    )
    config = tmp / "digest-bot.toml"
    config.write_text(
        f'archive_dir = "{ROOT / "archive"}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp / "ledger.db"}"\n'
        f'[email]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
        'from = "AI 技术日报 <digest@example.org>"\npublic_url = "https://d.example/"\n'
        f'address_book = "{tmp / "book.sqlite3"}"\n'
        f"rate_per_second = 1e9\nburst = 1000000\nconnections = {connections}\n{extra}",
        encoding="utf-8",
    )
    return config


def _address_book(path: Path, readers: int) -> list[str]:
    """``readers`` confirmed readers in the address book, as the web flow leaves them; ids."""
    from bots.email.addresses import normalise, reader_id

    addresses = [f"reader{n}@example.net" for n in range(readers)]
    ids = [reader_id(a, SECRET) for a in addresses]
    with sqlite3.connect(path) as book:
        book.execute(
            "CREATE TABLE readers (id TEXT PRIMARY KEY, address TEXT NOT NULL UNIQUE,"
            " confirmed_at TEXT NOT NULL)"
        )
        book.executemany(
            "INSERT INTO readers VALUES (?, ?, '2026-01-01')",
            [(i, normalise(a)) for i, a in zip(ids, addresses, strict=True)],
        )
    return ids


async def run(readers: int, dkim: Path | None, connections: int, port: int) -> dict[str, float]:
    """One delivery to ``readers`` through the relay on ``port``: the figures."""
    from sqlalchemy import insert

    from bots import registry
    from bots.runtime import open_service
    from digest_core.clock import SystemClock
    from digest_core.delivery.ledger.schema import subscribers

    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp), port, connections, dkim)
        os.environ["DIGEST_BOT_EMAIL__SECRET_KEY"] = SECRET
        settings = registry.load_settings(config)
        ids = _address_book(Path(tmp) / "book.sqlite3", readers)
        since = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        async with open_service(settings, clock=SystemClock(), out=io.StringIO()) as service:
            async with service.ledger._tx() as conn:
                await conn.execute(
                    insert(subscribers),
                    [{"platform": "email", "chat_id": i, "active": True, "since": since}
                     for i in ids],
                )  # fmt: skip
            adapter = service.platforms["email"]
            await adapter.start(service)
            cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            [report] = await service.post(DAY, platforms=["email"])
            wall = time.perf_counter() - wall0
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            await adapter.stop()
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if report.sent != readers:
        raise RuntimeError(f"sent {report.sent} of {readers}")
    return {
        "messages_per_s": readers / wall,
        "cpu_ms_per_message": cpu * 1000 / readers,
        "peak_rss_mb": cpu1.ru_maxrss / 1024,
        "wall_s": wall,
    }


def child(args: argparse.Namespace) -> dict[str, float]:
    """One run in this process, with its relay and (``--dkim``) its key: the figures."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.email", "--relay", str(port)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    with tempfile.TemporaryDirectory() as keys:
        key = Path(keys) / "dkim.pem"
        if args.dkim:
            subprocess.run(["openssl", "genrsa", "-traditional", "-out", str(key), "2048"],
                           check=True, capture_output=True)  # fmt: skip
        try:
            figures = asyncio.run(
                run(args.readers, key if args.dkim else None, args.connections, port)
            )
        finally:
            relay_cpu, _ = server.communicate("")
    figures["relay_cpu_ms_per_message"] = float(relay_cpu.strip()) * 1000 / args.readers
    return figures


def _ratio(name: str, value: float) -> str:
    if name not in TARGETS:
        return ""
    target, higher = TARGETS[name]
    return f"  ({value / target:.2f} of the target {'>=' if higher else '<='} {target:g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dkim", action="store_true", help="sign every mail (2048-bit RSA)")
    parser.add_argument("--connections", type=int, default=8, help="SMTP connections")
    parser.add_argument("--relay", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        relay(args.relay)
        return
    if args.child:
        print(json.dumps(child(args)))
        return
    argv = [f"--readers={args.readers}", f"--connections={args.connections}", "--child"]
    results: list[dict[str, Any]] = []
    for n in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.email", *argv, *(["--dkim"] if args.dkim else [])],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        results.append(json.loads(out))
        print(f"run {n + 1}: " + ", ".join(f"{k} {v:.3g}" for k, v in results[-1].items()))
    print(
        f"median of {len(results)} runs: {args.readers} readers, dkim "
        f"{'on' if args.dkim else 'off'}, {args.connections} connections, pacing off"
    )
    for name in results[0]:
        value = statistics.median(r[name] for r in results)
        print(f"  {name:>26} {value:9.3f}{_ratio(name, value)}")


if __name__ == "__main__":
    main()
