"""kill -9 in the middle of a delivery: a rerun loses nothing and repeats only in-flight parts."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, PartState
from digest_core.testing import make_issue, part_counts
from tests import forkserver
from tests.clockskew import skewed_env
from tests.delivery.crash_run import EXIT_BUSY

pytestmark = pytest.mark.slow  # real processes, servers or a browser

ROOT = Path(__file__).resolve().parents[2]
TARGETS, PARTS = 30, 3


async def victim(
    url: str,
    log: Path,
    *extra: str,
    stdout: int = asyncio.subprocess.DEVNULL,
    env: dict[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """The victim process; ``env``: more environment variables (a skewed clock)."""
    return await forkserver.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.delivery.crash_run",
        "--url",
        url,
        "--log",
        str(log),
        f"--targets={TARGETS}",
        f"--parts={PARTS}",
        *extra,
        cwd=ROOT,
        stdout=stdout,
        env={**os.environ, **(env or {})},
    )


def lines(log: Path) -> list[tuple[str, int]]:
    if not log.exists():
        return []
    return [(t, int(p)) for t, p in (line.split() for line in log.read_text().splitlines())]


async def test_sigkill_mid_delivery_then_rerun(ledger_url: str, tmp_path: Path) -> None:
    url = ledger_url
    log = tmp_path / "sent.log"
    proc = await victim(url, log, "--latency=0.05", "--in-flight=16")
    # a real process runs in real time: wait (in short steps) until about a third is sent
    for _ in range(3000):
        if len(lines(log)) >= TARGETS * PARTS // 3 or proc.returncode is not None:
            break
        await asyncio.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL
    before = len(lines(log))
    assert 0 < before < TARGETS * PARTS, "the kill must land mid-delivery"

    ref = make_issue().ref
    async with Ledger.open(url, clock=SystemClock()) as ledger:
        in_flight = len(await ledger.in_flight(ref))
        sent_rows = (await part_counts(ledger, ref))[PartState.SENT]
    assert sent_rows <= before  # a row is marked sent only after its send

    rerun = await victim(url, log)
    assert await rerun.wait() == 0

    sent = lines(log)
    copies = Counter(sent)
    assert set(copies) == {(f"c{t}", p) for t in range(TARGETS) for p in range(PARTS)}
    duplicates = len(sent) - len(copies)
    assert duplicates <= in_flight
    for t in range(TARGETS):  # each reader saw the parts in order (first copies)
        firsts = list(dict.fromkeys(p for target, p in sent if target == f"c{t}"))
        assert firsts == list(range(PARTS))
    async with Ledger.open(url, clock=SystemClock()) as ledger:
        assert (await part_counts(ledger, ref))[PartState.SENT] == TARGETS * PARTS


@pytest.mark.parametrize(
    ("skew", "faked"), [(0, ""), (120, ""), (-120, ""), (0, "+120s"), (0, "-120s")]
)
async def test_a_second_process_is_refused_while_the_first_delivers(
    ledger_url: str, tmp_path: Path, skew: int, faked: str
) -> None:
    """Also when the second's wall clock is 120 s ahead of the first's (or behind): the
    lease's expiry is judged by the database's clock. ``faked``: the whole process's clock
    is off (libfaketime), SQLite's own included; an SQLite lease is an OS lock, which no
    clock judges."""
    url = ledger_url
    log = tmp_path / "sent.log"
    pipe = asyncio.subprocess.PIPE
    first = await victim(url, log, "--latency=0.2", "--in-flight=2", stdout=pipe)
    assert first.stdout is not None
    owner = (await first.stdout.readline()).decode().split()[1]
    for _ in range(3000):  # until it is surely delivering (holds the lease)
        if lines(log) or first.returncode is not None:
            break
        await asyncio.sleep(0.01)
    second = await victim(url, log, f"--skew={skew}", stdout=pipe, env=skewed_env(faked))
    out, _ = await second.communicate()
    try:
        assert second.returncode == EXIT_BUSY, out
        assert "DeliveryBusy" not in out.decode()  # a clear message, not a traceback
        assert f"lease held by {owner}" in out.decode()
        assert first.returncode is None, "the first run finished before the second started"
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    # the first process is gone: its lease is taken over at once, and the rest is sent
    third = await victim(url, log)
    assert await third.wait() == 0
    assert set(lines(log)) == {(f"c{t}", p) for t in range(TARGETS) for p in range(PARTS)}
