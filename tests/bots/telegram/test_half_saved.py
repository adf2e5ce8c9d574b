"""A day's file still being saved at post time, or changed after it was posted: the real
archive on disk, the scheduler's post (DailyPoster.run_due) and the Bot API double."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from digest_core.publishing.schedule import Outcome
from digest_core.rendering import Part, render
from digest_core.rendering import telegram as telegram_render
from tests.bots.telegram.harness import (
    ADMIN,
    CHANNEL,
    TODAY,
    Running,
    running_bot,
    settings_for,
    visible,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

#: seconds a file must be unchanged before it is posted (short: the test waits for real)
SETTLE = 1.0


@pytest.fixture
async def bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    # not the suite's no-wait default (tests/conftest.py): the config's short settle
    monkeypatch.delenv("DIGEST_BOT_SCHEDULE__SETTLE_SECONDS")
    config = write_config(tmp_path, base_url=fake.base_url, channels=[str(CHANNEL)])
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("catch_up_hours = 6", f"catch_up_hours = 6\nsettle_seconds = {SETTLE}"),
        encoding="utf-8",
    )
    async with running_bot(settings_for(config, fake, monkeypatch), fake, scale=100) as running:
        yield running


async def _logged(
    caplog: pytest.LogCaptureFixture, fragment: str, task: asyncio.Task[object]
) -> None:
    async with asyncio.timeout(10):
        while fragment not in caplog.text:
            assert not task.done(), f"finished without logging {fragment!r}: {task}"
            await asyncio.sleep(0.01)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_file_still_being_saved_at_post_time_is_posted_complete(
    bot: Running, fake: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """The day's file overwritten with its first 30% (cut at a line end) just before the
    post, the rest appended while the post waits: the channel gets the whole issue, once."""
    path = bot.issue_file()
    full = path.read_text(encoding="utf-8")
    cut = full.rfind("\n", 0, len(full) * 3 // 10) + 1
    path.write_text(full[:cut], encoding="utf-8")  # the save's first write
    assert bot.service.archive.on(TODAY).briefs == ()  # the prefix alone loads: headline only
    caplog.set_level(logging.INFO, logger="digest_core.archive.settling")

    post = asyncio.create_task(bot.service.poster.run_due(TODAY))
    await _logged(caplog, "still being saved?", post)
    with path.open("a", encoding="utf-8") as rest:  # the save's second write
        rest.write(full[cut:])
    assert await asyncio.wait_for(post, 30) is Outcome.POSTED

    complete = bot.service.archive.on(TODAY)
    assert complete.briefs and complete.classic is not None
    expected = render(complete, telegram_render, Part.ALL, options=bot.adapter.post_options)
    sent = fake.sent(CHANNEL)
    assert len(sent) == len(expected)
    assert "【简讯】" in visible(sent) and "【经典回顾】" in visible(sent)
    assert [d.revision for d in await bot.service.ledger.deliveries(complete.ref)] == [
        complete.revision
    ]
    assert "changed again" in caplog.text and "is unchanged for 1 s now: posting it" in caplog.text


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_file_changed_after_the_post_is_told_to_the_admins_once(
    bot: Running, fake: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """Posted, then the file replaced atomically (temp + rename): the log says so and the
    admins are told how to correct it, once per revision; a correction makes it match."""
    assert await bot.service.poster.run_due(TODAY) is Outcome.POSTED
    assert await bot.service.check_posted_files() == []  # posted as the file is
    path = bot.issue_file()
    temp = path.with_name(".tmp-save")
    text = path.read_text(encoding="utf-8")
    temp.write_text(text.replace("KV 缓存为什么要分页", "KV 缓存为何要分页", 1), encoding="utf-8")
    os.replace(temp, path)
    bot.service.archive.refresh(full=True)

    before = len(fake.sent(ADMIN))
    assert await bot.service.check_posted_files() == [f"telegram:{TODAY}"]
    [alert] = fake.sent(ADMIN)[before:]
    assert f"The issue file of {TODAY} changed after it was posted on telegram" in alert.text
    assert f"/correct {TODAY}" in alert.text and f"digest-bot correct --date {TODAY}" in alert.text
    assert f"the issue file of {TODAY} changed after it was posted: telegram" in caplog.text
    assert await bot.service.check_posted_files() == []  # told once per revision
    assert len(fake.sent(ADMIN)) == before + 1

    await bot.service.correct(TODAY)  # what the alert says to do
    assert await bot.service.check_posted_files() == []  # the posts show the file now
    path.write_text(text, encoding="utf-8")  # the first version back: told again
    bot.service.archive.refresh(full=True)
    assert await bot.service.check_posted_files() == [f"telegram:{TODAY}"]
