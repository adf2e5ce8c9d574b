"""Forum posts and threads per issue through the real discord.py client and the double: one post
per issue in a forum (title, tags, the issue as its messages), corrected inside it; a thread on
each issue's first message in a text channel; an open the bot never heard back from is found
again, not opened twice."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from bots.cli.doctor import run_checks
from bots.doctor import Status
from digest_core.delivery.threads import thread_title
from tests.bots.discord.harness import (
    CHANNELS,
    GUILD,
    TODAY,
    TWO_PARTS,
    clock_on,
    fake_discord,
    make_settings,
    running_bot,
)
from tests.fakes.discord_api import FakeDiscord

FORUM = 910_000_000_000_000_041
BRIEF = "单根“针”的检索测试已经很难拉开模型差距。"
HEADLINE = "深读：KV 缓存为什么要分页——从显存碎片到前缀共享"
TITLE = thread_title(TWO_PARTS, HEADLINE)
POST = "POST /channels/{channel_id}/threads"
THREAD_ON_MESSAGE = "POST /channels/{channel_id}/messages/{message_id}/threads"


def _rewrite(archive: Path, old: str, new: str, day: dt.date = TWO_PARTS) -> None:
    path = archive / f"{day}.txt"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


async def _forum(fake: FakeDiscord) -> dict[str, str]:
    """The forum and its tags' ids by name."""
    data = await fake.add_forum(GUILD, FORUM, "digest-forum", tags=["日报", "AI", "论文"])
    return {t["name"]: t["id"] for t in data["available_tags"]}


async def test_a_forum_gets_one_post_per_issue_corrected_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        tags = await _forum(fake)
        forum = {"id": str(FORUM), "forum": True, "tags": ["日报", "AI"]}
        settings = make_settings(tmp_path, monkeypatch, fake, channels=(forum, CHANNELS[0]))
        async with running_bot(settings, clock=clock_on(TWO_PARTS)) as (service, _):
            [report] = await service.post(TWO_PARTS)
            [again] = await service.post(TWO_PARTS)  # nothing left to send: no second post
            [thread] = fake.threads(FORUM)
            thread_id = int(thread["id"])
            posted = fake.messages(thread_id)
            channel = fake.messages(CHANNELS[0])
            # the post goes quiet and is archived before the correction comes
            await fake.moderate_thread(thread_id, archived=True)
            _rewrite(settings.archive_dir, BRIEF, "单根“针”的检索测试已经无法拉开差距。")
            service.archive.refresh(full=True)
            [corrected] = await service.correct(TWO_PARTS)

    assert report.ok and report.sent == 4 and again.sent == 0
    assert thread["name"] == TITLE and thread["applied_tags"] == [tags["日报"], tags["AI"]]
    assert fake.counters.requests[POST] == 1 and fake.messages(FORUM) == []
    assert len(posted) == 2 and posted[0].id == thread_id  # the post's first message is the issue's
    assert [m.content for m in posted] == [m.content for m in channel]  # the same issue
    assert corrected.ok and corrected.edited == 2 and corrected.added == 0
    after = fake.messages(thread_id)
    assert [m.id for m in after] == [m.id for m in posted]  # edited in place
    assert [len(m.edits) for m in after] == [len(m.edits) for m in fake.messages(CHANNELS[0])]
    assert any("已经无法拉开差距" in str(m.embeds) + m.content for m in after)
    assert not fake.channel(thread_id)["thread_metadata"]["archived"]  # reopened to be edited
    assert len(fake.threads(FORUM)) == 1


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_each_issue_opens_its_own_post_and_a_text_channel_a_thread_on_its_first_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        await _forum(fake)
        channels = (
            {"id": str(FORUM), "forum": True},
            {"id": str(CHANNELS[0]), "thread_per_issue": True},
        )
        settings = make_settings(tmp_path, monkeypatch, fake, channels=channels)
        async with running_bot(settings, clock=clock_on(TODAY)) as (service, _):
            reports = [r for day in (TWO_PARTS, TODAY) for r in await service.post(day)]
            _rewrite(settings.archive_dir, BRIEF, "单根“针”的检索测试已经无法拉开差距。")
            service.archive.refresh(full=True)
            [corrected] = await service.correct(TWO_PARTS)

    assert all(r.ok for r in reports)
    posts = fake.threads(FORUM)
    discussions = fake.threads(CHANNELS[0])
    assert [t["name"][:10] for t in posts] == [str(TWO_PARTS), str(TODAY)]
    assert [t["name"] for t in discussions] == [t["name"] for t in posts]
    # the issue stays in the text channel; each thread is on the first message of its issue
    messages = fake.messages(CHANNELS[0])
    assert len(messages) == 3  # two parts, then one
    assert [int(t["id"]) for t in discussions] == [messages[0].id, messages[2].id]
    assert all(fake.messages(int(t["id"])) == [] for t in discussions)  # left for readers
    assert corrected.ok and corrected.edited == 2  # one message in each place
    assert len(messages[1].edits) == 1 and len(fake.messages(int(posts[0]["id"]))[1].edits) == 1


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_post_the_bot_never_heard_back_from_is_found_again_not_opened_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        await _forum(fake)
        # the post is made at once, its answer comes after the bot has given up waiting
        fake.fail_next(FORUM, "slow", delay=1.5, commit=True)
        settings = make_settings(
            tmp_path,
            monkeypatch,
            fake,
            channels=({"id": str(FORUM), "forum": True},),
            request_timeout_seconds=0.3,
        )
        async with running_bot(settings, clock=clock_on(TWO_PARTS)) as (service, _):
            [report] = await service.post(TWO_PARTS)
            threads = await service.ledger.threads_of(report.delivery_id)
            await fake.wait_until(lambda: fake.counters.statuses[201] >= 1, within=5)

    assert report.ok and report.sent == 2
    [thread] = fake.threads(FORUM)
    assert fake.counters.requests[POST] == 1  # asked once: the retry found it
    assert fake.counters.requests["GET /guilds/{guild_id}/threads/active"] == 1
    assert len(fake.messages(int(thread["id"]))) == 2
    assert threads[str(FORUM)].thread_id == thread["id"]


async def test_doctor_checks_forums_tags_and_thread_rights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.discord_threads import CREATE_PUBLIC_THREADS

    async with fake_discord() as fake:
        await _forum(fake)
        fake.set_overwrite(CHANNELS[1], GUILD, deny=CREATE_PUBLIC_THREADS)
        channels = (
            {"id": str(FORUM), "forum": True, "tags": ["日报", "周报"]},
            {"id": str(CHANNELS[0]), "forum": True},
            {"id": str(CHANNELS[1]), "thread_per_issue": True},
            {"id": str(CHANNELS[2]), "thread_per_issue": True},
        )
        settings = make_settings(tmp_path, monkeypatch, fake, channels=channels)
        checks = {c.name: c for c in await run_checks(settings) if c.area == "discord"}
        plain = make_settings(tmp_path, monkeypatch, fake, channels=(FORUM,))
        as_text = {c.name: c for c in await run_checks(plain) if c.area == "discord"}

    missing_tag = checks[f"rights {FORUM}"]
    assert missing_tag.status is Status.FAIL and "'周报'" in missing_tag.detail
    assert checks[f"rights {CHANNELS[0]}"].status is Status.FAIL  # not a forum
    no_threads = checks[f"rights {CHANNELS[1]}"]
    assert no_threads.status is Status.FAIL and "Create Public Threads" in no_threads.detail
    assert checks[f"rights {CHANNELS[2]}"].status is Status.OK
    assert as_text[f"rights {FORUM}"].status is Status.FAIL
    assert "forum = true" in as_text[f"rights {FORUM}"].fix
