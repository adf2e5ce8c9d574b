"""The editor's dashboard: each page's server time on a year of history and 100k subscribers,
and the event loop while a post runs and the dashboard is read.

Run ``python -m benchmarks.dashboard`` (``--subscribers``, ``--part-days``, ``--runs``;
``--ledger-cache DIR`` keeps the populated ledger there and copies it in next time). The
ledger (an SQLite file) gets: ``--subscribers`` readers who joined over the last year (5%
left again), their preferences and follows for a tenth, a year of audit entries (20 a day),
of readers' counts (commands, section buttons, search hits: ~100 rows a day) and of link
clicks (every story's links on two platforms, on three days each), and the part rows of the
last ``--part-days`` days' posts to every subscriber (what ``[ledger] keep_days`` keeps; older
days are pruned into day summaries). The archive holds 365 issues.

It prints, per page, the median over ``--runs`` of the time from request to the last byte
over loopback HTTP (the real endpoint, logged in) against the target of 200 ms; then it posts
a new issue to every subscriber (the real engine and ledger, a platform that accepts at once)
while a client reads the Deliveries page's JSON and the other pages in a loop, and prints the
loop's longest stall (a probe task sleeping 5 ms) against 50 ms, beside the longest stall of
the same post with nobody reading and of the dashboard read with no post. The reading is an
editor's: the Deliveries page's JSON every second, another page every fifth second. Stalls
measure the machine too: on a loaded one (the load average is printed), a 5 ms sleep
overshoots because the process waits for a core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import random
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
from sqlalchemy import insert

from benchmarks.archive import TODAY, make_archive
from benchmarks.fanout import StallProbe
from benchmarks.scale import UNLIMITED
from bots.dashboard import Pages
from bots.dashboard.auth import Access
from bots.http import HttpEndpoint, Probe
from digest_core.archive import Archive
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.ledger.schema import (
    audit,
    deliveries,
    follows,
    link_clicks,
    parts,
    preferences,
    subscribers,
    usage_counts,
)
from digest_core.platform import PartKey, Target
from digest_core.publishing.schedule import ScheduleConfig
from digest_core.rendering import Message, RenderOptions
from digest_core.rendering import telegram as telegram_render
from digest_core.service.leadership import Leadership
from digest_core.service.root import DigestService
from digest_core.testing import PinnedClock

ZONE = ZoneInfo("Asia/Shanghai")
NOW = dt.datetime.combine(TODAY, dt.time(12), tzinfo=ZONE)
PAGE_TARGET_MS = 200.0
STALL_TARGET_MS = 50.0
PASSWORD = "benchmark"
PAGES = (
    "/admin/today",
    "/admin/deliveries",
    "/admin/deliveries.json",
    f"/admin/deliveries?day={TODAY - dt.timedelta(days=1)}",
    f"/admin/deliveries.json?day={TODAY - dt.timedelta(days=1)}",
    "/admin/chart/timeline.svg?delivery=1&platform=telegram",
    "/admin/audience",
    "/admin/chart/subscribers.svg",
    "/admin/chart/commands.svg",
    "/admin/stories",
    "/admin/chart/stories.svg",
    f"/admin/stories?issue={TODAY - dt.timedelta(days=1)}",
    "/admin/audit",
    "/admin/audit?action=repost",
    "/admin/audit?who=telegram:42",
    f"/admin/audit?day={TODAY - dt.timedelta(days=200)}",
)
#: what a client reads over and over while the post runs: the live page and the others
READ_DURING_POST = (
    f"/admin/deliveries.json?day={TODAY}",
    "/admin/today",
    f"/admin/deliveries.json?day={TODAY}",
    "/admin/audience",
    f"/admin/deliveries.json?day={TODAY}",
    "/admin/audit",
    f"/admin/deliveries.json?day={TODAY}",
    "/admin/stories",
)
_CHUNK = 5000


class NullAdapter:
    """A platform that accepts every message at once (no pacing: the ledger and the engine
    are what is measured), with no channels: its targets are the subscribers."""

    name = "telegram"
    flavor = telegram_render
    limits = UNLIMITED
    post_options = RenderOptions(buttons=True)
    subscriptions = True

    def __init__(self) -> None:
        self.count = 0

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        self.count += 1
        if self.count % 500 == 0:
            await asyncio.sleep(0)
        return str(self.count)

    def channel_targets(self) -> list[Target]:
        return []

    async def alert_admins(self, text: str) -> int:
        return 0


class LoopWork:
    """The event loop thread's own CPU time per callback, the longest per coroutine (a
    task's step is named by its task's coroutine: ``RequestHandler.start`` is a page being
    answered, the engine's are the post's). CPU, not wall time: a process waiting for a core
    on a loaded machine runs nothing meanwhile, so this is the stall its own work made (a
    garbage collection counts for the callback it interrupted)."""

    def __init__(self) -> None:
        self.worst: dict[str, float] = {}

    @contextlib.contextmanager
    def running(self) -> Iterator[LoopWork]:
        self.worst = {}
        original = asyncio.events.Handle._run
        worst = self.worst

        def _run(handle: asyncio.Handle) -> None:
            t0 = time.thread_time()
            try:
                original(handle)
            finally:
                spent = time.thread_time() - t0
                if spent > 0.001:
                    key = _label(handle)
                    worst[key] = max(worst.get(key, 0.0), spent)

        setattr(asyncio.events.Handle, "_run", _run)  # noqa: B010
        try:
            yield self
        finally:
            setattr(asyncio.events.Handle, "_run", original)  # noqa: B010

    def top(self, n: int = 4) -> str:
        found = sorted(self.worst.items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{k} {v * 1000:.1f}" for k, v in found) or "none over 1 ms"

    def pages(self) -> float:
        """The longest callback of the endpoint's request handling (ms)."""
        return 1000 * max((v for k, v in self.worst.items() if k.startswith(_WEB)), default=0.0)


_WEB = ("RequestHandler.", "web_protocol")


def _label(handle: asyncio.Handle) -> str:
    callback = handle._callback  # type: ignore[attr-defined]
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        name = str(getattr(coro, "__qualname__", type(coro).__name__))
        frame = getattr(coro, "cr_frame", None)
        request = None if frame is None else frame.f_locals.get("request")
        path = getattr(request, "path", None)
        return name if path is None else f"{name} {path}"
    return str(getattr(callback, "__qualname__", type(callback).__name__))


async def _bulk(ledger: Ledger, table: Any, rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), _CHUNK):
        async with ledger._tx() as conn:
            await conn.execute(insert(table), rows[start : start + _CHUNK])


async def populate(ledger: Ledger, archive: Archive, n: int, part_days: int) -> None:
    """A year of history (see the module docstring)."""
    rng = random.Random(7)
    start = dt.datetime.combine(TODAY - dt.timedelta(days=365), dt.time(), dt.UTC)
    year = 365 * 86400
    readers = []
    for i in range(n):
        since = start + dt.timedelta(seconds=rng.randrange(year))
        until = since + dt.timedelta(days=rng.randrange(1, 60)) if i % 20 == 0 else None
        readers.append({"platform": "telegram", "chat_id": str(10**9 + i), "active": until is None,
                        "since": since, "until": until})  # fmt: skip
    await _bulk(ledger, subscribers, readers)
    await _bulk(ledger, preferences, [
        {"platform": "telegram", "chat_id": str(10**9 + i), "at": f"{7 + i % 4:02d}:30",
         "zone": None, "format": ("full", "compact", "headline")[i % 3], "updated_at": start}
        for i in range(0, n, 10)
    ])  # fmt: skip
    await _bulk(ledger, follows, [
        {"platform": "telegram", "chat_id": str(10**9 + i), "word": ("缓存", "推理", "训练")[i % 3],
         "created_at": start}
        for i in range(0, n, 20)
    ])  # fmt: skip
    await _history(ledger, archive, rng)
    await _parts(ledger, n, part_days)


async def _history(ledger: Ledger, archive: Archive, rng: random.Random) -> None:
    """A year of audit entries, readers' counts and link clicks."""
    entries, counts, clicks = [], [], []
    commands = ("today", "help", "search", "brief", "briefs", "subscribe", "settings", "issue")
    for d in range(365):
        day = TODAY - dt.timedelta(days=d)
        at = dt.datetime.combine(day, dt.time(1), dt.UTC)
        for k in range(20):
            entries.append({"at": at + dt.timedelta(minutes=k), "platform": "telegram",
                            "user_id": str(42 + k % 3), "action": ("repost", "approve", "correct",
                            "status")[k % 4], "args": '{"args": []}', "allowed": True,
                            "outcome": "ok"})  # fmt: skip
        for platform in ("telegram", "discord"):
            counts += [{"day": day, "platform": platform, "kind": "command", "key": c,
                        "n": rng.randrange(50, 500)} for c in commands]  # fmt: skip
            counts += [{"day": day, "platform": platform, "kind": "section",
                        "key": f"{day}:{s}", "n": rng.randrange(5, 80)}
                       for s in ("headline", "briefs", "classic")]  # fmt: skip
            counts += [{"day": day, "platform": platform, "kind": "found",
                        "key": f"{day - dt.timedelta(days=rng.randrange(30))}:brief-{b}",
                        "n": rng.randrange(1, 9)} for b in range(1, 15)]  # fmt: skip
    for entry in archive.list():
        issue = entry.issue
        if issue is None:
            continue
        from digest_core.service.dashboard import stories_of

        for story, item in stories_of(issue):
            for link in range(1, len(item.links) + 1):
                for platform in ("telegram", "discord"):
                    for later in range(3):
                        clicks.append({"issue_date": issue.date, "story": story, "link": link,
                                       "platform": platform,
                                       "day": issue.date + dt.timedelta(days=later),
                                       "clicks": rng.randrange(1, 40)})  # fmt: skip
    await _bulk(ledger, audit, entries)
    await _bulk(ledger, usage_counts, counts)
    await _bulk(ledger, link_clicks, clicks)


async def _parts(ledger: Ledger, n: int, days: int) -> None:
    """The part rows of the last ``days`` days' posts to every subscriber (sent, a few
    failed)."""
    for d in range(1, days + 1):
        day = TODAY - dt.timedelta(days=d)
        at = dt.datetime.combine(day, dt.time(0), dt.UTC)
        async with ledger._tx() as conn:
            result = await conn.execute(insert(deliveries).values(
                issue_date=day, revision=f"r{d:011d}", platform="telegram", generation=1,
                forced=False, parts=1, created_at=at))  # fmt: skip
            (delivery_id,) = result.inserted_primary_key or (0,)
        rows = [
            {"delivery_id": delivery_id, "target": str(10**9 + i), "kind": "private", "part": 0,
             "state": "failed" if i % 997 == 0 else "sent", "message_id": str(i),
             "attempts": 1 + (i % 50 == 0), "last_error": None,
             "created_at": at, "updated_at": at + dt.timedelta(milliseconds=i * 3)}
            for i in range(n)
        ]  # fmt: skip
        await _bulk(ledger, parts, rows)


@asynccontextmanager
async def serving(
    folder: Path, args: argparse.Namespace
) -> AsyncIterator[tuple[DigestService, str]]:
    """The service on a populated ledger, its dashboard on a loopback endpoint (its URL)."""
    (folder / "archive").mkdir()
    make_archive(folder / "archive", 365)
    archive = Archive(folder / "archive", index=False)
    clock = PinnedClock(NOW)
    kept = None
    if args.ledger_cache is not None:
        kept = args.ledger_cache / f"ledger-{args.subscribers}-{args.part_days}.db"
        if kept.exists():
            shutil.copyfile(kept, folder / "ledger.db")
            print(f"# the populated ledger copied from {kept}")
    async with Ledger.open(f"sqlite+aiosqlite:///{folder / 'ledger.db'}", clock=clock) as ledger:
        if kept is None or not kept.exists():
            t0 = time.perf_counter()
            await populate(ledger, archive, args.subscribers, args.part_days)
            print(f"# populated the ledger in {time.perf_counter() - t0:.0f} s")
            if kept is not None:
                async with ledger._tx() as conn:
                    await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "ledger.db", kept)
        engine = DeliveryEngine(ledger, clock=clock)
        service = DigestService(
            archive=archive, ledger=ledger, engine=engine, clock=clock, zone=ZONE,
            schedule=ScheduleConfig(zone=ZONE, post_time=dt.time(8)),
            platforms=[NullAdapter()],  # type: ignore[list-item]
        )  # fmt: skip
        probe = Probe(service, Leadership(ledger, clock=clock))
        access = Access(PASSWORD, hours=1)

        def install(app: Any, probe: Probe) -> None:
            Pages(app, probe, access).install()

        endpoint = HttpEndpoint(probe, host="127.0.0.1", port=0, routes=[install])
        await endpoint.start()
        try:
            yield service, f"http://127.0.0.1:{endpoint.port}"
        finally:
            await endpoint.stop()


async def logged_in(client: aiohttp.ClientSession, url: str) -> None:
    page = await (await client.get(url + "/admin/login")).text()
    token = re.search(r'name="token" value="([^"]+)"', page)
    assert token is not None
    form = {"token": token[1], "name": "bench", "password": PASSWORD}
    answer = await client.post(url + "/admin/login", data=form)
    assert answer.status == 200 and answer.url.path == "/admin/today", answer.status


async def page_times(
    client: aiohttp.ClientSession, url: str, runs: int
) -> dict[str, tuple[float, float]]:
    """(the first request's ms, the median of the next ``runs``) per page, request to last
    byte: the first reads the ledger; later ones may find a finished delivery's figures and
    the audience kept (nothing was written meanwhile)."""
    times: dict[str, list[float]] = {p: [] for p in PAGES}
    for _ in range(runs + 1):
        for path in PAGES:
            t0 = time.perf_counter()
            async with client.get(url + path) as answer:
                await answer.read()
                assert answer.status == 200, (path, answer.status)
            times[path].append((time.perf_counter() - t0) * 1000)
    return {p: (v[0], statistics.median(v[1:])) for p, v in times.items()}


async def reading_loop(client: aiohttp.ClientSession, url: str, stop: asyncio.Event) -> int:
    """What an editor's open Deliveries page does (its JSON every second) and another page
    every fifth second, until ``stop``; how many pages were read."""
    reads, tick = 0, 0
    while not stop.is_set():
        paths = [f"/admin/deliveries.json?day={TODAY}"]
        if tick % 5 == 0:
            paths.append(READ_DURING_POST[(tick // 5) % len(READ_DURING_POST)])
        for path in paths:
            async with client.get(url + path) as answer:
                await answer.read()
            reads += 1
        tick += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
    return reads


async def post_stall(
    service: DigestService, url: str | None, client: aiohttp.ClientSession
) -> tuple[float, float, int, LoopWork]:
    """(longest stall in ms, seconds, pages read, the loop's work per callback) of one post
    to every subscriber, the dashboard read meanwhile (``url``) or not."""
    platform = service.platforms["telegram"]
    issue = service.archive.on(TODAY)
    messages = [Message({"text": "x"})]
    targets = await service.ledger.subscribers("telegram")
    probe, stop, work = StallProbe(), asyncio.Event(), LoopWork()
    async with probe.running():
        with work.running():
            reader = asyncio.create_task(
                reading_loop(client, url, stop) if url is not None else asyncio.sleep(0, 0)
            )
            t0 = time.perf_counter()
            await service.engine.deliver(issue.ref, platform, messages, targets, force=True)
            wall = time.perf_counter() - t0
            stop.set()
            reads = await reader
    return probe.worst * 1000, wall, reads, work


async def reading_stall(
    client: aiohttp.ClientSession, url: str, seconds: float
) -> tuple[float, LoopWork]:
    """The longest stall (ms) while the dashboard alone is read for ``seconds``."""
    probe, stop, work = StallProbe(), asyncio.Event(), LoopWork()
    async with probe.running():
        with work.running():
            reader = asyncio.create_task(reading_loop(client, url, stop))
            await asyncio.sleep(seconds)
            stop.set()
            await reader
    return probe.worst * 1000, work


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with serving(Path(tmp), args) as (service, url):
            jar = aiohttp.CookieJar(unsafe=True)  # (cookies of 127.0.0.1)
            async with aiohttp.ClientSession(cookie_jar=jar) as client:
                await logged_in(client, url)
                await client.get(url + "/admin/login")  # (the templates' first compile)
                times = await page_times(client, url, args.runs)
                print(f"{'page':<56} {'first ms':>9} {'then ms':>8} {'ratio':>6}")
                for path, (first, then) in times.items():
                    print(f"{path:<56} {first:>9.1f} {then:>8.1f} {first / PAGE_TARGET_MS:>6.2f}")
                worst = max(first for first, _ in times.values())
                print(f"worst page (first request): {worst:.1f} ms (target "
                      f"{PAGE_TARGET_MS:.0f} ms, ratio {worst / PAGE_TARGET_MS:.2f})")  # fmt: skip
                idle = StallProbe()
                async with idle.running():  # the machine's own: nothing runs but the probe
                    await asyncio.sleep(10.0)
                print(f"idle (10 s): longest loop stall {idle.worst * 1000:.1f} ms")
                quiet, w0 = await reading_stall(client, url, 15.0)
                alone, wall0, _, w1 = await post_stall(service, None, client)
                read, wall1, reads, w2 = await post_stall(service, url, client)
                n = args.subscribers
                print(f"the dashboard read alone (15 s): longest loop stall {quiet:.1f} ms")
                print(f"post to {n} subscribers alone: {wall0:.1f} s, longest loop stall "
                      f"{alone:.1f} ms")  # fmt: skip
                print(f"the same while the dashboard is read ({reads} pages): {wall1:.1f} s, "
                      f"longest loop stall {read:.1f} ms (target {STALL_TARGET_MS:.0f} ms, "
                      f"ratio {read / STALL_TARGET_MS:.2f})")  # fmt: skip
                print("the loop's own CPU per callback, longest (ms):")
                print(f"  the dashboard read alone: {w0.top()}")
                print(f"  the post alone: {w1.top()}")
                print(f"  the post while read: {w2.top()}")
                print(f"the dashboard's own longest callback while the post runs: "
                      f"{w2.pages():.1f} ms (target {STALL_TARGET_MS:.0f} ms, ratio "
                      f"{w2.pages() / STALL_TARGET_MS:.2f})")  # fmt: skip
                print(f"(load average while measured: {os.getloadavg()[0]:.1f} on "
                      f"{os.cpu_count()} cores)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subscribers", type=int, default=100_000)
    parser.add_argument("--part-days", type=int, default=14)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--ledger-cache",
        type=Path,
        help="a folder that keeps the populated ledger (copied in, not populated again)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
