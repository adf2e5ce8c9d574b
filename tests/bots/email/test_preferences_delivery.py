"""An email reader's own terms end to end: subscribed by the form and the link mailed to them,
they set 07:30 Asia/Shanghai, the compact format and a keyword on the preferences page their
first issue links; from then on the core's readers' deliveries honour them, through the ledger.

In process, on a clock the test sets (days pass in milliseconds): the real service and email
adapter (``open_service``), its real HTTP pages on loopback, a real SMTP server (the relay
double). The daily post at 08:00 mails the reader who takes the issue with it, not the timed
one; the minute job at 07:30 mails the timed one the newest public issue, once; an issue that
mentions the keyword brings one follow mail, once; the ledger holds one sent row for each.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bots.email.addresses import reader_id
from bots.email.preferences import SAVED
from digest_core.delivery import PartState
from digest_core.testing import SettableClock
from tests.bots.email.helpers import SECRET
from tests.bots.email.site_harness import (
    PREFERENCES_LINK,
    Site,
    html_body,
    plain_body,
    running_site,
)
from tests.fakes.smtp import FakeRelay, Received

SHANGHAI = ZoneInfo("Asia/Shanghai")
ANN = "ann@example.net"  # sets her own time
BOB = "bob@example.net"  # takes the issue with the daily post
FIRST, SECOND, THIRD = dt.date(2026, 11, 28), dt.date(2026, 11, 29), dt.date(2026, 11, 30)
#: a word only the issue of THIRD mentions
KEYWORD = "Megatron"


def at(day: dt.date, hh: int, mm: int) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hh, mm, tzinfo=SHANGHAI)


def subject(received: Received) -> str:
    return str(BytesParser(policy=policy.default).parsebytes(received.data)["Subject"])


@pytest.fixture
def relay() -> Iterator[FakeRelay]:
    senders = {f"digest+{reader_id(a, SECRET)}@example.org" for a in (ANN, BOB)}
    with FakeRelay(senders=senders) as running:
        yield running


async def subscribe_by_the_form(site: Site, relay: FakeRelay, address: str) -> None:
    async with site.http.post(site.base + "email/subscribe", data={"address": address}) as a:
        assert a.status == 200
    [confirmation] = relay.received[-1:]
    assert confirmation.recipients == [address]
    link = re.search(r"http://\S+/email/confirm\?t=\S+", plain_body(confirmation))
    assert link is not None
    async with site.http.post(link.group(0)) as a:
        assert a.status == 200 and "已订阅" in await a.text()


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_an_email_reader_gets_the_issue_at_their_time_and_their_follow_mail_once(
    tmp_path: Path, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SettableClock(at(FIRST, 9, 0))
    async with running_site(tmp_path, relay.port, clock, monkeypatch) as site:
        service = site.service
        await subscribe_by_the_form(site, relay, ANN)
        bob = await site.reader(BOB)
        ann = reader_id(ANN, SECRET)

        # the day's issue brings each reader their own preferences link
        await service.post(FIRST)
        [to_ann] = [r for r in relay.received if r.recipients == [ANN]][1:]
        link = PREFERENCES_LINK.search(plain_body(to_ann))
        assert link is not None and site.adapter.tokens.preferring(link.group(2)) == ann
        async with site.http.get(link.group(1)) as answer:
            assert answer.status == 200 and 'name="t"' in await answer.text()
        chosen = {
            "t": link.group(2),
            "when": "at",
            "at": "07:30",
            "zone": "Asia/Shanghai",
            "format": "compact",
            "follows": KEYWORD,
        }
        async with site.http.post(site.base + "email/preferences", data=chosen) as answer:
            assert answer.status == 200 and SAVED in await answer.text()
        pref = await service.ledger.preference("email", ann)
        assert (pref.at, pref.zone, pref.format) == (dt.time(7, 30), "Asia/Shanghai", "compact")
        assert await service.ledger.following("email", ann) == [KEYWORD.casefold()]

        # the next day at 08:00: the daily post mails Bob only; the minute job nothing (Ann
        # has the newest issue public at her 07:30, the first; the second mentions no keyword)
        clock.set(at(SECOND, 8, 0))
        before = len(relay.received)
        await service.post(SECOND)
        assert [r.recipients for r in relay.received[before:]] == [[BOB]]
        assert await service.deliver_personal() == []
        assert len(relay.received) == before + 1

        # the day after at 07:30: the minute job mails Ann the second issue, compact, once
        clock.set(at(THIRD, 7, 30))
        [report] = await service.deliver_personal()
        assert (report.platform, report.sent) == ("email", 1)
        [timed] = relay.received[before + 1 :]
        assert timed.recipients == [ANN] and subject(timed).startswith("11月29日 · ")
        assert 'id="briefs"' in html_body(timed) and "#brief-1" in html_body(timed)
        assert PREFERENCES_LINK.search(plain_body(timed)) is not None
        clock.set(at(THIRD, 7, 31))
        assert await service.deliver_personal() == []
        assert len(relay.received) == before + 2

        # at 08:00 the third issue goes to Bob; it mentions the keyword: one follow mail to Ann
        clock.set(at(THIRD, 8, 0))
        await service.post(THIRD)
        assert [r.recipients for r in relay.received[before + 2 :]] == [[BOB]]
        clock.set(at(THIRD, 8, 1))
        reports = await service.deliver_personal()
        assert [(r.platform, r.sent) for r in reports] == [("email~follow", 1)]
        [follow] = relay.received[before + 3 :]
        assert follow.recipients == [ANN]
        assert subject(follow).startswith("你关注的词出现在 2026-11-30 的日报中")
        told = plain_body(follow)
        assert f"“{KEYWORD.casefold()}”" in told and PREFERENCES_LINK.search(told) is not None
        clock.set(at(THIRD, 8, 2))
        assert await service.deliver_personal() == []
        assert len(relay.received) == before + 4

        # through the ledger, once each: Ann's two issues and her follow message, Bob's three
        sent = await service.ledger.records(states=[PartState.SENT])
        rows = sorted((r.platform, r.target, r.issue_date) for r in sent)
        assert rows == sorted(
            [("email", ann, FIRST), ("email", ann, SECOND), ("email~follow", ann, THIRD)]
            + [("email", bob, day) for day in (FIRST, SECOND, THIRD)]
        )
