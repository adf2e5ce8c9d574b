"""Feishu, DingTalk and WeCom end to end: wired by the registry, through the real service.

A scheduled post (the service's DailyPoster on a ManualClock) reaches the loopback double once;
a real ``digest-bot post`` killed with SIGKILL mid-delivery and run again leaves every part
posted in order in every group, at most the part in flight repeated per group.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bots import registry
from bots.runtime import open_service
from digest_core.delivery import PartState
from digest_core.publishing.schedule import Outcome
from digest_core.rendering import render
from digest_core.testing import ManualClock
from tests import forkserver
from tests.bots.workchat_helpers import ARCHIVE, ROOT
from tests.fakes.dingtalk_api import FakeDingTalk
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.wecom_api import FakeWeCom
from tests.fakes.workchat_base import FakeWebhookService

pytestmark = pytest.mark.slow  # real processes, servers or a browser

DOUBLES: dict[str, type[FakeWebhookService]] = {
    "feishu": FakeFeishu,
    "dingtalk": FakeDingTalk,
    "wecom": FakeWeCom,
}
SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY = dt.date(2026, 11, 30)
#: a short issue (1-2 parts on each platform), so twelve groups take about 2 s at 10 sends/s
CRASH_DAY = dt.date(2026, 11, 26)
GROUPS = [f"g{n:02d}" for n in range(12)]


def token(group: str) -> str:
    return f"0f1e2d3c-{group}-6978-8796-a5b4c3d2e1f0"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("DIGEST_BOT_"):
            monkeypatch.delenv(name)
    yield


def write_config(tmp_path: Path, platform: str, api_base: str, groups: list[str]) -> Path:
    config = tmp_path / "digest-bot.toml"
    config.write_text(
        f'archive_dir = "{ARCHIVE}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n'
        'timezone = "Asia/Shanghai"\n'
        f"[{platform}]\n"
        f"targets = {json.dumps(groups)}\n"
        f'api_base = "{api_base}"\n',
        encoding="utf-8",
    )
    return config


def webhooks_env(platform: str, groups: list[str]) -> tuple[str, str]:
    return f"DIGEST_BOT_{platform.upper()}__WEBHOOKS", json.dumps({g: token(g) for g in groups})


@pytest.mark.parametrize("platform", sorted(DOUBLES))
async def test_a_scheduled_post_arrives_once(
    platform: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = ["ai-team", "research"]
    async with DOUBLES[platform](rate_limits=False) as fake:
        for g in groups:
            fake.add_robot(g, token(g))
        monkeypatch.setenv(*webhooks_env(platform, groups))
        settings = registry.load_settings(write_config(tmp_path, platform, fake.url, groups))
        clock = ManualClock(dt.datetime(2026, 11, 30, 8, 0, tzinfo=SHANGHAI), autoadvance=True)
        async with open_service(settings, clock=clock, out=io.StringIO()) as service:
            assert list(service.platforms) == [platform]  # the registry built it, no console
            adapter = service.platforms[platform]
            await adapter.start(service)
            try:
                assert await service.poster.run_due() is Outcome.POSTED
                assert await service.poster.run_due() is Outcome.ALREADY
            finally:
                await adapter.stop()
            records = await service.ledger.records(platform=platform)
        renderer = registry.spec(platform).renderer()
        expected = [m.payload for m in render(service.archive.on(DAY), renderer)]
        for g in groups:
            sent = [{k: v for k, v in b.items() if k not in ("timestamp", "sign")} for b in
                    fake.sent(g)]  # fmt: skip
            assert sent == expected, g
        assert len(records) == len(groups) * len(expected)
        assert {r.state for r in records} == {PartState.SENT}


async def cli_post(config: Path, platform: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "post", "--config", str(config),
        "--platform", platform, "--date", CRASH_DAY.isoformat(),
        cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.parametrize("platform", sorted(DOUBLES))
async def test_sigkill_of_digest_bot_post_then_rerun_loses_nothing(
    platform: str, tmp_path: Path
) -> None:
    renderer = registry.spec(platform).renderer()
    from digest_core.loading import load_issue

    expected = [m.payload for m in render(load_issue(ARCHIVE / f"{CRASH_DAY}.txt"), renderer)]
    total = len(GROUPS) * len(expected)
    # each accepted send is answered 0.1 s after it is posted: a kill finds one in flight
    async with DOUBLES[platform](latency=0.1) as fake:
        for g in GROUPS:
            fake.add_robot(g, token(g))
        config = write_config(tmp_path, platform, fake.url, GROUPS)
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DIGEST_BOT_")}
        env.update([webhooks_env(platform, GROUPS)])

        def posted() -> int:
            return sum(len(fake.sent(g)) for g in GROUPS)

        first = await cli_post(config, platform, env)
        for _ in range(3000):  # real time: wait in short steps until about a third is posted
            if posted() >= total // 3 or first.returncode is not None:
                break
            await asyncio.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        assert await first.wait() == -signal.SIGKILL
        before = posted()
        assert 0 < before < total, "the kill must land mid-delivery"

        rerun = await cli_post(config, platform, env)
        _, err = await rerun.communicate()
        assert rerun.returncode == 0, err.decode()
        await fake.wait_until_answered()  # a send of the killed process still being answered

        repeats = 0
        for g in GROUPS:
            got = [{k: v for k, v in b.items() if k not in ("timestamp", "sign")} for b in
                   fake.sent(g)]  # fmt: skip
            deduped = [p for i, p in enumerate(got) if i == 0 or p != got[i - 1]]
            assert deduped == expected, g  # every part, in order
            repeats += len(got) - len(deduped)
            assert len(got) - len(deduped) <= 1, f"{g}: more than the in-flight part repeated"
        assert posted() - repeats == total
