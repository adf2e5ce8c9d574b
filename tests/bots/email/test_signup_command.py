"""``/email ADDRESS [FORMAT]`` from a chat: the core's command through the real service and the
real email adapter, mailing through a real SMTP server on loopback.

A well-formed address gets the confirmation mail with a signed link carrying the chosen format;
the answer is the same (and private) whether the address is new, asked for too often, or
refused by the relay; a second request within the limit mails nothing; a malformed address is
told so without being quoted; the log never holds an address; where no platform mails the
digest the command says so.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
import re
from collections.abc import AsyncIterator, Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest

from bots import registry
from bots.email.adapter import EmailAdapter
from bots.email.addresses import reader_id
from bots.email.signup import ADDRESS_INTERVAL
from bots.runtime import open_service
from digest_core.commands import Reply, Request, Status
from digest_core.service.root import DigestService
from digest_core.subscriptions.signup import NOT_AN_ADDRESS, NOT_HERE, SENT
from digest_core.testing import ManualClock
from tests.bots.email.helpers import SECRET, SENDER
from tests.bots.workchat_helpers import ARCHIVE
from tests.fakes.smtp import FakeRelay, Received

NOW = dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC)
ADDRESS = "Reader.One@Example.NET"
#: the form email-validator leaves it in: the domain lower-cased
MAILED = "Reader.One@example.net"


def config(tmp_path: Path, port: int | None) -> Path:
    path = tmp_path / "digest-bot.toml"
    email = (
        f'[email]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
        f'from = "AI 技术日报 <{SENDER}>"\npublic_url = "https://digest.example.org/"\n'
        f'address_book = "{tmp_path / "readers.sqlite3"}"\n'
        if port is not None
        else ""
    )
    path.write_text(
        f'archive_dir = "{ARCHIVE}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n{email}',
        encoding="utf-8",
    )
    return path


@pytest.fixture
def relay() -> Iterator[FakeRelay]:
    with FakeRelay(senders={f"digest+{reader_id(MAILED, SECRET)}@example.org"}) as running:
        yield running


@pytest.fixture
async def service(
    tmp_path: Path, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DigestService]:
    monkeypatch.setenv("DIGEST_BOT_EMAIL__SECRET_KEY", SECRET)
    settings = registry.load_settings(config(tmp_path, relay.port))
    async with open_service(
        settings, clock=ManualClock(NOW, autoadvance=False), out=io.StringIO()
    ) as svc:
        try:
            yield svc
        finally:
            await svc.platforms["email"].stop()


def email_command(*words: str, user: str = "42") -> Request:
    return Request("email", words, platform="console", user=user, chat=user)


def text_of(reply: Reply) -> str:
    return "\n".join(str(m.payload["text"]) for m in reply.messages)


def ours(caplog: pytest.LogCaptureFixture) -> str:
    """What the bot logged (not the relay double, which logs every envelope)."""
    return "\n".join(
        r.getMessage() for r in caplog.records if r.name.startswith(("bots", "digest_core"))
    )


def body(received: Received) -> str:
    parsed = BytesParser(policy=policy.default).parsebytes(received.data)
    part = parsed.get_body(("plain",))
    assert part is not None
    return str(part.get_content())


async def test_an_address_gets_its_confirmation_link_and_the_same_private_answer(
    service: DigestService, relay: FakeRelay, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    adapter = service.platforms["email"]
    assert isinstance(adapter, EmailAdapter)
    reply = await service.handle(email_command(ADDRESS, "compact"))
    assert reply.status is Status.OK and reply.private
    assert text_of(reply) == SENT and ADDRESS not in text_of(reply)
    [mail] = relay.received
    assert mail.recipients == [MAILED]
    link = re.search(r"https://digest\.example\.org/email/confirm\?t=(\S+)", body(mail))
    assert link is not None
    assert adapter.tokens.confirmed(link.group(1)) == (MAILED, "compact")
    assert (await adapter.tallies())["readers"] == {"confirmed": 0, "pending": 1, "deactivated": 0}

    # asked again at once, by anyone: the same answer, no second mail
    again = await service.handle(email_command(ADDRESS, user="43"))
    assert text_of(again) == SENT and len(relay.received) == 1
    # once the interval is over, a new link
    clock = service.clock
    assert isinstance(clock, ManualClock)
    clock.advance(ADDRESS_INTERVAL + 1)
    await service.handle(email_command(ADDRESS))
    assert len(relay.received) == 2

    # confirmed (the link's page does this): no longer pending
    await adapter.book.add(MAILED, at=NOW)
    assert (await adapter.tallies())["readers"] == {"confirmed": 1, "pending": 0, "deactivated": 0}
    logged = ours(caplog)
    assert "confirmation mailed to reader " + reader_id(MAILED, SECRET) in logged
    assert MAILED.lower() not in logged.lower()  # addresses never reach the log


async def test_what_the_relay_refuses_is_answered_the_same(
    service: DigestService, relay: FakeRelay, caplog: pytest.LogCaptureFixture
) -> None:
    relay.handler.refuse_rcpt[MAILED] = [f"550 5.1.1 no such user {MAILED}"]
    reply = await service.handle(email_command(ADDRESS))
    assert reply.status is Status.OK and text_of(reply) == SENT
    assert relay.received == []
    assert MAILED.lower() not in ours(caplog).lower()
    adapter = service.platforms["email"]
    assert isinstance(adapter, EmailAdapter)
    assert (await adapter.tallies())["readers"]["pending"] == 0  # nothing was mailed


async def test_a_requester_asking_for_many_addresses_is_limited(
    service: DigestService, relay: FakeRelay
) -> None:
    relay.handler.senders = {
        f"digest+{reader_id(f'r{n}@example.net', SECRET)}@example.org" for n in range(8)
    }
    replies = [await service.handle(email_command(f"r{n}@example.net")) for n in range(8)]
    assert {text_of(r) for r in replies} == {SENT}
    assert len(relay.received) == 5  # CLIENT_BURST per requester and window
    other = await service.handle(email_command("r7@example.net", user="99"))
    assert text_of(other) == SENT and len(relay.received) == 6


@pytest.mark.parametrize(
    "words", [("not-an-address",), ("a@b@example.net",), ("读者@例子.中国",), ("a@example",)]
)
async def test_a_word_that_is_no_address_is_told_so_unquoted(
    service: DigestService, relay: FakeRelay, words: tuple[str, ...]
) -> None:
    reply = await service.handle(email_command(*words))
    assert reply.status is Status.USAGE
    assert NOT_AN_ADDRESS in text_of(reply) and "/email ADDRESS" in text_of(reply)
    assert words[0] not in text_of(reply)
    assert relay.received == []


async def test_no_address_and_too_many_words_are_usage(service: DigestService) -> None:
    missing = await service.handle(email_command())
    assert missing.status is Status.USAGE and "请给出邮箱地址" in text_of(missing)
    wrong = await service.handle(email_command(ADDRESS, "weekly"))
    assert wrong.status is Status.USAGE


async def test_without_a_mail_platform_the_command_says_it_is_not_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("DIGEST_BOT_")]:
        monkeypatch.delenv(key)
    settings = registry.load_settings(config(tmp_path, None))
    async with open_service(settings, clock=ManualClock(NOW), out=io.StringIO()) as svc:
        assert "email" not in svc.platforms
        reply = await svc.handle(email_command(ADDRESS))
    assert reply.status is Status.USAGE and text_of(reply) == NOT_HERE and reply.private


async def test_a_confirmation_is_pending_until_its_link_expires(service: DigestService) -> None:
    adapter = service.platforms["email"]
    clock = service.clock
    assert isinstance(adapter, EmailAdapter) and isinstance(clock, ManualClock)
    await service.handle(email_command(ADDRESS))
    assert (await adapter.tallies())["readers"]["pending"] == 1
    clock.advance(adapter.settings.confirm_hours * 3600 + 1)  # the link no longer works
    assert (await adapter.tallies())["readers"]["pending"] == 0
    await service.handle(email_command(ADDRESS))  # asked again: a new link, pending again
    assert (await adapter.tallies())["readers"]["pending"] == 1
    await adapter.book.remove(adapter.book.id_of(MAILED))  # forgotten: not even pending
    assert (await adapter.tallies())["readers"]["pending"] == 0
