"""Issue #10 item 4: an admin sends an issue file to the bot privately (a Telegram document).

The real PTB Application downloads it through the double's getFile and file URL; the core
checks and stores it as `digest-bot archive add` does and answers with the errors or a preview.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from digest_core.archive import Archive
from tests.bots.telegram.harness import (
    ADMIN,
    ANN,
    ARCHIVE,
    Running,
    visible,
)

GOOD = (ARCHIVE / "2026-11-28.txt").read_bytes()
FUTURE = "2026-12-05"


async def send_file(
    bot: Running, name: str, data: bytes, *, user: int = ADMIN, caption: str | None = None
) -> str:
    before = len(bot.fake.sent(user))
    bot.fake.inject_document(user, user, name, data, caption=caption)
    await bot.fake.wait_for_messages(user, before + 1, timeout=10)
    await bot.adapter.in_flight.idle(5)  # every message of the answer
    return visible(bot.fake.sent(user)[before:])


def archive_of(bot: Running) -> Path:
    return bot.service.archive.root


async def test_a_good_file_is_stored_and_answered_with_the_preview(bot: Running) -> None:
    text = await send_file(bot, f"{FUTURE}.txt", GOOD)
    assert f"已收录 / stored: {FUTURE}.txt" in text
    assert "posts 2026-12-05 08:00 (Asia/Shanghai)" in text  # the zone by name, not CST
    assert "推理模型的 <think> 段落" in text  # the preview: the headline as readers get it
    stored = archive_of(bot) / f"{FUTURE}.txt"
    assert stored.read_bytes() == GOOD
    assert bot.fake.downloads  # fetched through getFile and the file URL, as Telegram serves it
    issue = Archive(archive_of(bot), index=False).on(dt.date.fromisoformat(FUTURE))
    assert issue.headline.title.startswith("推理模型的")
    assert not [p for p in archive_of(bot).iterdir() if p.name.startswith(".")]
    [entry] = await bot.service.ledger.audit_log(limit=1)
    assert entry.action == "upload" and entry.allowed and f"stored {FUTURE}.txt" in entry.outcome


async def test_a_bad_file_is_answered_with_path_line_and_stores_nothing(bot: Running) -> None:
    before = sorted(p.name for p in archive_of(bot).iterdir())
    bad = GOOD.decode().replace("\n简讯\n", "\n简讯：\n", 1).encode()
    text = await send_file(bot, f"{FUTURE}.txt", bad)
    line = GOOD.decode().split("\n").index("简讯") + 1
    assert f"未收录 / not stored:\n{FUTURE}.txt:{line}: " in text
    assert "did you mean 简讯?" in text
    assert sorted(p.name for p in archive_of(bot).iterdir()) == before


async def test_a_file_with_several_problems_gets_one_line_each(bot: Running) -> None:
    """Issue 20, item 6: the unfilled template sent to the bot: every problem on its own
    ``path:line: field: detail`` line, as ``archive add`` prints them."""
    from digest_core.archive.template import issue_template

    template = issue_template(dt.date.fromisoformat(FUTURE)).encode()
    text = await send_file(bot, f"{FUTURE}.yaml", template)
    problems = [ln for ln in text.splitlines() if ln.startswith(f"{FUTURE}.yaml:")]
    assert len(problems) == 8, text
    assert all(ln.endswith(": must not be empty") for ln in problems)
    assert len({ln.split(":")[1] for ln in problems}) == 8  # each with its own line number


async def test_a_published_day_is_replaced_only_with_the_caption_correct(bot: Running) -> None:
    published = archive_of(bot) / "2026-11-26.txt"
    old = published.read_bytes()
    fixed = old.replace("投机解码".encode(), "投机解码（更正）".encode(), 1)
    refused = await send_file(bot, "2026-11-26.txt", fixed)
    assert "is published already" in refused and "caption correct" in refused
    assert published.read_bytes() == old
    corrected = await send_file(bot, "2026-11-26.txt", fixed, caption="correct")
    assert "已更正 / corrected: 2026-11-26.txt" in corrected
    assert published.read_bytes() == fixed


async def test_an_undated_file_takes_the_date_from_its_caption(bot: Running) -> None:
    text = await send_file(bot, "draft.txt", GOOD, caption=FUTURE)
    assert f"已收录 / stored: {FUTURE}.txt" in text


async def test_a_reader_cannot_add_issues_and_nothing_is_downloaded(bot: Running) -> None:
    text = await send_file(bot, f"{FUTURE}.txt", GOOD, user=ANN)
    assert "Only admins can send issue files" in text
    assert not (archive_of(bot) / f"{FUTURE}.txt").exists()
    assert bot.fake.calls("getFile") == [] and bot.fake.downloads == []
    [entry] = await bot.service.ledger.audit_log(limit=1)
    assert entry.action == "upload" and not entry.allowed


async def test_a_file_over_1_mib_is_refused_before_downloading(bot: Running) -> None:
    text = await send_file(bot, f"{FUTURE}.txt", GOOD + b"x" * (1024 * 1024))
    assert "at most 1 MiB" in text
    assert bot.fake.calls("getFile") == [] and bot.fake.downloads == []
