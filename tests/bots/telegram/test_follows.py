"""Follow messages end to end on Telegram (issue #25): every issue that becomes public is
considered once for follows, whatever its date: an admin's early publish, two issues made
public on one day, a late approval, a restart.

The real PTB Application polls the Bot API double; the clock is set by the tests and the minute
job's body (``deliver_personal``) is run by them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from digest_core.testing import SettableClock
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    BOB,
    CHANNEL,
    TODAY,
    Running,
    local,
    running_bot,
    settings_for,
    visible,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram, SentMessage

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

TOMORROW = TODAY + dt.timedelta(days=1)
#: a word only brief 1 of TOMORROW's issue has, and that brief's link
ONLY_TOMORROW = "全员提醒"
TOMORROW_BRIEF_URL = "https://example.org/postmortems/everyone-ping"
#: a word only TODAY's issue has (in a brief)
ONLY_TODAY = "蒸馏"
#: a word no issue has
ABSENT = "斑马鱼推理"


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock(local(TODAY, 9))  # today's issue came out at 08:00


@pytest.fixture
async def bot(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: SettableClock
) -> AsyncIterator[Running]:
    config = write_config(tmp_path, base_url=fake.base_url, telegram={"command_burst": 50})
    settings = settings_for(config, fake, monkeypatch)
    async with running_bot(settings, fake, clock=clock, scale=100) as running:
        yield running


async def _until(check: Callable[[], bool], within: float = 5.0) -> None:
    for _ in range(int(within / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def _buttons(message: SentMessage) -> list[str]:
    markup = message.reply_markup or {}
    return [b["callback_data"] for row in markup["inline_keyboard"] for b in row]


def follow_messages(messages: list[SentMessage]) -> list[SentMessage]:
    return [m for m in messages if "Words you follow" in m.text]


async def _repost_confirmed(bot: Running, fake: FakeTelegram, day: dt.date) -> None:
    """An admin's ``/repost DAY``, confirmed with the prompt's first button; returns once the
    admin has the delivery's summary."""
    [prompt] = await bot.command(f"/repost {day}", user=ADMIN)
    fake.inject_callback(ADMIN, ADMIN, prompt.message_id, _buttons(prompt)[0])
    await _until(lambda: "发送 / sent" in visible(fake.sent(ADMIN)))


async def test_an_issue_published_early_by_repost_reaches_its_followers_once(
    bot: Running, fake: FakeTelegram
) -> None:
    await bot.command(f"/follow {ONLY_TOMORROW}")
    await bot.command(f"/follow {ABSENT}", user=BOB)
    # today's issue is out (and mentions neither word): a first run finds nothing to say
    assert await bot.service.deliver_personal() == []
    ann, bob = len(fake.sent(ANN)), len(fake.sent(BOB))

    await _repost_confirmed(bot, fake, TOMORROW)
    assert fake.sent(CHANNEL), "the early publish went to the channel"
    reports = await bot.service.deliver_personal()
    assert [(r.platform, r.ref.date, r.sent) for r in reports] == [("telegram~follow", TOMORROW, 1)]
    (message,) = fake.sent(ANN)[ann:]
    assert f"{TOMORROW}" in message.text and f"“{ONLY_TOMORROW}”" in message.text
    assert "简讯 1" in message.text and TOMORROW_BRIEF_URL in message.text
    assert len(fake.sent(BOB)) == bob  # his word is in no issue
    # the next runs, and a new process on the same ledger, send nothing more
    assert await bot.service.deliver_personal() == []
    bot.service.personal._checked.clear()  # as after a restart: the ledger alone decides
    assert await bot.service.deliver_personal() == []
    assert len(follow_messages(fake.sent(ANN))) == 1 and len(fake.sent(BOB)) == bob
