"""Email benchmark: one issue to 10,000 readers through a local SMTP server, pacing off.

Run ``python -m benchmarks.email`` (``--readers N``, ``--dkim``). The relay is aiosmtpd in
its own process (it counts messages and keeps no bytes), so the figures are this process's:
the real service's ``post`` on a fresh SQLite ledger, the email adapter building each reader's
mail and sending it over its one reused connection. Pacing is off (10^9 messages/s). Printed:

* messages per wall second of the delivery — target >= 500;
* CPU ms per message (user + system of this process over the delivery) — target <= 1;
* peak RSS of this process — target <= 200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import os
import resource
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECRET = "benchmark-secret-of-enough-length"
DAY = dt.date(2026, 11, 30)


def relay(port: int) -> None:
    """The relay process: accept everything, count, print ``ready``."""
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
    print(f"  relay process CPU {used.ru_utime + used.ru_stime:8.1f} s for {Count.n} messages",
          file=sys.stderr)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(readers: int, dkim: Path | None, connections: int, port: int) -> None:
    from sqlalchemy import insert

    from bots import registry
    from bots.email.addresses import normalise, reader_id
    from bots.runtime import open_service
    from digest_core.clock import SystemClock
    from digest_core.delivery.ledger.schema import subscribers

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        extra = ""
        if dkim:
            extra = f'dkim_selector = "s1"\ndkim_domain = "example.org"\ndkim_key_file = "{dkim}"\n'
        config = tmp_path / "digest-bot.toml"
        config.write_text(
            f'archive_dir = "{ROOT / "archive"}"\n'
            f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n'
            f'[email]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
            'from = "AI 技术日报 <digest@example.org>"\npublic_url = "https://d.example/"\n'
            f'address_book = "{tmp_path / "book.sqlite3"}"\n'
            f"rate_per_second = 1e9\nburst = 1000000\nconnections = {connections}\n{extra}",
            encoding="utf-8",
        )
        os.environ["DIGEST_BOT_EMAIL__SECRET_KEY"] = SECRET
        settings = registry.load_settings(config)
        addresses = [f"reader{n}@example.net" for n in range(readers)]
        ids = [reader_id(a, SECRET) for a in addresses]
        with sqlite3.connect(tmp_path / "book.sqlite3") as book:
            book.execute(
                "CREATE TABLE readers (id TEXT PRIMARY KEY, address TEXT NOT NULL UNIQUE,"
                " confirmed_at TEXT NOT NULL)"
            )
            book.executemany(
                "INSERT INTO readers VALUES (?, ?, '2026-01-01')",
                [(i, normalise(a)) for i, a in zip(ids, addresses, strict=True)],
            )
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
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            wall0 = time.perf_counter()
            [report] = await service.post(DAY, platforms=["email"])
            wall = time.perf_counter() - wall0
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            await adapter.stop()
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    sent = report.sent
    print(
        f"readers {readers}, dkim {'on' if dkim else 'off'}, {connections} connections: "
        f"sent {sent} in {wall:.1f} s"
    )
    print(f"  messages/s        {sent / wall:8.0f}   (target >= 500)")
    print(f"  CPU ms/message    {cpu * 1000 / max(sent, 1):8.2f}   (target <= 1)")
    print(f"  peak RSS MB       {cpu1.ru_maxrss / 1024:8.0f}   (target <= 200)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=10_000)
    parser.add_argument("--dkim", action="store_true", help="sign every mail (2048-bit RSA)")
    parser.add_argument("--connections", type=int, default=8, help="SMTP connections")
    parser.add_argument("--relay", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        relay(args.relay)
        return
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
            asyncio.run(run(args.readers, key if args.dkim else None, args.connections, port))
        finally:
            server.communicate("")


if __name__ == "__main__":
    main()
