"""The daily post through the real discord.py client and the loopback Discord double."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import discord
import pytest

from bots.discord.adapter import DEFAULT_API_BASE, ApiPointer, part_nonce, translate_error
from bots.registry import load_settings
from digest_core.delivery import PartState
from digest_core.errors import (
    ConfigError,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    TargetGone,
    TransientError,
)
from digest_core.models import Issue
from digest_core.platform import PartKey, Target, TargetKind
from digest_core.publishing.schedule import Outcome
from digest_core.rendering import Message, Part, RenderOptions, render
from digest_core.rendering import discord as discord_render
from digest_core.rendering.discord import check_message
from tests.bots.discord.harness import (
    ALERTED,
    CHANNELS,
    TODAY,
    TWO_PARTS,
    fake_discord,
    make_settings,
    running_bot,
)
from tests.fakes.discord_api import FakeDiscord


def stored_payloads(fake: FakeDiscord, channel: int) -> list[dict[str, object]]:
    """What the bot sent to ``channel``, as the request bodies Discord received, without the
    per-send nonce (checked on its own)."""
    out = []
    for m in fake.messages(channel):
        body = dict(m.request)
        nonce = body.pop("nonce")
        assert body.pop("enforce_nonce") is True and 1 <= len(nonce) <= 25
        out.append(body)
    return out


def expected_post(issue: Issue, *, embeds: bool = True) -> list[dict[str, object]]:
    """The channel post of ``issue`` as the core renders it."""
    options = RenderOptions(buttons=True, embeds=embeds)
    return [m.payload for m in render(issue, discord_render, Part.ALL, options=options)]


async def test_the_daily_post_arrives_once_in_every_channel_with_buttons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings) as (service, _adapter):
            assert await service.poster.run_due(TWO_PARTS) is Outcome.POSTED
            assert await service.poster.run_due(TWO_PARTS) is Outcome.ALREADY
            expected = expected_post(service.archive.on(TWO_PARTS))
            records = await service.ledger.records(platform="discord")
        assert len(expected) == 2
        for channel in CHANNELS:
            sent = stored_payloads(fake, channel)
            # exactly the rendered create-message JSON, once, in order
            assert sent == expected
            for payload in sent:
                assert check_message(payload) == []
                assert payload["allowed_mentions"] == {"parse": []}
            buttons = [b["custom_id"] for row in sent[-1]["components"] for b in row["components"]]
            assert buttons == [f"dg:{TWO_PARTS}:{s}" for s in ("headline", "briefs", "classic")]
        assert {r.state for r in records} == {PartState.SENT}
        # the ledger holds Discord's message ids
        ids = {int(r.message_id) for r in records if r.message_id}
        assert ids == {m.id for c in CHANNELS for m in fake.messages(c)}
        assert fake.counters.too_many_requests == 0


async def test_markdown_fallback_posts_content_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, channels=CHANNELS[:1], embeds=False)
        async with running_bot(settings, receive=False) as (service, _):
            await service.post(TODAY)
            expected = expected_post(service.archive.on(TODAY), embeds=False)
        sent = stored_payloads(fake, CHANNELS[0])
        assert sent == expected
        assert all("embeds" not in p and p["content"] for p in sent)
    # REST only: no gateway session was opened
    assert fake.counters.gateway["identify"] == 0


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_429s_are_absorbed_without_loss_or_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        fake.fail_next(CHANNELS[0], "rate_limited", times=3, retry_after=0.05)
        fake.fail_next(CHANNELS[1], "rate_limited", times=1, retry_after=0.05, is_global=True)
        async with running_bot(settings, receive=False) as (service, _):
            [report] = await service.post(TWO_PARTS)
            expected = expected_post(service.archive.on(TWO_PARTS))
        assert report.ok and report.sent == 2 * len(CHANNELS)
        for channel in CHANNELS:
            assert stored_payloads(fake, channel) == expected
        assert fake.counters.rate_limited["injected"] == 4
        assert fake.counters.rate_limited["bucket"] == 0


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_429_longer_than_the_request_timeout_is_retried_by_the_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        # discord.py sleeps off a 429 inside the request; one longer than the request timeout
        # is cut off and retried by the core's backoff
        settings = make_settings(tmp_path, monkeypatch, fake, request_timeout_seconds=0.3)
        fake.fail_next(CHANNELS[0], "rate_limited", times=1, retry_after=2.0)
        async with running_bot(settings, receive=False) as (service, _):
            [report] = await service.post(TODAY)
            records = await service.ledger.records(platform="discord")
        assert report.ok
        for channel in CHANNELS:
            assert len(fake.messages(channel)) == 1
        attempts = {r.target: r.attempts for r in records}
        assert attempts == {str(CHANNELS[0]): 2, str(CHANNELS[1]): 1, str(CHANNELS[2]): 1}
        assert fake.counters.rate_limited["injected"] == 1


@pytest.mark.parametrize(
    ("fault", "status"),
    [("unknown_channel", 404), ("missing_access", 403), ("missing_permissions", 403)],
)
async def test_a_gone_channel_is_deactivated_and_never_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, status: int
) -> None:
    gone = CHANNELS[1]
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        if fault == "unknown_channel":
            await fake.delete_channel(gone)
        else:
            fake.fail_next(gone, fault, times=100)  # type: ignore[arg-type]
        async with running_bot(settings, receive=False) as (service, _):
            [first] = await service.post(TWO_PARTS)
            asked = fake.counters.statuses[status]
            [again] = await service.post(TODAY)
        assert [t.id for t in first.gone] == [str(gone)]
        assert asked == 1  # one refusal, not one per part or per retry
        assert [t.id for t in again.inactive] == [str(gone)]
        assert fake.counters.statuses[status] == asked  # never asked again
        for channel in (CHANNELS[0], CHANNELS[2]):
            assert len(fake.messages(channel)) == 3  # two parts, then one


@pytest.mark.parametrize("fault", ["unavailable", "server_error", "slow"])
@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_server_errors_and_timeouts_are_retried_by_the_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(
            tmp_path, monkeypatch, fake, channels=CHANNELS[:1], request_timeout_seconds=0.3
        )
        # 503: discord.py raises at once; 500: discord.py would retry after 1 s, the request
        # timeout cuts it off; slow: no answer within the timeout (the message is not created)
        fake.fail_next(CHANNELS[0], fault, times=2, delay=1.0)  # type: ignore[arg-type]
        async with running_bot(settings, receive=False) as (service, _):
            [report] = await service.post(TODAY)
            records = await service.ledger.records(platform="discord")
        assert report.ok
        [record] = records
        assert record.state is PartState.SENT and record.attempts == 3
        [stored] = fake.messages(CHANNELS[0])
        assert str(stored.id) == record.message_id


async def test_a_bad_payload_is_rejected_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, receive=False) as (_, adapter):
            target = Target("discord", str(CHANNELS[0]), TargetKind.CHANNEL)
            with pytest.raises(Rejected) as caught:
                await adapter.send(target, Message({"content": "x" * 2001}))
            with pytest.raises(Rejected):
                await adapter.send(Target("discord", "general"), Message({"content": "hi"}))
        assert "50035" in str(caught.value)
        assert fake.counters.statuses[400] == 1


async def test_mentions_are_disabled_whatever_the_payload_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, receive=False) as (_, adapter):
            target = Target("discord", str(CHANNELS[0]))
            message_id = await adapter.send(target, Message({"content": "hi @everyone"}))
        [stored] = fake.messages(CHANNELS[0])
        assert str(stored.id) == message_id
        assert stored.allowed_mentions == {"parse": []}


async def test_alerts_are_dmed_to_admin_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake, admin_users=[ALERTED])
        async with running_bot(settings, receive=False) as (service, _):
            await service.alert("the post of 2026-11-30 had failures")
        [dm] = [c for c, data in fake._channels.items() if data.get("type") == 1]
        [stored] = fake.messages(dm)
        assert "the post of 2026-11-30 had failures" in stored.content


async def test_a_refused_token_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        make_settings(tmp_path, monkeypatch, fake)
        wrong = "MTAwMDAwMDAwMDAwMDAwMDAy.ZmFrZQ.bm90LXRoZS10b2tlbi1vZi10aGUtZG91Ymxl"
        monkeypatch.setenv("DIGEST_BOT_DISCORD__TOKEN", wrong)
        bad = load_settings(tmp_path / "digest-bot.toml")
        with pytest.raises(ConfigError) as caught:
            async with running_bot(bad):
                pass
        assert caught.value.key == "discord.token"
        assert wrong not in str(caught.value)
        assert fake.counters.statuses[401] == 1
    assert discord.http.Route.BASE == DEFAULT_API_BASE


async def test_pointing_is_undone_on_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, receive=False):
            assert fake.api_base == discord.http.Route.BASE
            assert str(discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY) == fake.gateway_url
    assert before == (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
    assert before[0] == DEFAULT_API_BASE
    # Discord's own API needs no pointing (and no request)
    pointer = ApiPointer()
    await asyncio.wait_for(pointer.point(DEFAULT_API_BASE + "/"), timeout=1)
    assert discord.http.Route.BASE == DEFAULT_API_BASE


async def test_a_resent_part_carries_its_nonce_so_discord_creates_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the sixth message to a channel waited out the real 5 s window: shrunk, as this test is
    # about nonces, not rate limits)
    async with fake_discord(rate_scale=0.02) as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        async with running_bot(settings, receive=False) as (_, adapter):
            target = Target("discord", str(CHANNELS[0]))
            key = PartKey(TWO_PARTS, "rev1", 1, target, 0)
            # a part resent (a retry, or a restarted process) has the same key: a new Message
            first = await adapter.send(target, Message({"content": "part 1"}), key=key)
            resent = await adapter.send(target, Message({"content": "part 1"}), key=key)
            # a forced repost is a new generation: posted anew
            forced = await adapter.send(
                target, Message({"content": "part 1"}), key=replace(key, generation=2)
            )
            # the same part elsewhere (nonces are per author, not per channel)
            there = Target("discord", str(CHANNELS[1]))
            elsewhere = await adapter.send(
                there, Message({"content": "part 1"}), key=replace(key, target=there)
            )
            # an alert or other one-off send has no key: never taken for another
            unkeyed = [await adapter.send(target, Message({"content": "alert"})) for _ in "ab"]
        assert first == resent
        assert len({first, forced, elsewhere, *unkeyed}) == 5
        contents = [m.content for m in fake.messages(CHANNELS[0])]
        assert contents == ["part 1", "part 1", "alert", "alert"]
        assert fake.counters.nonce_hits == 1


def test_part_nonces_are_stable_short_and_distinct() -> None:
    target = Target("discord", str(CHANNELS[0]))
    key = PartKey(TWO_PARTS, "rev1", 1, target, 0)
    nonce = part_nonce(key)
    assert nonce == part_nonce(PartKey(TWO_PARTS, "rev1", 1, Target("discord", target.id), 0))
    assert len(nonce) <= 25 and nonce.isascii()
    variants = [
        replace(key, issue_date=TODAY),
        replace(key, revision="rev2"),
        replace(key, generation=2),
        replace(key, target=Target("discord", str(CHANNELS[1]))),
        replace(key, target=Target("telegram", target.id)),
        replace(key, part=1),
    ]
    assert len({nonce, *map(part_nonce, variants)}) == 1 + len(variants)


def _response(status: int, **headers: str) -> SimpleNamespace:
    return SimpleNamespace(status=status, reason="", headers=headers)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (discord.RateLimited(42.0), RateLimited),
        (discord.HTTPException(_response(429, **{"Retry-After": "3"}), "slow down"), RateLimited),
        (discord.Forbidden(_response(403), {"code": 50001, "message": "No access"}), TargetGone),
        (discord.NotFound(_response(404), {"code": 10003, "message": "No channel"}), TargetGone),
        (discord.DiscordServerError(_response(503), "unavailable"), TransientError),
        (discord.HTTPException(_response(502), "<html>"), TransientError),
        (aiohttp.ClientConnectionError("reset"), TransientError),
        (ConnectionResetError(), TransientError),
        # the request was written, the connection closed before the answer: it may have arrived
        (aiohttp.ServerDisconnectedError(), OutcomeUnknown),
        (TimeoutError(), TransientError),
        (discord.HTTPException(_response(400), {"code": 50035, "message": "Invalid"}), Rejected),
        (discord.HTTPException(_response(401), {"code": 0, "message": "401"}), Rejected),
    ],
)
def test_errors_are_translated_at_the_boundary(error: Exception, expected: type) -> None:
    translated = translate_error(error, platform="discord", target="42")
    assert type(translated) is expected
    assert (translated.platform, translated.target) == ("discord", "42")
    if isinstance(translated, RateLimited):
        assert translated.retry_after == (42.0 if isinstance(error, discord.RateLimited) else 3.0)


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_a_part_discord_took_but_answered_too_late_is_retried_and_posted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(
            tmp_path, monkeypatch, fake, channels=CHANNELS[:2], request_timeout_seconds=0.3
        )
        # Discord creates the first part in CHANNELS[1] at once, but the answer comes after
        # the request timeout: the core retries that part, with the same nonce
        fake.fail_next(CHANNELS[1], "slow", delay=1.0, commit=True)
        async with running_bot(settings, receive=False) as (service, _):
            [report] = await service.post(TWO_PARTS)
            expected = expected_post(service.archive.on(TWO_PARTS))
            records = await service.ledger.records(platform="discord")
        assert report.ok and report.sent == 2 * 2
        for channel in CHANNELS[:2]:
            assert stored_payloads(fake, channel) == expected  # every part, once, in order
        assert fake.counters.nonce_hits == 1
        attempts = {(r.target, r.part): r.attempts for r in records}
        assert attempts == {
            (str(CHANNELS[0]), 0): 1,
            (str(CHANNELS[0]), 1): 1,
            (str(CHANNELS[1]), 0): 2,
            (str(CHANNELS[1]), 1): 1,
        }
        # the ledger holds the id of the message Discord created the first time
        first = fake.messages(CHANNELS[1])[0]
        assert {r.message_id for r in records if r.target == str(CHANNELS[1]) and r.part == 0} == {
            str(first.id)
        }
