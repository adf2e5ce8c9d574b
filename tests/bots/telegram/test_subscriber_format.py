"""Private subscribers in the compact format, and paid broadcast, against the Bot API double."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.telegram.spec import PAID_BROADCAST_LIMITS
from digest_core.models import Section
from digest_core.rendering import button_data
from digest_core.testing import scaled_limits
from tests.bots.telegram.harness import (
    ANN,
    BOB,
    CHANNEL,
    TODAY,
    register_chats,
    running_bot,
    settings_for,
    write_config,
)
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

PARTS = 2  # the issue of TODAY is two messages on Telegram


async def test_compact_subscribers_get_one_message_with_the_buttons_channels_the_issue(
    fake: FakeTelegram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path, base_url=fake.base_url, telegram={"subscriber_format": "compact"}
    )
    async with running_bot(settings_for(config, fake, monkeypatch), fake, scale=100) as bot:
        for reader in (ANN, BOB):
            await bot.command("/subscribe", user=reader)
        [report] = await bot.service.post(TODAY)
        assert report.ok and report.sent == 2 * PARTS + 2  # two channels, two readers
        assert len(fake.sent(CHANNEL)) == PARTS
        for reader in (ANN, BOB):
            [dm] = fake.sent(reader)[1:]  # after the /subscribe answer
            headline = bot.service.archive.on(TODAY).headline.title
            assert headline in dm.text
            assert dm.reply_markup is not None
            buttons = [b["callback_data"] for b in dm.reply_markup["inline_keyboard"][0]]
            assert button_data(TODAY, Section.BRIEFS) in buttons
        # a second post finds the day done for both kinds of target
        [again] = await bot.service.post(TODAY)
        assert again.ok and again.sent == 0


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_paid_broadcast_marks_every_send_and_paces_past_30_per_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers = range(5000, 5120)
    async with FakeTelegram(scale=20) as fake:
        register_chats(fake)
        for reader in readers:
            fake.add_chat(reader, "private")
        config = write_config(
            tmp_path,
            base_url=fake.base_url,
            telegram={"paid_broadcast": True, "subscriber_format": "compact"},
        )
        async with running_bot(settings_for(config, fake, monkeypatch), fake) as bot:
            assert bot.adapter.limits == PAID_BROADCAST_LIMITS
            bot.adapter.limits = scaled_limits(PAID_BROADCAST_LIMITS, 20)  # the double's clock x20
            for reader in readers:
                await bot.service.ledger.subscribe("telegram", str(reader))
            [report] = await bot.service.post(TODAY)
        sends = fake.calls("sendMessage")
        assert report.ok and report.sent == 2 * PARTS + len(readers)
        bad = [r for r in sends if r.params.get("allow_paid_broadcast") not in (True, "true")]
        assert not bad, [(r.params, r.status) for r in bad][:3]
        assert fake.paid_broadcasts == len(sends)
        assert fake.flood_429s == 0
