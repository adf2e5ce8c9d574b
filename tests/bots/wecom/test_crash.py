"""SIGKILL mid-delivery to WeCom groups, then a rerun: nothing lost, at most the in-flight
part of each group repeated (webhooks have no idempotency key)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from digest_core.loading import load_issue
from digest_core.rendering import wecom as wecom_render
from tests import forkserver
from tests.bots.wecom.crash_run import ISSUE, SCALE, key
from tests.fakes.wecom_api import FakeWeCom

pytestmark = pytest.mark.slow  # real processes, servers or a browser

ROOT = Path(__file__).resolve().parents[3]
TARGETS = 10


async def victim(api_base: str, ledger: str) -> asyncio.subprocess.Process:
    return await forkserver.create_subprocess_exec(
        sys.executable, "-m", "tests.bots.wecom.crash_run", "--api-base", api_base,
        "--ledger", ledger, f"--targets={TARGETS}", cwd=ROOT,
    )  # fmt: skip


async def test_sigkill_mid_delivery_then_rerun(tmp_path: Path) -> None:
    ledger = f"sqlite+aiosqlite:///{tmp_path / 'ledger.sqlite3'}"
    expected = [m.payload for m in wecom_render.render(load_issue(ISSUE))]
    total = TARGETS * len(expected)
    async with FakeWeCom(scale=SCALE, latency=0.05) as wecom:
        for n in range(TARGETS):
            wecom.add_robot(f"g{n}", key(n))

        def posted() -> int:
            return sum(len(wecom.sent(f"g{n}")) for n in range(TARGETS))

        proc = await victim(wecom.url, ledger)
        for _ in range(3000):  # real time: wait in short steps until about a third is posted
            if posted() >= total // 3 or proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        before = posted()
        assert 0 < before < total, "the kill must land mid-delivery"

        rerun = await victim(wecom.url, ledger)
        assert await rerun.wait() == 0

        repeats = 0
        for n in range(TARGETS):
            got = wecom.sent(f"g{n}")
            # each group got every part in order; a part may appear twice in a row
            deduped = [p for i, p in enumerate(got) if i == 0 or p != got[i - 1]]
            assert deduped == expected, f"g{n}"
            repeats += len(got) - len(deduped)
            assert len(got) - len(deduped) <= 1, f"g{n}: more than the in-flight part repeated"
        assert 45009 not in [code for _, code in wecom.answers]
    # for the report (pytest -s): how many were posted before the kill, how many repeated
    print(f"wecom crash: {before}/{total} posted before SIGKILL; {repeats} repeated part(s)")
