"""The core commands through the real service (archive, SQLite ledger, console platform)."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.commands import ADMIN, MAX_REPLY_MESSAGES, Capability, Reply, Request, Status
from digest_core.delivery import DeliveryReport, TargetReport
from digest_core.models import Section
from digest_core.publishing.schedule import PostState
from digest_core.rendering import Message, Part, Renderer, RenderOptions, preview, render
from digest_core.rendering import discord as discord_render
from digest_core.rendering import plain as plain_render
from digest_core.rendering import telegram as telegram_render
from digest_core.service.root import DigestService, describe_report
from digest_core.testing import ManualClock, make_issue
from tests.samples import SAMPLE_ARCHIVE

#: the renderers a reply is checked in, by name
RENDERERS: dict[str, Renderer] = {
    "telegram": telegram_render,
    "discord": discord_render,
    "plain": plain_render,
}

# 09:00 in Shanghai on 2026-11-30: the bundled archive's newest issue is today's
MORNING = dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC)


def make_config(tmp_path: Path, *, archive_days: list[str] | None = None) -> Path:
    archive = tmp_path / "archive"
    archive.mkdir()
    for src in sorted(SAMPLE_ARCHIVE.glob("*.txt")):
        if archive_days is None or src.stem in archive_days:
            shutil.copy(src, archive / src.name)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{archive}"\ndatabase_url = "sqlite+aiosqlite:///{tmp_path}/l.db"\n',
        encoding="utf-8",
    )
    return cfg


@pytest.fixture
async def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DigestService]:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    settings = load_settings(make_config(tmp_path))
    clock = ManualClock(MORNING, autoadvance=False)
    async with open_service(settings, clock=clock, out=io.StringIO()) as svc:
        yield svc


def req(command: str, *args: str, admin: bool = False, flavor: Renderer = plain_render) -> Request:
    return Request(
        command,
        tuple(args),
        platform="console",
        flavor=flavor,
        user="u1",
        chat="c1",
        capabilities=ADMIN if admin else frozenset(),
    )


def text_of(messages: list[Message], flavor: Renderer = plain_render) -> str:
    return "\n".join(preview(m, flavor) for m in messages)


async def test_today_is_todays_issue(service: DigestService) -> None:
    reply = await service.commands.handle(req("today"))
    assert reply.status == "ok"
    text = text_of(reply.messages)
    assert "集合通信的拓扑账" in text  # the headline title of archive/2026-11-30.txt
    assert "还没有发布" not in text


async def test_today_before_todays_file_says_so_and_gives_the_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    settings = load_settings(make_config(tmp_path, archive_days=["2026-11-28", "2026-11-29"]))
    async with open_service(settings, clock=ManualClock(MORNING, autoadvance=False)) as svc:
        reply = await svc.commands.handle(req("today"))
    text = text_of(reply.messages)
    assert "今天（2026-11-30）的日报还没有发布" in text and "2026-11-29" in text
    assert "AI Tech Daily" in text  # the 2026-11-29 issue is the English one


@pytest.mark.parametrize(
    ("command", "args", "status", "fragment"),
    [
        ("brief", ("2",), "ok", "2."),
        ("brief", ("0",), "usage", "没有第 0 条"),
        ("brief", ("99",), "usage", "there is no brief 99"),
        ("brief", ("two",), "usage", "/brief N"),
        ("brief", ("²",), "usage", "/brief N"),  # str.isdigit() says yes; int() says no
        ("brief", ("9" * 5000,), "usage", "/brief N"),
        ("brief", ("-1",), "usage", "/brief N"),
        ("brief", (), "usage", "/brief N"),
        ("briefs", (), "ok", "【简讯】"),
        ("briefs", ("3",), "ok", "3."),
        ("headline", (), "ok", "【重点】"),
        ("headline", ("2026-11-27",), "ok", "KV 缓存"),  # that day's headline, not today's
        ("headline", ("2026-11-27", "x"), "usage", "too many arguments"),
        ("classic", ("2026-11-29",), "ok", "LoRA"),  # the English issue's classic
        ("toc", ("someday",), "usage", "/toc [YYYY-MM-DD]"),
        ("classic", (), "ok", "带着一个问题读"),
        ("toc", (), "ok", "AI 技术日报"),
        ("issue", ("2026-11-27",), "ok", "KV 缓存"),
        ("issue", ("2026-13-01",), "usage", "不是日期"),
        ("issue", ("2025-01-01",), "not_found", "2026-11-26"),
        ("issue", (), "usage", "/issue YYYY-MM-DD"),
        ("search", ("缓存",), "ok", "2026-11-27"),
        ("search", ("没有这个词的文章",), "not_found", "No issue mentions"),
        ("search", (), "usage", "/search"),
        ("today", ("extra",), "usage", "takes no argument"),
        ("nonsense", (), "usage", "/help"),
        ("start", ("2026-11-26",), "ok", "2026"),
        ("help", (), "ok", "/classic"),
    ],
)
async def test_reader_commands(
    service: DigestService, command: str, args: tuple[str, ...], status: str, fragment: str
) -> None:
    reply = await service.commands.handle(req(command, *args))
    assert reply.status == status
    assert type(reply.status) is Status  # a member, never a bare string
    assert fragment in text_of(reply.messages)


def test_every_status_is_documented() -> None:
    assert {s.value for s in Status} == {
        "ok", "usage", "not_found", "refused", "confirm", "error"
    }  # fmt: skip
    assert Reply([]).status is Status.OK


async def test_help_shows_admin_commands_only_to_admins(service: DigestService) -> None:
    assert "/repost" not in text_of((await service.commands.handle(req("help"))).messages)
    admin_help = text_of((await service.commands.handle(req("help", admin=True))).messages)
    assert "/repost" in admin_help


async def test_non_admin_repost_is_refused_audited_and_sends_nothing(
    service: DigestService,
) -> None:
    reply = await service.commands.handle(req("repost", "2026-11-30"))
    assert reply.status == "refused" and reply.private
    assert await service.ledger.records(limit=1) == []
    entries = await service.ledger.audit_log()
    assert [(e.action, e.allowed, e.user_id) for e in entries] == [("repost", False, "u1")]


async def test_admin_repost_asks_to_confirm_then_delivers_once(service: DigestService) -> None:
    first = await service.commands.handle(req("repost", "2026-11-30", admin=True))
    assert first.status == "confirm" and first.confirm is not None
    assert await service.ledger.records(limit=1) == []  # nothing before confirmation
    done = await service.commands.handle(first.confirm)
    assert done.status == "ok"
    assert "console 2026-11-30: 发送 / sent 1" in text_of(done.messages)
    again = await service.commands.handle(first.confirm)
    assert "sent 0" in text_of(again.messages)  # only what is missing: nothing
    forced = await service.commands.handle(replace(first.confirm, args=("2026-11-30", "force")))
    assert "sent 1" in text_of(forced.messages)
    actions = [(e.action, e.allowed) for e in await service.ledger.audit_log()]
    assert actions == [("repost", True)] * 3


async def test_repost_of_a_missing_day_or_bad_date_explains(service: DigestService) -> None:
    missing = await service.commands.handle(req("repost", "2020-01-01", admin=True))
    assert missing.status == "not_found" and missing.confirm is None
    bad = await service.commands.handle(req("repost", "yesterday", admin=True))
    assert bad.status == "usage" and "/repost" in text_of(bad.messages)


async def test_status_for_admins(service: DigestService) -> None:
    refused = await service.commands.handle(req("status"))
    assert refused.status == "refused"
    await service.post(dt.date(2026, 11, 30))
    reply = await service.commands.handle(req("status", admin=True))
    text = text_of(reply.messages)
    assert "next post: 2026-12-01 08:00" in text
    assert "stdout: 最近 / last 2026-11-30" in text


async def test_subscriptions_are_not_offered_on_the_console(service: DigestService) -> None:
    reply = await service.commands.handle(req("subscribe"))
    assert reply.status == "usage"


async def test_post_twice_sends_once_and_state_follows(service: DigestService) -> None:
    day = dt.date(2026, 11, 30)
    assert await service.post_state(day) is PostState.NONE
    first = await service.post(day)
    second = await service.post(day)
    assert [r.sent for r in first] == [1] and [r.sent for r in second] == [0]
    assert await service.post_state(day) is PostState.DONE


async def test_capabilities_are_checked_individually(service: DigestService) -> None:
    only_status = Request("repost", (), capabilities=frozenset({Capability.STATUS}))
    assert (await service.commands.handle(only_status)).status == "refused"


async def test_a_repost_during_the_daily_post_sends_nothing_twice(service: DigestService) -> None:
    day = dt.date(2026, 11, 30)
    daily, repost = await asyncio.gather(service.post(day), service.post(day))
    assert sorted(r.sent for r in daily + repost) == [0, 1]


async def test_rendered_replies_are_reused_until_the_file_changes(
    service: DigestService,
) -> None:
    first = await service.commands.handle(req("headline"))
    again = await service.commands.handle(req("headline"))
    assert [id(m) for m in first.messages] == [id(m) for m in again.messages]
    path = service.archive.root / "2026-11-30.txt"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("集合通信的拓扑账", "集合通信的拓扑总账"), encoding="utf-8")
    changed = await service.commands.handle(req("headline"))
    assert "集合通信的拓扑总账" in text_of(changed.messages)


async def test_a_gone_channel_is_reported_and_can_be_reactivated(service: DigestService) -> None:
    console = service.platforms["console"]
    [target] = console.channel_targets()
    await service.ledger.mark_gone(target, reason="Forbidden: bot was kicked")
    [report] = await service.post(dt.date(2026, 11, 30))
    assert not report.ok and report.sent == 0
    assert "/reactivate stdout" in describe_report(report)
    status = text_of((await service.commands.handle(req("status", admin=True))).messages)
    assert "stdout: 已停用" in status and "bot was kicked" in status

    refused = await service.commands.handle(req("reactivate", "console:stdout"))
    assert refused.status == "refused"
    done = await service.commands.handle(req("reactivate", "console:stdout", admin=True))
    assert done.status == "ok"
    again = await service.commands.handle(req("reactivate", "stdout", admin=True))
    assert again.status == "not_found"  # the platform defaults to the requester's
    [report] = await service.post(dt.date(2026, 11, 30))
    assert report.ok and report.sent == 1
    audit = [(e.action, e.allowed, e.outcome) for e in await service.ledger.audit_log()]
    assert ("reactivate", False, "refused") in audit and (
        "reactivate",
        True,
        "reactivated",
    ) in audit


async def test_repost_confirmation_carries_the_resolved_date(service: DigestService) -> None:
    first = await service.commands.handle(req("repost", admin=True))
    assert first.confirm is not None
    assert first.confirm.args == ("2026-11-30",)  # pressed after midnight: still 11-30
    forced = await service.commands.handle(req("repost", "force", admin=True))
    assert forced.confirm is not None and forced.confirm.args == ("2026-11-30", "force")


async def test_status_and_reports_count_parts_of_unknown_outcome(service: DigestService) -> None:
    """A cut send may have arrived: admins see it apart, never among the parts not sent."""
    [target] = service.platforms["console"].channel_targets()
    ref = make_issue().ref
    [row] = (await service.ledger.plan(ref, "console", [target], 1)).targets[0].parts
    assert await service.ledger.claim(row.id)
    await service.ledger.mark_unknown(row.id, "OutcomeUnknown: read timeout")
    status = text_of((await service.commands.handle(req("status", admin=True))).messages)
    assert "outcome unknown" in status and "read timeout" in status
    report = DeliveryReport(ref, "console", 1, 1, [TargetReport(target, unknown=1)], [])
    assert not report.ok
    assert "outcome unknown (sent again next time) 1" in describe_report(report)


def huge_issue_text(*, briefs: int, paragraph_chars: int = 450, paragraphs: int = 3) -> str:
    """A valid issue far too long for a few messages (about 0.6 MB with the defaults)."""
    lines = ["AI 技术日报", "本期重点：很长的一期。", "重点", "头条：很长的一期", "头条正文。"]
    lines += ["https://example.org/headline", *(["简讯"] if briefs else [])]
    for n in range(1, briefs + 1):
        lines.append(f"第{n}条简讯的标题")
        lines += [f"第{n}条第{p}段：" + "长" * paragraph_chars for p in range(paragraphs)]
        lines += [f"https://example.org/brief/{n}", ""]
    return "\n".join(lines) + "\n"


async def test_help_is_answered_while_a_huge_issue_is_parsed(
    service: DigestService, tmp_path: Path
) -> None:
    day = "2026-11-25"
    (tmp_path / "archive" / f"{day}.txt").write_text(huge_issue_text(briefs=150), encoding="utf-8")
    reading = asyncio.create_task(service.commands.handle(req("issue", day)))
    await asyncio.sleep(0)  # /issue starts: its file is being parsed and rendered
    helped = await service.commands.handle(req("help"))
    assert "/search" in text_of(helped.messages)
    assert not reading.done()  # another reader's /help did not wait for the huge /issue
    reply = await reading
    assert reply.status == "ok"
    assert len(reply.messages) <= MAX_REPLY_MESSAGES
    text = text_of(reply.messages)
    assert "头条：很长的一期" in text and "第1条简讯的标题" in text
    shown = sum(f"第{n}条简讯的标题" in text for n in range(1, 151))
    hint = text_of(reply.messages[-1:])
    assert f"另有 {150 - shown} 条简讯未显示：用 /brief {shown + 1} {day}" in hint
    # the hint works: brief N of that day, in one reply of a few messages
    brief = await service.commands.handle(req("brief", str(shown + 1), day))
    assert brief.status == "ok" and f"第{shown + 1}条简讯的标题" in text_of(brief.messages)
    assert f"第{shown}条简讯的标题" not in text_of(brief.messages)


@pytest.mark.parametrize("flavor", list(RENDERERS.values()), ids=list(RENDERERS))
async def test_a_long_reply_is_trimmed_to_a_few_messages(
    service: DigestService, tmp_path: Path, flavor: Renderer
) -> None:
    path = tmp_path / "archive" / "2026-11-30.txt"  # today's issue
    path.write_text(huge_issue_text(briefs=40, paragraph_chars=300), encoding="utf-8")
    for command in ("today", "briefs"):
        reply = await service.commands.handle(req(command, flavor=flavor))
        assert reply.status == "ok"
        assert 2 <= len(reply.messages) <= MAX_REPLY_MESSAGES
        last = text_of(reply.messages[-1:], flavor)
        assert "条简讯未显示：用 /brief " in last and "2026-11-30" not in last  # today's: no date
    # one item too long for a few messages: cut, with its link
    long_headline = huge_issue_text(briefs=0, paragraph_chars=3000, paragraphs=1).replace(
        "头条正文。", "\n".join("头条" + "长" * 1500 for _ in range(20))
    )
    path.write_text(long_headline, encoding="utf-8")
    reply = await service.commands.handle(req("headline", flavor=flavor))
    assert len(reply.messages) == MAX_REPLY_MESSAGES
    assert "https://example.org/headline" in text_of(reply.messages[-1:], flavor)
    assert "too long: showing 3 of" in text_of(reply.messages[-1:], flavor)


async def test_section_buttons_answer_from_the_core_rendered_once(service: DigestService) -> None:
    commands = service.commands
    day = commands.today_date()
    first = await commands.section(req("briefs"), day, Section.BRIEFS)
    second = await commands.section(req("briefs", admin=True), day, Section.BRIEFS)
    assert first.status is Status.OK and first.private
    issue = service.archive.on(day)
    expected = render(issue, plain_render, Part.BRIEFS, options=RenderOptions(buttons=False))
    assert text_of(first.messages) == text_of(expected)
    # the second press reuses the first rendering (the render cache), payloads shared
    assert all(a is b for a, b in zip(first.messages, second.messages, strict=True))
    missing = await commands.section(req("headline"), dt.date(2001, 1, 1), Section.HEADLINE)
    assert missing.status is Status.NOT_FOUND and "2001-01-01" in str(missing.extra["problem"])


HOSTILE = "a\x00b\u202ec"  # a NUL and a right-to-left override


@pytest.mark.parametrize("flavor", list(RENDERERS.values()), ids=list(RENDERERS))
@pytest.mark.parametrize(
    "command",
    [("search", HOSTILE), ("search", "KV", HOSTILE), ("issue", HOSTILE), ("brief", "1", HOSTILE)],
)
async def test_a_readers_argument_is_quoted_back_escaped(
    service: DigestService, flavor: Renderer, command: tuple[str, ...]
) -> None:
    """Whatever a reader types is quoted back with its invisible characters written as
    escapes, on every platform's rendering (/search echoed them raw)."""
    reply = await service.commands.handle(req(*command, flavor=flavor))
    text = "\n".join(preview(m, flavor) for m in reply.messages)
    assert "\x00" not in text and "\u202e" not in text, text
    assert "\\x00" in text and "\\u202e" in text, text  # quoted, so the reader sees what they typed
