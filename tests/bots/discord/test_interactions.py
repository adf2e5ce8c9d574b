"""Slash commands, buttons and the gateway: the real discord.py client against the double."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import discord
import pytest

from bots.discord.cli import BOT_PERMISSIONS, invite_url, sync_commands
from bots.discord.client import ShardedDigestClient
from digest_core.commands import Request
from digest_core.commands.catalogue import CATALOGUE
from digest_core.rendering import Part, RenderOptions, render
from digest_core.rendering import discord as discord_render
from digest_core.service.root import DigestService
from tests.bots.discord.harness import (
    ADMIN_ROLE,
    ADMIN_USER,
    CHANNELS,
    GUILD,
    MANAGE_GUILD,
    MANAGER,
    OTHER_CHANNEL,
    READER,
    TODAY,
    TWO_PARTS,
    fake_discord,
    make_settings,
    running_bot,
)
from tests.fakes.discord_api import EPHEMERAL, FakeDiscord, InteractionRecord, StoredMessage

#: every slash command: the catalogue's listed commands, less those another one covers
COMMANDS = {s.name for s in CATALOGUE if s.menu and not s.covered_by}

#: a server of someone else's that the (public) bot was added to: no configured channel there
STRANGER_GUILD = 920_000_000_000_000_001
STRANGER_CHANNEL = 920_000_000_000_000_011
STRANGER = 920_000_000_000_000_031
#: a server the bot joins after it started, holding a configured channel
LATE_GUILD = 930_000_000_000_000_001
LATE_CHANNEL = 930_000_000_000_000_011


def answer(record: InteractionRecord) -> list[dict[str, Any]]:
    """Every message the bot answered with: the initial response, then follow-ups, as bodies
    (content and embeds as Discord stores them)."""
    out = []
    messages = [record.original] if record.original and record.callback_type == 4 else []
    messages += [m for m in record.followups if m is not record.original or not messages]
    for m in messages:
        out.append({"content": m.content, "embeds": m.embeds, "ephemeral": m.ephemeral})
    return out


def visible(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rendered payloads as they look stored (embeds typed "rich"), for comparison."""
    return [
        {
            "content": p.get("content", ""),
            "embeds": [{"type": "rich", **e} for e in p.get("embeds", [])],
        }
        for p in payloads
    ]


def original(record: InteractionRecord) -> StoredMessage:
    """The message the interaction's initial response created (it must exist)."""
    assert record.original is not None
    return record.original


async def expected(service: DigestService, command: str, *args: str) -> list[dict[str, Any]]:
    reply = await service.commands.handle(
        Request(command, args, platform="discord", flavor=discord_render, user=str(READER))
    )
    return visible([m.payload for m in reply.messages])


def strip(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"content": m["content"], "embeds": m["embeds"]} for m in messages]


# ---------------------------------------------------------------------------- sync and invite


async def test_sync_registers_every_command_with_chinese_localizations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        names = await sync_commands(settings.discord)
        guild_names = await sync_commands(settings.discord, guild=GUILD)
        registered = {c["name"]: c for c in fake.commands()}
        in_guild = {c["name"] for c in fake.commands(GUILD)}
    assert set(names) == set(guild_names) == set(registered) == in_guild == COMMANDS
    today = registered["today"]
    assert today["name_localizations"]["zh-CN"] == "今日"
    assert today["description_localizations"]["zh-TW"].startswith("今天的日報")
    [date] = registered["issue"]["options"]
    assert date["autocomplete"] is True and date["name_localizations"]["zh-CN"] == "日期"
    # admin commands carry Manage Server as a hint (the code checks it again)
    assert int(registered["repost"]["default_member_permissions"]) == 1 << 5
    assert int(registered["reactivate"]["default_member_permissions"]) == 1 << 5
    reactivate = registered["reactivate"]
    assert reactivate["name_localizations"] == {"zh-CN": "恢复推送", "zh-TW": "恢復推送"}
    [target] = reactivate["options"]
    assert target["autocomplete"] is True and target["required"] is True
    assert target["name_localizations"]["zh-CN"] == "频道"
    assert registered["today"]["default_member_permissions"] is None
    for command in registered.values():
        assert "en-US" not in command.get("name_localizations", {})


def test_invite_url_asks_for_the_bot_and_its_commands_with_the_posting_permissions() -> None:
    url = invite_url(123456789012345678)
    assert "client_id=123456789012345678" in url
    assert "scope=bot+applications.commands" in url
    perms = discord.Permissions(int(url.split("permissions=")[1].split("&")[0]))
    assert perms == BOT_PERMISSIONS
    assert perms.send_messages and perms.embed_links and perms.view_channel
    assert not perms.administrator and not perms.mention_everyone


# ---------------------------------------------------------------------------- reader commands


@pytest.fixture
async def bot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    async with fake_discord() as fake:
        # tests here send bursts of commands; the flood limit has its own test
        settings = make_settings(tmp_path, monkeypatch, fake, command_burst=100)
        await sync_commands(settings.discord)
        async with running_bot(settings) as (service, adapter):
            yield fake, service, adapter


async def test_each_reader_command_answers_in_the_channel(bot: Any) -> None:
    fake, service, _ = bot
    cases: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
        ("today", {}, ()),
        ("headline", {}, ()),
        ("briefs", {}, ()),
        ("briefs", {"n": 2}, ("2",)),
        ("classic", {}, ()),
        ("issue", {"date": str(TWO_PARTS)}, (str(TWO_PARTS),)),
        ("search", {"keyword": "模型"}, ("模型",)),
    ]
    for name, options, args in cases:
        record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, name, options)
        await record.wait_for(lambda r: r.callback_type == 4 or bool(r.followups))
        want = await expected(service, name, *args)
        parts = len(want)
        await record.wait_for(lambda r, parts=parts: len(answer(r)) >= parts)
        got = answer(record)
        assert strip(got) == want, name
        assert not any(m["ephemeral"] for m in got), name
    # the issue of a date is that issue, over two messages
    assert len(await expected(service, "issue", str(TWO_PARTS))) == 2


async def test_a_reader_over_the_flood_limit_is_told_privately_admins_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, command_burst=2)
        await sync_commands(settings.discord)
        async with running_bot(settings):
            for _ in range(2):
                record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "help")
                assert "/today" in answer(record)[0]["content"]
            record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "today")
            [reply] = answer(record)
            assert reply["ephemeral"] and "请慢一点" in reply["content"]
            for _ in range(3):  # a member with Manage Server is an admin: not limited
                record = await fake.run_slash_command(
                    GUILD, CHANNELS[0], MANAGER, "help", permissions=MANAGE_GUILD
                )
                # (/help is two messages on Discord since the readers' commands joined it)
                await record.wait_for_followups(1)
                assert "/repost" in "".join(m["content"] for m in answer(record))


async def test_bad_input_gets_usage_not_an_error(bot: Any) -> None:
    fake, _, _ = bot
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "issue", {"date": "明天"})
    [reply] = answer(record)
    assert "不是日期" in reply["content"] and "/issue" in reply["content"]
    record = await fake.run_slash_command(
        GUILD, CHANNELS[0], READER, "issue", {"date": "2020-01-01"}
    )
    [reply] = answer(record)
    assert "2020-01-01" in reply["content"]


async def test_issue_dates_autocomplete_from_the_archive(bot: Any) -> None:
    fake, _, _ = bot
    record = await fake.run_autocomplete(
        GUILD, CHANNELS[0], READER, "issue", {"date": "11-2"}, focused="date"
    )
    assert [c["value"] for c in record.choices] == [
        "2026-11-29",
        "2026-11-28",
        "2026-11-27",
        "2026-11-26",
    ]
    record = await fake.run_autocomplete(
        GUILD, CHANNELS[0], READER, "issue", {"date": ""}, focused="date"
    )
    assert record.choices[0] == {"name": "2026-11-30", "value": "2026-11-30"}
    assert len(record.choices) == 5


async def test_subscribers_get_the_daily_issue_by_dm(bot: Any) -> None:
    fake, service, _ = bot
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "subscribe")
    await record.wait_for_callback()
    [ack] = answer(record)
    assert ack["ephemeral"] and "已订阅" in ack["content"]
    [subscriber] = await service.ledger.subscribers("discord")
    dm = fake.channel(int(subscriber.id))
    assert dm["type"] == 1 and dm["recipients"][0]["id"] == str(READER)
    await service.poster.run_due(TODAY)
    [issue_dm] = fake.messages(int(subscriber.id))
    assert issue_dm.embeds and issue_dm.components  # the channel post, buttons included
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "unsubscribe")
    [ack] = answer(record)
    assert ack["ephemeral"] and "已取消订阅" in ack["content"]
    assert await service.ledger.subscribers("discord") == []


# ---------------------------------------------------------------------------- buttons


async def test_a_section_button_answers_privately_with_that_part_of_that_issue(
    bot: Any,
) -> None:
    fake, service, _ = bot
    await service.post(TWO_PARTS)
    post = fake.messages(CHANNELS[0])[-1]
    custom_id = f"dg:{TWO_PARTS}:briefs"
    record = await fake.press_button(CHANNELS[0], post.id, custom_id, READER)
    issue = service.archive.on(TWO_PARTS)
    want = visible(
        [m.payload for m in render(issue, discord_render, Part.BRIEFS, options=RenderOptions())]
    )
    await record.wait_for(lambda r: len(answer(r)) >= len(want))
    got = answer(record)
    assert strip(got) == want
    assert all(m["ephemeral"] for m in got)
    assert record.callback_data["flags"] & EPHEMERAL
    # the post itself is untouched
    assert post.edits == []


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_buttons_keep_working_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings) as (service, _):
            await service.post(TODAY)
        post = fake.messages(CHANNELS[1])[-1]
        # a new process: a new client that never sent that message
        async with running_bot(settings) as (service, _):
            record = await fake.press_button(CHANNELS[1], post.id, f"dg:{TODAY}:classic", READER)
            issue = service.archive.on(TODAY)
        [got] = answer(record)
        [want] = visible([m.payload for m in render(issue, discord_render, Part.CLASSIC)])
        assert strip([got]) == [want] and got["ephemeral"]
        assert fake.counters.gateway["identify"] == 2


# ---------------------------------------------------------------------------- admin commands


async def confirm_repost(
    fake: FakeDiscord, user: int, options: dict[str, Any], **member: Any
) -> tuple[InteractionRecord, InteractionRecord]:
    asked = await fake.run_slash_command(GUILD, CHANNELS[0], user, "repost", options, **member)
    prompt = original(asked)
    assert prompt.ephemeral
    [row] = prompt.components
    confirm = row["components"][0]
    assert confirm["label"] == "确认 / Confirm"
    pressed = await fake.press_button(CHANNELS[0], prompt.id, confirm["custom_id"], user, **member)
    await pressed.wait_for_followups(1, within=10)
    return asked, pressed


async def test_an_admin_reposts_after_confirming_and_gets_a_private_report(bot: Any) -> None:
    fake, service, _ = bot
    await service.post(TODAY)
    fake.fail_next(CHANNELS[2], "missing_access", times=5)
    asked, pressed = await confirm_repost(
        fake, ADMIN_USER, {"date": str(TODAY), "force": True}, member_roles=[ADMIN_ROLE]
    )
    assert "确认重新推送 2026-11-30" in asked.callback_data["content"]
    # the confirmation was replaced (buttons gone), the report came privately
    assert pressed.callback_type == 7
    assert original(asked).components == []
    assert "开始推送" in original(asked).content
    [report] = pressed.followups
    assert report.ephemeral
    assert "discord 2026-11-30" in report.content and "失效 / gone 1" in report.content
    assert str(CHANNELS[2]) in report.content
    for channel, copies in ((CHANNELS[0], 2), (CHANNELS[1], 2), (CHANNELS[2], 1)):
        assert len(fake.messages(channel)) == copies
    [entry] = await service.ledger.audit_log(platform="discord")
    assert entry.allowed and entry.action == "repost" and entry.user_id == str(ADMIN_USER)


async def test_manage_server_is_enough_to_repost(bot: Any) -> None:
    fake, _service, _ = bot
    _, pressed = await confirm_repost(fake, MANAGER, {}, permissions=MANAGE_GUILD)
    [report] = pressed.followups
    assert "发送 / sent 3" in report.content  # today's issue, missing everywhere
    assert len(fake.messages(OTHER_CHANNEL)) == 0


@pytest.mark.parametrize("command", ["repost", "status"])
async def test_admin_commands_refuse_readers_privately_and_audit_it(bot: Any, command: str) -> None:
    fake, service, _ = bot
    # the server changed the command's default permissions: Discord lets the reader run it
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, command, {})
    [reply] = answer(record)
    assert reply["ephemeral"] and "只有管理员" in reply["content"]
    [entry] = await service.ledger.audit_log(platform="discord")
    assert not entry.allowed and entry.action == command and entry.user_id == str(READER)
    assert all(len(fake.messages(c)) == 0 for c in CHANNELS)


async def test_cancel_and_other_users_cannot_confirm(bot: Any) -> None:
    fake, service, _ = bot
    asked = await fake.run_slash_command(
        GUILD, CHANNELS[0], ADMIN_USER, "repost", {}, member_roles=[ADMIN_ROLE]
    )
    prompt = original(asked)
    confirm, cancel = prompt.components[0]["components"]
    other = await fake.press_button(
        CHANNELS[0], prompt.id, confirm["custom_id"], MANAGER, permissions=MANAGE_GUILD
    )
    assert other.ephemeral and "只有发起的管理员" in original(other).content
    cancelled = await fake.press_button(
        CHANNELS[0], prompt.id, cancel["custom_id"], ADMIN_USER, member_roles=[ADMIN_ROLE]
    )
    assert cancelled.callback_type == 7 and "已取消" in prompt.content
    assert all(len(fake.messages(c)) == 0 for c in CHANNELS)
    assert await service.ledger.audit_log(platform="discord") == []


async def test_status_for_an_admin(bot: Any) -> None:
    fake, service, _ = bot
    await service.post(TODAY)
    record = await fake.run_slash_command(
        GUILD, CHANNELS[0], ADMIN_USER, "status", {}, member_roles=[ADMIN_ROLE]
    )
    [reply] = answer(record)
    assert reply["ephemeral"]
    assert "discord: 3 个目标 / targets" in reply["content"]
    assert f"{CHANNELS[0]}: 最近 / last 2026-11-30" in reply["content"]


# ---------------------------------------------------------------------------- the gateway


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_gateway_drop_mid_post_resumes_without_a_missed_or_doubled_post(
    bot: Any,
) -> None:
    fake, service, _ = bot
    fake.fail_next(CHANNELS[2], "slow", delay=0.5)  # keeps the post under way a while
    posting = asyncio.create_task(service.poster.run_due(TWO_PARTS))
    await fake.wait_until(lambda: len(fake.messages(CHANNELS[0])) >= 1)
    await fake.disconnect_gateway(4000, hold=True)
    assert not posting.done()
    assert await posting == "posted"  # posts go over REST; the gateway is not needed for them
    # an admin's command sent while the bot is disconnected reaches it through RESUME
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "headline", {}, wait=False)
    fake.release_gateway()
    await record.wait_for_callback()
    assert answer(record)[0]["embeds"]
    for channel in CHANNELS:
        posts = [m for m in fake.messages(channel) if "interaction" not in m.extra]
        assert len(posts) == 2  # both parts, once
    assert await service.poster.run_due(TWO_PARTS) == "already"
    assert fake.counters.gateway["identify"] == 1
    assert fake.counters.gateway["resume"] == 1


async def test_sharding_when_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_wait(self: Any, shard_id: int | None, *, initial: bool = False) -> None:
        """discord.py waits 5 s between IDENTIFYs (Discord's limit); the double has none."""

    monkeypatch.setattr(ShardedDigestClient, "before_identify_hook", no_wait)
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, shard_count=2)
        await sync_commands(settings.discord)
        async with running_bot(settings) as (_, adapter):
            assert isinstance(adapter.client, discord.AutoShardedClient)
            record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "classic", {})
            assert answer(record)[0]["embeds"]
        shards = sorted(tuple(p["shard"]) for p in fake.identify_payloads)
    assert shards == [(0, 2), (1, 2)]
    # no privileged intents asked for
    intents = discord.Intents._from_value(fake.identify_payloads[0]["intents"])
    assert not (intents.members or intents.presences or intents.message_content)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_slow_work_is_deferred_first_then_answered(bot: Any) -> None:
    fake, service, _ = bot
    # opening the DM channel takes 2 s: past the 3-second rule unless the bot defers
    fake.fail_next(None, "slow", delay=2.0)
    record = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "subscribe")
    assert record.callback_type == 5 and record.ephemeral  # "thinking…", only for the reader
    await record.wait_for_followups(1)
    [ack] = record.followups
    assert ack is record.original and ack.ephemeral and "已订阅" in ack.content
    assert len(await service.ledger.subscribers("discord")) == 1


# ---------------------------------------------------------------------------- where admins count


async def test_manage_server_in_another_server_grants_nothing(bot: Any) -> None:
    """Anyone can add a public bot to a server they own: Manage Server there must not let them
    read /status or repost to the digest's channels (reviewer's F2)."""
    fake, service, _ = bot
    await service.post(TODAY)
    before = {c: len(fake.messages(c)) for c in CHANNELS}
    await fake.add_guild(STRANGER_GUILD, "stranger's server", channels=[(STRANGER_CHANNEL, "x")])
    owner = {"permissions": MANAGE_GUILD | (1 << 3)}  # Manage Server and Administrator
    status = await fake.run_slash_command(
        STRANGER_GUILD, STRANGER_CHANNEL, STRANGER, "status", {}, **owner
    )
    [reply] = answer(status)
    assert reply["ephemeral"] and "只有管理员" in reply["content"]
    assert str(CHANNELS[0]) not in reply["content"]
    asked = await fake.run_slash_command(
        STRANGER_GUILD, STRANGER_CHANNEL, STRANGER, "repost", {"force": True}, **owner
    )
    [reply] = answer(asked)
    assert "只有管理员" in reply["content"] and original(asked).components == []
    # a role id of the digest's server claimed in another server counts for nothing either
    record = await fake.run_slash_command(
        STRANGER_GUILD, STRANGER_CHANNEL, STRANGER, "status", {}, member_roles=[ADMIN_ROLE]
    )
    assert "只有管理员" in answer(record)[0]["content"]
    assert {c: len(fake.messages(c)) for c in CHANNELS} == before
    entries = await service.ledger.audit_log(platform="discord")
    assert sorted(e.action for e in entries) == ["repost", "status", "status"]
    assert not any(e.allowed for e in entries)
    assert {e.user_id for e in entries} == {str(STRANGER)}
    # in the digest's own server the same permission is enough
    record = await fake.run_slash_command(
        GUILD, OTHER_CHANNEL, MANAGER, "status", {}, permissions=MANAGE_GUILD
    )
    assert "discord: 3 个目标 / targets" in answer(record)[0]["content"]


async def test_admin_users_are_admins_everywhere_and_dms_give_no_server_rights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, admin_users=[ADMIN_USER])
        await sync_commands(settings.discord)
        async with running_bot(settings) as (service, adapter):
            await fake.add_guild(STRANGER_GUILD, "elsewhere", channels=[STRANGER_CHANNEL])
            assert adapter.client is not None
            dm = (await adapter.client.http.start_private_message(MANAGER))["id"]
            # a DM: no member, no server permissions, whatever the payload claims
            refused = await fake.run_slash_command(
                None, int(dm), MANAGER, "status", {}, permissions=MANAGE_GUILD
            )
            [reply] = answer(refused)
            assert reply["ephemeral"] and "只有管理员" in reply["content"]
            # an explicit admin user: in a DM and in any server
            for guild, channel in ((None, int(dm)), (STRANGER_GUILD, STRANGER_CHANNEL)):
                record = await fake.run_slash_command(guild, channel, ADMIN_USER, "status", {})
                [reply] = answer(record)
                assert reply["ephemeral"] and "discord: 3 个目标 / targets" in reply["content"]
            entries = await service.ledger.audit_log(platform="discord")
        assert [(e.user_id, e.allowed) for e in entries] == [(str(MANAGER), False)]


async def test_a_server_that_arrives_later_with_a_configured_channel_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        # LATE_CHANNEL does not exist at ready (GET /channels answers 404): it grants nothing
        settings = make_settings(tmp_path, monkeypatch, fake, channels=(*CHANNELS, LATE_CHANNEL))
        await sync_commands(settings.discord)
        await fake.add_guild(LATE_GUILD, "late", channels=[LATE_CHANNEL + 1])
        async with running_bot(settings) as (_, adapter):
            assert adapter.client is not None
            await fake.wait_until(lambda: fake.counters.statuses[404] >= 1)
            refused = await fake.run_slash_command(
                LATE_GUILD, LATE_CHANNEL + 1, MANAGER, "status", {}, permissions=MANAGE_GUILD
            )
            assert "只有管理员" in answer(refused)[0]["content"]
            assert adapter.client.admin_guild_ids() == {GUILD}
            # the bot joins a server holding the configured channel: GUILD_CREATE maps it
            await fake.add_guild(LATE_GUILD + 1, "later", channels=[LATE_CHANNEL])
            record = await fake.run_slash_command(
                LATE_GUILD + 1, LATE_CHANNEL, MANAGER, "status", {}, permissions=MANAGE_GUILD
            )
            assert "discord: 4 个目标 / targets" in answer(record)[0]["content"]
            assert adapter.client.admin_guild_ids() == {GUILD, LATE_GUILD + 1}
            assert adapter.client.channel_guilds[LATE_CHANNEL] == LATE_GUILD + 1


# ---------------------------------------------------------------------------- /reactivate


async def test_reactivate_brings_a_deleted_channel_back_end_to_end(bot: Any) -> None:
    fake, service, _ = bot
    gone = CHANNELS[1]
    await fake.delete_channel(gone)
    [report] = await service.post(TWO_PARTS)
    assert [t.id for t in report.gone] == [str(gone)]
    admin: dict[str, Any] = {"member_roles": [ADMIN_ROLE]}
    status = await fake.run_slash_command(GUILD, CHANNELS[0], ADMIN_USER, "status", {}, **admin)
    assert f"/reactivate discord:{gone}" in answer(status)[0]["content"]
    # the deactivated channels autocomplete, for admins only
    typed = await fake.run_autocomplete(
        GUILD, CHANNELS[0], ADMIN_USER, "reactivate", {"target": ""}, focused="target", **admin
    )
    [choice] = typed.choices
    assert choice["value"] == str(gone) and str(gone) in choice["name"]
    typed = await fake.run_autocomplete(
        GUILD, CHANNELS[0], ADMIN_USER, "reactivate", {"target": "nope"}, focused="target", **admin
    )
    assert typed.choices == []
    typed = await fake.run_autocomplete(
        GUILD, CHANNELS[0], READER, "reactivate", {"target": ""}, focused="target"
    )
    assert typed.choices == []
    # a reader is refused privately (and audited)
    refused = await fake.run_slash_command(
        GUILD, CHANNELS[0], READER, "reactivate", {"target": str(gone)}
    )
    [reply] = answer(refused)
    assert reply["ephemeral"] and "只有管理员" in reply["content"]
    # the channel exists again (access restored); the admin reactivates it as /status says
    await fake.add_channel(GUILD, gone, "digest-1")
    done = await fake.run_slash_command(
        GUILD, CHANNELS[0], ADMIN_USER, "reactivate", {"target": f"discord:{gone}"}, **admin
    )
    [reply] = answer(done)
    assert reply["ephemeral"] and f"已恢复 discord:{gone}" in reply["content"]
    assert await service.ledger.inactive_targets("discord") == []
    again = await fake.run_slash_command(
        GUILD, CHANNELS[0], ADMIN_USER, "reactivate", {"target": str(gone)}, **admin
    )
    assert "没有被停用" in answer(again)[0]["content"]
    other = await fake.run_slash_command(
        GUILD, CHANNELS[0], ADMIN_USER, "reactivate", {"target": "telegram:-100123"}, **admin
    )
    [reply] = answer(other)
    assert reply["ephemeral"] and "只能恢复 Discord 频道" in reply["content"]
    # the next post reaches it, once
    [report] = await service.post(TODAY)
    assert report.ok and not report.inactive
    assert len(fake.messages(gone)) == 1
    assert [len(fake.messages(c)) for c in (CHANNELS[0], CHANNELS[2])] == [3, 3]
    entries = await service.ledger.audit_log(platform="discord")
    assert sorted((e.action, e.user_id, e.allowed) for e in entries) == [
        ("reactivate", str(READER), False),
        ("reactivate", str(ADMIN_USER), True),  # reactivated
        ("reactivate", str(ADMIN_USER), True),  # not deactivated
    ]


async def test_while_stopping_commands_and_buttons_are_told_to_try_again_at_once(
    bot: Any,
) -> None:
    """Once a shutdown has begun, an interaction is not started (it could not finish): the
    user is told at once, privately, that the bot is restarting."""
    fake, service, adapter = bot
    await service.post(TWO_PARTS)
    post = fake.messages(CHANNELS[0])[-1]
    adapter.in_flight.close()  # what the runtime does first on SIGTERM
    command = await fake.run_slash_command(GUILD, CHANNELS[0], READER, "today")
    button = await fake.press_button(CHANNELS[0], post.id, f"dg:{TWO_PARTS}:briefs", READER)
    for record in (command, button):
        assert record.callback_type == 4 and record.ephemeral
        assert "The bot is restarting, please try again" in original(record).content
