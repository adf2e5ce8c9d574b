"""The HTTP endpoint of `digest-bot run`: /healthz, /readyz and /metrics over real HTTP."""

from __future__ import annotations

import asyncio
import io
import math
import os
import random
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bots import http, runtime
from bots.metrics import PrometheusMetrics
from bots.registry import load_settings
from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.errors import LeadershipLost, RateLimited, TransientError
from digest_core.service.leadership import LEADER_LEASE, Leadership
from digest_core.settings import Settings
from digest_core.testing import (
    FakePlatform,
    ManualClock,
    make_issue,
    make_messages,
    make_targets,
    open_ledger,
)
from tests import ports

FOREIGN = "elsewhere.example:1:ffff"


def free_port() -> int:
    return ports.free_port()


def settings_for(tmp_path: Path, port: int, **more: Any) -> Settings:
    config = tmp_path / "bot.toml"
    config.touch()
    return load_settings(
        config,
        overrides={
            "archive_dir": tmp_path,
            "database_url": f"sqlite+aiosqlite:///{tmp_path}/ledger.db",
            "http": {"listen": f"127.0.0.1:{port}"},
            "leader": {"lease_seconds": 3},
            **more,
        },
    )


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def get_json(port: int, path: str) -> tuple[int, dict[str, Any]]:
    import json

    status, text = await get(port, path)
    return status, json.loads(text)


def ours(body: dict[str, Any]) -> bool:
    """The answer is this process's (not another program's that took the free port first)."""
    return f":{os.getpid()}:" in str(body.get("owner"))


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by (name, sorted labels), parsed by prometheus_client."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def eventually(condition: Callable[[], Any], *, within: float = 10.0) -> Any:
    for _ in range(int(within / 0.05)):
        result = await condition()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[int, asyncio.Event, asyncio.Task[None]]]:
    port = free_port()
    stop = asyncio.Event()
    settings = settings_for(tmp_path, port)
    task = asyncio.create_task(
        runtime.run(settings, stop=stop, stdin=io.StringIO("/help\n"), out=io.StringIO())
    )
    yield port, stop, task
    stop.set()
    await asyncio.gather(task, return_exceptions=True)


async def test_health_ready_and_metrics_of_a_leader(
    running: tuple[int, asyncio.Event, asyncio.Task[None]],
) -> None:
    port, stop, task = running

    async def ready() -> dict[str, Any] | None:
        assert not task.done(), task
        try:
            status, body = await get_json(port, "/readyz")
        except aiohttp.ClientConnectionError:
            return None
        return body if status == 200 and ours(body) else None

    body = await eventually(ready)
    assert body["role"] == "leader" and body["ledger"] == "ok"
    assert body["platforms"] == {"console": True} and body["leader"] == body["owner"]
    assert await get(port, "/healthz") == (200, "ok\n")

    async def scraped() -> dict[Any, float] | None:
        status, text = await get(port, "/metrics")
        assert status == 200
        got = samples(text)
        # the console's /help from stdin has been answered
        return got if got.get(_help_count()) == 1 else None

    got = await eventually(scraped)
    assert got[("digest_leader", ())] == 1
    assert got[("digest_ledger_up", ())] == 1
    assert got[("digest_platform_connected", (("platform", "console"),))] == 1
    assert got[("digest_subscribers", (("platform", "console"),))] == 0
    assert got[("digest_next_post_timestamp_seconds", ())] > 1.7e9
    assert ("digest_build_info", ()) not in got  # (the info carries the version as a label)
    assert any(name == "digest_build_info" for name, _ in got)
    assert (
        got[
            (
                "digest_commands_total",
                (("command", "help"), ("platform", "console"), ("status", "ok")),
            )
        ]
        == 1
    )
    stop.set()
    await asyncio.wait_for(task, 15)
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(port, "/healthz")  # stopped with the bot


def _help_count() -> tuple[str, tuple[tuple[str, str], ...]]:
    return (
        "digest_command_duration_seconds_count",
        (("command", "help"), ("platform", "console")),
    )


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_standby_is_ready_then_leads_when_the_lease_is_free(tmp_path: Path) -> None:
    port = free_port()
    settings = settings_for(tmp_path, port, schedule={"enabled": False})
    async with Ledger.open(settings.database_url, clock=SystemClock(), owner=FOREIGN) as other:
        assert (await other.acquire_lease(LEADER_LEASE, ttl=600)).owner == FOREIGN
        stop = asyncio.Event()
        out = io.StringIO()
        task = asyncio.create_task(runtime.run(settings, stop=stop, stdin=io.StringIO(), out=out))
        try:

            async def standby() -> dict[str, Any] | None:
                assert not task.done(), task
                try:
                    status, body = await get_json(port, "/readyz")
                except aiohttp.ClientConnectionError:
                    return None
                return body if status == 200 and ours(body) else None

            body = await eventually(standby)
            assert body["role"] == "standby" and body["leader"] == FOREIGN
            assert body["platforms"] == {}  # the console waits for the leadership
            status, text = await get(port, "/metrics")
            got = samples(text)
            assert status == 200 and got[("digest_leader", ())] == 0
            assert math.isnan(got[("digest_next_post_timestamp_seconds", ())])

            await other.release_lease(LEADER_LEASE)  # the other one stops cleanly

            async def leading() -> dict[str, Any] | None:
                status, body = await get_json(port, "/readyz")
                return body if status == 200 and body["role"] == "leader" else None

            body = await eventually(leading)
            assert body["platforms"] == {"console": True}

            # the other one cannot take the lease away (an OS lock on SQLite: a partition's
            # takeover cannot happen) ...
            assert await other.free_leases_of(body["owner"]) == []
            assert (await other.acquire_lease(LEADER_LEASE, ttl=600)).owner == body["owner"]
            # ... unless the lock file is deleted: then another can lock a new one, and this
            # one stops
            lock = other.lock_file(LEADER_LEASE)
            assert lock is not None
            lock.unlink()
            assert (await other.acquire_lease(LEADER_LEASE, ttl=600)).owner == FOREIGN
            with pytest.raises(LeadershipLost):
                await asyncio.wait_for(task, 15)
        finally:
            stop.set()
            await asyncio.gather(task, return_exceptions=True)


async def test_readyz_is_503_while_a_leader_s_platform_is_not_connected(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, free_port())
    async with runtime.open_service(settings, stdin=io.StringIO(), out=io.StringIO()) as service:
        leadership = Leadership(service.ledger, clock=service.clock)
        endpoint = http.HttpEndpoint(http.Probe(service, leadership), host="127.0.0.1", port=0)
        await endpoint.start()
        try:
            status, body = await get_json(endpoint.port, "/readyz")
            assert status == 503 and body["role"] == "starting"  # not yet in the election
            assert await leadership.try_lead()
            status, body = await get_json(endpoint.port, "/readyz")
            assert status == 503 and body["platforms"] == {"console": False}
            assert body["ready"] is False and body["ledger"] == "ok"
            assert (await get(endpoint.port, "/metrics"))[0] == 404  # no metrics given
        finally:
            await endpoint.stop()


async def test_routes_can_be_added(tmp_path: Path) -> None:
    from aiohttp import web

    settings = settings_for(tmp_path, free_port())
    seen: list[http.Probe] = []

    def site(app: web.Application, probe: http.Probe) -> None:
        seen.append(probe)

        async def hello(request: web.Request) -> web.Response:
            return web.Response(text="hello")

        app.router.add_get("/site/", hello)

    async with runtime.open_service(settings, stdin=io.StringIO(), out=io.StringIO()) as service:
        probe = http.Probe(service, Leadership(service.ledger, clock=service.clock))
        endpoint = http.HttpEndpoint(probe, host="127.0.0.1", port=0, routes=[site])
        await endpoint.start()
        try:
            assert await get(endpoint.port, "/site/") == (200, "hello")
            assert seen == [probe]
        finally:
            await endpoint.stop()


async def test_a_taken_port_is_one_clear_line(tmp_path: Path) -> None:
    from digest_core.errors import ConfigError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        settings = settings_for(tmp_path, port)
        with pytest.raises(ConfigError, match=rf"http.listen: cannot listen on 127.0.0.1:{port}"):
            await runtime.run(settings, stdin=io.StringIO(), out=io.StringIO())


async def test_the_engine_reports_each_outcome() -> None:
    clock = ManualClock()
    metrics = PrometheusMetrics(version="test")
    async with open_ledger(clock) as ledger:
        platform = FakePlatform(clock)
        platform.script("c1", RateLimited("429", retry_after=2), TransientError("502"), None, None)
        from digest_core.testing import make_targets

        engine = DeliveryEngine(ledger, clock=clock, metrics=metrics, rng=random.Random(1))
        report = await engine.deliver(make_issue().ref, platform, make_messages(2), make_targets(2))
    assert report.ok
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())
    name = platform.name

    def messages(outcome: str) -> float:
        return got[("digest_messages_total", (("outcome", outcome), ("platform", name)))]

    assert messages("sent") == 4 and messages("retried") == 2
    assert got[("digest_rate_limited_total", (("platform", name),))] == 1
    assert got[("digest_deliveries_total", (("platform", name), ("result", "ok")))] == 1
    assert got[("digest_delivery_duration_seconds_count", (("platform", name),))] == 1
    assert got[("digest_last_post_timestamp_seconds", (("platform", name),))] > 1.7e9
    assert got[("digest_last_complete_delivery_timestamp_seconds", (("platform", name),))] == (
        clock.now().timestamp()
    )


#: a second SQLite client that takes the write lock, then gives it back when told
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


@pytest.mark.slow
async def test_ledger_errors_are_counted_by_kind(tmp_path: Path) -> None:
    """A real failure: another process holds the SQLite write lock; the ledger's retried
    transaction fails ("database is locked"), waits, succeeds, and the scrape counts it."""
    import sys

    from prometheus_client import generate_latest

    from digest_core.delivery.health import RetryPolicy

    metrics = PrometheusMetrics(version="test")
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}?timeout=0.2"
    async with Ledger.open(url, clock=SystemClock()) as ledger:
        ledger.retry_policy = RetryPolicy(base=0.05, cap=0.2)
        metrics.watch_ledger(lambda: ledger.health.failures)
        pipe = asyncio.subprocess.PIPE
        locker = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOCKER, str(tmp_path / "l.db"), stdin=pipe, stdout=pipe
        )
        assert locker.stdout is not None and locker.stdin is not None
        assert (await locker.stdout.readline()).strip() == b"locked"
        planning = asyncio.create_task(ledger.plan(make_issue().ref, "fake", make_targets(1), 1))
        await eventually(lambda: _true(ledger.health.trouble is not None))
        locker.stdin.write(b"go\n")
        await locker.stdin.drain()
        await locker.wait()
        assert len((await asyncio.wait_for(planning, 10)).targets) == 1
    got = samples(generate_latest(metrics.registry).decode())
    assert got[("digest_ledger_errors_total", (("kind", "OperationalError"),))] >= 1


async def _true(value: bool) -> bool:
    return value
