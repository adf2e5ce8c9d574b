"""The daily retention job in the running service: it prunes, and status still tells."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest

from bots.registry import load_settings
from bots.runtime import open_service, retention_job
from digest_core.delivery import PartState
from digest_core.testing import ManualClock, part_counts
from tests.core.test_service_commands import make_config

# 09:00 in Shanghai on 2026-11-30
MORNING = dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC)


async def test_the_retention_job_prunes_old_days_and_status_shows_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    monkeypatch.setenv("DIGEST_BOT_LEDGER__KEEP_DAYS", "7")
    settings = load_settings(make_config(tmp_path))
    assert settings.ledger.keep_days == 7
    clock = ManualClock(MORNING)
    async with open_service(settings, clock=clock, out=io.StringIO()) as service:
        [day] = sorted(service.archive.dates())[-1:]
        [report] = await service.post(day, force=False)
        assert report.ok
        ref = service.archive.on(day).ref
        sent = (await part_counts(service.ledger, ref))[PartState.SENT]
        assert sent > 0
        job = retention_job(service, settings)
        assert (await job.run()).parts == 0  # type: ignore[union-attr]  # today's: kept
        clock.advance(8 * 86400)
        pruned = await job.run()
        assert pruned is not None and pruned.parts == sent
        assert sum((await part_counts(service.ledger, ref)).values()) == 0
        status = await service.status()
    assert f"{day} (已归档 / rows pruned; parts sent: {sent})" in status
