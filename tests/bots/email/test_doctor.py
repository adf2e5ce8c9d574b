"""``digest-bot doctor``'s email lines against a real SMTP server on loopback: the relay
answers, DKIM's key signs; a relay that is down is a failure with its fix; nothing is sent."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bots.doctor import Status
from bots.email.doctor import checks
from tests.bots.email.helpers import dkim_keys, settings
from tests.fakes.smtp import FakeRelay


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def test_the_relay_answers_and_the_dkim_key_signs(tmp_path: Path) -> None:
    pem, _ = dkim_keys(tmp_path)
    with FakeRelay(senders=set()) as relay:
        lines = await checks(settings(tmp_path, relay.port, dkim_key=pem), now=now)
        assert relay.received == []  # nothing sent
    assert {c.name: c.status for c in lines} == {
        "secrets": Status.OK,
        "relay": Status.OK,
        "dkim": Status.OK,
    }


async def test_a_relay_that_is_down_fails_with_its_fix(tmp_path: Path) -> None:
    with FakeRelay(senders=set()) as relay:
        port = relay.port
    [_, relay_line] = await checks(settings(tmp_path, port), now=now)
    assert relay_line.status is Status.FAIL and "email.host" in relay_line.fix
