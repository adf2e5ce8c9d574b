"""The email adapter against a real SMTP server on loopback (aiosmtpd): the bytes it receives
(headers, both parts, a DKIM signature dkimpy verifies), one connection for many mails, and
the relay's answers mapped onto the error tree."""

from __future__ import annotations

import datetime as dt
import re
from email import policy
from email.parser import BytesParser
from pathlib import Path
from zoneinfo import ZoneInfo

import dkim
import pytest

from bots.email.adapter import EmailAdapter
from digest_core.errors import Rejected, TargetGone, TransientError
from digest_core.platform import PartKey, Target, TargetKind
from digest_core.rendering import Message, RenderOptions
from digest_core.rendering import email as email_render
from digest_core.testing import ManualClock, make_issue
from tests.bots.email.helpers import SENDER, adapter_for, dkim_keys, settings
from tests.fakes.smtp import FakeRelay

NOW = dt.datetime(2026, 10, 27, 0, 5, tzinfo=dt.UTC)


async def reader(adapter: EmailAdapter, address: str) -> Target:
    rid = await adapter.book.add(address, at=NOW)
    return Target("email", rid, TargetKind.PRIVATE)


def key_for(target: Target) -> PartKey:
    return PartKey(dt.date(2026, 10, 27), "rev1", 1, target, 0)


async def test_the_relay_gets_one_signed_multipart_mail_per_reader_over_one_connection(
    tmp_path: Path,
) -> None:
    pem, record = dkim_keys(tmp_path)
    issue = make_issue(dt.date(2026, 10, 27))
    [message] = email_render.render(issue, options=RenderOptions(site_url="https://d.example/"))
    with FakeRelay(senders=set()) as relay:  # senders filled once reader ids are known
        adapter = adapter_for(settings(tmp_path, relay.port, dkim_key=pem), clock=ManualClock(NOW))
        targets = [await reader(adapter, f"reader{n}@Mail.Example.COM") for n in range(3)]
        relay.handler.senders = {f"digest+{t.id}@example.org" for t in targets}
        try:
            ids = [await adapter.send(t, message, key=key_for(t)) for t in targets]
        finally:
            await adapter.stop()
    got = relay.received
    assert len(got) == 3
    assert relay.sessions == 1 and adapter.connections == 1  # one connection reused
    for n, (target, received, msgid) in enumerate(zip(targets, got, ids, strict=True)):
        assert received.recipients == [f"reader{n}@mail.example.com"]
        assert received.sender == f"digest+{target.id}@example.org"  # VERP
        # dkimpy itself verifies the signature over the bytes the relay received
        assert received.data.startswith(b"DKIM-Signature:")
        assert dkim.verify(received.data, dnsfunc=lambda name, timeout=5: record)
        assert b"\r\n" in received.data and b"\n" not in received.data.replace(b"\r\n", b"")
        parsed = BytesParser(policy=policy.default).parsebytes(received.data)
        assert parsed["Subject"] == "10月27日 · 重点新闻"
        assert parsed["From"] == f"AI 技术日报 <{SENDER}>"
        assert parsed["Message-ID"] == msgid == (f"<2026-10-27.rev1.g1.p0.{target.id}@example.org>")
        assert parsed["List-Id"] == "<digest.example.org>"
        assert parsed["Date"].datetime == NOW.astimezone(ZoneInfo("Asia/Shanghai"))
        assert parsed["Date"].datetime.utcoffset() == dt.timedelta(hours=8)
        assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        unsub = str(parsed["List-Unsubscribe"])
        https = re.search(r"<(https://digest\.example\.org/email/unsubscribe\?t=[^>]+)>", unsub)
        assert https is not None and f"<mailto:{SENDER}?subject=unsubscribe%20{target.id}>" in unsub
        assert adapter.tokens.unsubscribed(https.group(1).split("t=", 1)[1]) == target.id
        assert parsed.get_content_type() == "multipart/alternative"
        text = parsed.get_body(("plain",))
        page = parsed.get_body(("html",))
        assert text is not None and page is not None
        assert "重点新闻：第一段。" in text.get_content()
        assert https.group(1) in text.get_content()  # the reader's own link in both parts
        html = page.get_content()
        assert 'style="' in html  # inlined
        assert "https://example.com/2026-10-27/0" in html  # the issue's links as links
        assert https.group(1).replace("&", "&amp;") in html or https.group(1) in html
        # and their own preferences link beside it, in both parts, for them alone
        prefs = re.search(
            r"设置 / Preferences: (https://digest\.example\.org/email/preferences\?t=(\S+))",
            text.get_content(),
        )
        assert prefs is not None and adapter.tokens.preferring(prefs.group(2)) == target.id
        assert adapter.tokens.unsubscribed(prefs.group(2)) is None  # not an unsubscribe link
        assert f'<a href="{prefs.group(1)}" style="color: #0b5cad;">设置 / Preferences</a>' in html
        assert re.search(r'<a href="https://digest[^"]+unsubscribe[^"]+" style="color: #0b5cad;"',
                         html)  # fmt: skip
        assert "urn:x-digest" not in text.get_content() + html  # every marker replaced
        assert not re.search(r"<script|<link|<img|@import|url\(", html, re.I)
        assert "prefers-color-scheme: dark" in html
        assert all(len(line) <= 998 for line in received.data.split(b"\r\n"))


async def test_without_pages_a_mail_has_no_preferences_line_and_a_confirmation_none(
    tmp_path: Path,
) -> None:
    """No public_url (no pages served): the unsubscribe link is the mailto and there is no
    preferences line; a one-off mail (a confirmation request) carries no reader's links; a
    follow message (the core's notice) carries both."""
    [message] = email_render.render(make_issue(dt.date(2026, 10, 27)))
    [follow] = email_render.notice("你关注的词出现在 2026-10-27 的日报中\n· 重点")
    with FakeRelay(senders=set()) as relay:
        plain = settings(tmp_path, relay.port).model_copy(update={"public_url": None})
        adapter = adapter_for(plain, clock=ManualClock(NOW))
        linked = adapter_for(settings(tmp_path, relay.port), clock=ManualClock(NOW))
        target = await reader(adapter, "a@example.net")
        relay.handler.senders = {f"digest+{target.id}@example.org"}
        try:
            await adapter.send(target, message, key=key_for(target))
            await adapter.send_to("a@example.net", target.id, adapter.notice("确认 / Confirm")[0])
            await linked.send(target, follow, key=key_for(target))
        finally:
            await adapter.stop()
            await linked.stop()

    def part(data: bytes, kind: str) -> str:
        found = BytesParser(policy=policy.default).parsebytes(data).get_body((kind,))
        assert found is not None
        return str(found.get_content())

    issue, confirmation, followed = (r.data for r in relay.received)
    text, page = part(issue, "plain"), part(issue, "html")
    assert f"退订 / Unsubscribe: mailto:{SENDER}\n" in text and "Preferences" not in text
    assert f'href="mailto:{SENDER}"' in page and "Preferences" not in page
    assert "urn:x-digest" not in text + page
    said = part(confirmation, "plain")
    assert "Unsubscribe" not in said and "Preferences" not in said
    told = part(followed, "plain")
    assert "· 重点\n\n--\n" in told
    assert "退订 / Unsubscribe: https://digest.example.org/email/unsubscribe?t=" in told
    assert "设置 / Preferences: https://digest.example.org/email/preferences?t=" in told


async def test_relay_answers_map_onto_the_error_tree_and_the_connection_survives(
    tmp_path: Path,
) -> None:
    [message] = email_render.render(make_issue(dt.date(2026, 10, 27)))
    with FakeRelay(senders=set()) as relay:
        adapter = adapter_for(settings(tmp_path, relay.port), clock=ManualClock(NOW))
        busy, gone, fine = [
            await reader(adapter, f"{n}@example.net") for n in ("busy", "gone", "ok")
        ]
        relay.handler.senders = {f"digest+{t.id}@example.org" for t in (busy, gone, fine)}
        relay.handler.refuse_rcpt["busy@example.net"] = ["450 4.2.1 mailbox busy busy@example.net"]
        relay.handler.refuse_rcpt["gone@example.net"] = ["550 5.1.1 no such user gone@example.net"]
        try:
            with pytest.raises(TransientError) as busy_error:
                await adapter.send(busy, message, key=key_for(busy))
            with pytest.raises(TargetGone) as gone_error:
                await adapter.send(gone, message, key=key_for(gone))
            relay.handler.refuse_data.append("552 5.3.4 message too big")
            with pytest.raises(Rejected):
                await adapter.send(fine, message, key=key_for(fine))
            await adapter.send(fine, message, key=key_for(fine))
            # the relay closes with 421: the next mail opens a new connection
            relay.handler.close_next = True
            with pytest.raises(TransientError):
                await adapter.send(fine, message, key=key_for(fine))
            await adapter.send(fine, message, key=key_for(fine))
            # a reader who unsubscribed (address forgotten) gets nothing, not even this part
            await adapter.book.remove(fine.id)
            with pytest.raises(TargetGone, match="unsubscribed"):
                await adapter.send(fine, message, key=key_for(fine))
        finally:
            await adapter.stop()
    assert len(relay.received) == 2
    assert adapter.connections == 2  # reused across the 4xx/5xx answers, reopened after 421
    # the address the relay quoted back never reaches the error (nor so the logs)
    assert "busy@example.net" not in str(busy_error.value)
    assert "gone@example.net" not in str(gone_error.value)
    assert gone_error.value.target == gone.id


async def test_a_relay_that_is_down_is_a_transient_error(tmp_path: Path) -> None:
    with FakeRelay(senders=set()) as relay:
        port = relay.port
    adapter = adapter_for(settings(tmp_path, port), clock=ManualClock(NOW))
    target = await reader(adapter, "a@example.net")
    with pytest.raises(TransientError, match="cannot reach the relay"):
        await adapter.send(target, Message({"subject": "s", "text": "t", "html": ""}))


async def test_what_a_relay_refuses_is_rejected_not_retried(tmp_path: Path) -> None:
    """A sender the relay does not allow (553 to MAIL FROM) and a message over its SIZE limit
    (552) are our faults, not the reader's: Rejected, and the reader stays."""
    [message] = email_render.render(make_issue(dt.date(2026, 10, 27)))
    with FakeRelay(senders=set(), size_limit=4096) as relay:
        adapter = adapter_for(settings(tmp_path, relay.port), clock=ManualClock(NOW))
        target = await reader(adapter, "a@example.net")
        try:
            with pytest.raises(Rejected, match="553"):
                await adapter.send(target, message, key=key_for(target))
            relay.handler.senders = {f"digest+{target.id}@example.org"}
            with pytest.raises(Rejected, match="552"):
                await adapter.send(target, message, key=key_for(target))
            small = Message({"subject": "s", "text": "短信息", "html": ""})
            await adapter.send(target, small, key=key_for(target))
        finally:
            await adapter.stop()
    [got] = relay.received
    assert await adapter.book.address(target.id) == "a@example.net"
    assert got.data.split(b"\r\n\r\n", 1)[0].isascii()  # no 8-bit header (no SMTPUTF8 asked)
