"""The reader's preferences page (``/email/preferences?t=``) over real HTTP, on the real service
and email adapter: its GET shows the form and stores nothing; its POST stores the whole form
in the ledger's preferences and follows (platform ``email``, the reader's id) or, when a field
does not fit, nothing, with the form again naming the field; a forged, expired or former
reader's token gets a clear 404; a POST without its token, or from another site, is refused.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bots.email.preferences import LABELS, SAVED
from bots.email.tokens import Tokens
from digest_core.delivery.ledger.preferences import Format
from digest_core.subscriptions.preferences import MAX_FOLLOWS, PreferenceRefused, checked
from digest_core.testing import ManualClock
from tests.bots.email.site_harness import Site, running_site
from tests.fakes.smtp import FakeRelay

NOW = dt.datetime(2026, 11, 28, 1, 0, tzinfo=dt.UTC)
ADDRESS = "reader@example.net"
#: a whole, well-formed form (the token added per test)
GOOD = {
    "when": "at",
    "at": "07:30",
    "zone": "Asia/Shanghai",
    "format": "headline",
    "follows": "Megatron\n\n  张量并行 \nmegatron",
}


@pytest.fixture
def relay() -> Iterator[FakeRelay]:
    with FakeRelay(senders=set()) as running:
        yield running


@pytest.fixture
async def site(
    tmp_path: Path, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Site]:
    clock = ManualClock(NOW, autoadvance=False)
    async with running_site(tmp_path, relay.port, clock, monkeypatch) as running:
        yield running


async def kept(site: Site, rid: str) -> tuple[Any, ...]:
    """Everything the ledger keeps of the reader's preferences (updated_at included: any
    write changes it)."""
    pref = await site.service.ledger.preference("email", rid)
    words = await site.service.ledger.following("email", rid)
    return pref.at, pref.zone, pref.format, pref.updated_at, pref.subscribed, tuple(words)


async def get(site: Site, query: str) -> tuple[int, str]:
    async with site.http.get(site.base + "email/preferences" + query) as answer:
        return answer.status, await answer.text()


async def post(site: Site, data: dict[str, str], **headers: str) -> tuple[int, str]:
    async with site.http.post(site.base + "email/preferences", data=data, headers=headers) as a:
        return a.status, await a.text()


async def test_the_get_shows_the_form_filled_in_and_stores_nothing(site: Site) -> None:
    rid = await site.reader(ADDRESS)
    token = site.adapter.tokens.preferences(rid)
    before = await kept(site, rid)
    assert before[3] is None and before[4] is True  # never chose; subscribed
    # a GET carrying a whole form's words (a scanner, a crafted link) changes nothing
    status, page = await get(site, f"?t={token}&when=at&at=06:00&zone=Asia/Tokyo&follows=x")
    assert status == 200
    assert f'<input type="hidden" name="t" value="{token}">' in page
    assert 'value="post" checked' in page and SAVED not in page
    assert '<form method="post" action="preferences">' in page
    assert await kept(site, rid) == before

    # what the reader chose (through the Port, as the page's POST does) fills the form
    await site.service.set_preferences(
        "email", rid, at="21:00", zone="Europe/Berlin", format="compact", follows=["蒸馏", "RAG"]
    )
    chosen = await kept(site, rid)
    status, page = await get(site, f"?t={token}")
    assert status == 200
    assert 'value="at" checked' in page and 'name="at" value="21:00"' in page
    assert 'value="Europe/Berlin"' in page and '<option value="compact" selected>' in page
    assert sorted(chosen[5]) == ["rag", "蒸馏"]  # as /follow keeps them: casefolded
    assert ">" + "\n".join(chosen[5]) + "</textarea>" in page
    assert '<option value="Asia/Shanghai">' in page  # the zones the host knows, to pick from
    assert await kept(site, rid) == chosen


async def test_a_post_stores_the_whole_form_in_the_readers_preferences(site: Site) -> None:
    rid = await site.reader(ADDRESS)
    token = site.adapter.tokens.preferences(rid)
    status, page = await post(site, {**GOOD, "t": token})
    assert status == 200 and SAVED in page
    at, zone, fmt, updated, subscribed, words = await kept(site, rid)
    assert (at, zone, fmt) == (dt.time(7, 30), "Asia/Shanghai", Format.HEADLINE)
    assert updated == NOW and subscribed is True
    assert sorted(words) == ["megatron", "张量并行"]  # as /follow keeps them: casefolded, once
    assert 'name="at" value="07:30"' in page and ">" + "\n".join(words) + "</textarea>" in page

    # with the daily post again, the digest's zone, the full issue, one keyword fewer
    again = {"t": token, "when": "post", "at": "07:30", "zone": "", "format": "full"}
    status, page = await post(site, {**again, "follows": "张量并行"})
    assert status == 200 and SAVED in page
    at, zone, fmt, _, subscribed, words = await kept(site, rid)
    assert (at, zone, fmt, subscribed, words) == (None, None, Format.FULL, True, ("张量并行",))
    assert 'value="post" checked' in page


@pytest.mark.parametrize(
    ("change", "field", "shown"),
    [
        ({"at": "25:00"}, "at", "25:00"),
        ({"at": ""}, "at", "07:30"),
        ({"at": "7.30"}, "at", "7.30"),
        ({"zone": "Mars/Olympus"}, "zone", "Mars/Olympus"),
        ({"zone": "../../etc/passwd"}, "zone", "../../etc/passwd"),
        ({"zone": "<b>Asia</b>"}, "zone", "&lt;b&gt;Asia&lt;/b&gt;"),
        ({"format": "weekly"}, "format", None),
        ({"follows": "长" * 65}, "follows", "长" * 65),
        ({"follows": "a\u200bb"}, "follows", None),
        ({"follows": "\n".join(f"w{n}" for n in range(MAX_FOLLOWS + 1))}, "follows", "w10"),
    ],
)
async def test_a_field_that_does_not_fit_is_named_and_nothing_is_stored(
    site: Site, change: dict[str, str], field: str, shown: str | None
) -> None:
    rid = await site.reader(ADDRESS)
    await site.service.set_preferences(
        "email", rid, at="21:00", zone="Europe/Berlin", format="compact", follows=["蒸馏"]
    )
    before = await kept(site, rid)
    token = site.adapter.tokens.preferences(rid)
    status, page = await post(site, {**GOOD, "t": token, **change})
    assert status == 400 and SAVED not in page
    assert '<p id="error" role="alert"' in page
    assert f"<strong>{html.escape(LABELS[field])}</strong>" in page
    [marked] = re.findall(r'<(?:input|select|textarea)[^>]*aria-invalid="true"[^>]*>', page)
    assert f'name="{field}"' in marked  # the field itself is marked, and only it
    if shown is not None:
        assert shown in page  # what the reader typed comes back to be fixed
    assert "<b>Asia</b>" not in page  # escaped, never markup
    assert await kept(site, rid) == before


def test_the_form_is_checked_by_the_commands_rules() -> None:
    assert checked(at="7:05", zone="", format="", follows=[]).at == dt.time(7, 5)
    assert checked(at="", zone=" Asia/Tokyo ", format="compact", follows=[]).zone == "Asia/Tokyo"
    many = checked(at="", zone="", format="full", follows=["A  b", "a b", *"cdefghijk"])
    assert many.follows == ("a b", *"cdefghijk") and len(many.follows) == MAX_FOLLOWS
    with pytest.raises(PreferenceRefused) as refused:
        checked(at="", zone="", format="full", follows=[f"w{n}" for n in range(100_000)])
    assert refused.value.field == "follows" and str(MAX_FOLLOWS) in refused.value.problem


async def test_forged_expired_and_former_readers_tokens_get_a_clear_404(site: Site) -> None:
    rid = await site.reader(ADDRESS)
    gone = await site.reader("gone@example.net")
    token = site.adapter.tokens.preferences(rid)
    before = await kept(site, rid)
    other_key = Tokens("another-secret-of-enough-length-987", confirm_seconds=60)
    forged = [
        "",
        token[:-2] + ("AA" if not token.endswith("AA") else "BB"),
        other_key.preferences(rid),
        site.adapter.tokens.unsubscribe(rid),  # another kind of link: another salt
    ]
    for bad in forged:
        status, page = await get(site, f"?t={bad}")
        assert status == 404 and "expired or invalid" in page and "<form" not in page
        status, page = await post(site, {**GOOD, "t": bad})
        if bad:
            assert status == 404 and "expired or invalid" in page
        else:
            assert status == 403  # no token at all: refused before anything is read
    # a reader who unsubscribed: their old link no longer opens anything
    gone_token = site.adapter.tokens.preferences(gone)
    await site.adapter.subscription(gone, on=False)
    assert (await get(site, f"?t={gone_token}"))[0] == 404
    assert (await post(site, {**GOOD, "t": gone_token}))[0] == 404
    assert await site.service.ledger.following("email", gone) == []
    # the link works for preferences_days, then no more
    clock = site.service.clock
    assert isinstance(clock, ManualClock)
    clock.advance(site.adapter.settings.preferences_days * 86400 - 60)
    assert (await get(site, f"?t={token}"))[0] == 200
    clock.advance(120)
    status, page = await get(site, f"?t={token}")
    assert status == 404 and "latest mail" in page
    assert (await post(site, {**GOOD, "t": token}))[0] == 404
    assert await kept(site, rid) == before


async def test_a_post_without_its_token_or_from_another_site_is_refused(site: Site) -> None:
    rid = await site.reader(ADDRESS)
    token = site.adapter.tokens.preferences(rid)
    before = await kept(site, rid)
    assert (await post(site, GOOD))[0] == 403  # a cross-site form cannot know the token
    # the token in the URL only, not in the form, is not enough
    async with site.http.post(site.base + f"email/preferences?t={token}", data=GOOD) as answer:
        assert answer.status == 403
    status, _ = await post(site, {**GOOD, "t": token}, **{"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    assert await kept(site, rid) == before
    status, page = await post(site, {**GOOD, "t": token}, **{"Sec-Fetch-Site": "same-origin"})
    assert status == 200 and SAVED in page
    assert (await kept(site, rid))[0] == dt.time(7, 30)
