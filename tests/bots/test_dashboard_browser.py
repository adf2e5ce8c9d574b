"""The editor's day on the dashboard, in a real headless Chromium (Debian's, through
Playwright) against the real bot: its HTTP endpoint on loopback, its Telegram and Discord
adapters posting to the loopback doubles.

Log in; see tomorrow's issue invalid, then ready after a fix; approve it; publish it and watch
the delivery complete live on a Deliveries page opened before (it is never reloaded); click a
tracked link and see its count; correct a brief and see the edits in the audit log. Refused
without a session and with a wrong CSRF token. Screenshots (desktop and phone, light and
dark) go to var/screenshots/dashboard-*.png.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.bots.dashboard_harness import (
    DISCORD_CHANNEL,
    PASSWORD,
    TOMORROW,
    Bot,
    issue_text,
    running,
)
from tests.bots.telegram.harness import CHANNEL
from tests.site.browser import CHROMIUM_ARGS, chromium

playwright = pytest.importorskip("playwright.async_api")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser"), pytest.mark.timeout(240)]

SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
#: every image of a selector loaded (a chart that failed to render is not)
LOADED = "() => [...document.querySelectorAll('%s')].every(i => i.complete && i.naturalWidth > 0)"
#: what is wider than the phone (shown when a page does not fit)
WIDE = (
    "() => [...document.querySelectorAll('body *')].filter(e => e.scrollWidth > %d)"
    ".slice(0, 8).map(e => e.tagName + '.' + e.className + ' ' + e.scrollWidth)"
)
#: a word of one brief of the issue (its second brief), and what the correction makes it
WORD, CORRECTED = "交错切分", "交错分片"


@pytest.fixture
async def bot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Bot]:
    async with running(tmp_path, monkeypatch) as bot:
        yield bot


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    path = chromium()
    if path is None:
        pytest.fail("no chromium: apt-get install chromium (.ci/run does)")
    async with playwright.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


class Watched:
    """A page whose console errors and uncaught exceptions are recorded (a CSP violation is
    a console error)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))


async def shoot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"dashboard-{name}.png"), full_page=True)


async def log_in(page: Any, bot: Bot, name: str = "ann") -> None:
    await page.goto(bot.url + "/admin/login")
    await page.fill("input[name=name]", name)
    await page.fill("input[name=password]", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_url(re.compile(r"/admin/today$"))


async def test_refused_without_a_session(bot: Bot, browser: Any) -> None:
    context = await browser.new_context()
    page = await context.new_page()
    bot.write_issue(TOMORROW, issue_text(TOMORROW))
    await page.goto(bot.url + "/admin/today")
    assert page.url.endswith("/admin/login")
    assert str(TOMORROW) not in await page.content()  # nothing of the UI
    for path in ("/admin/deliveries.json", "/admin/chart/subscribers.svg", "/admin/audit"):
        answer = await page.request.get(bot.url + path, max_redirects=0)
        assert answer.status in (303, 401), path
        assert str(TOMORROW) not in await answer.text() and "telegram" not in await answer.text()
    answer = await page.request.post(
        bot.url + "/admin/action",
        form={"command": "repost", "args": str(TOMORROW), "csrf": "x"},
        max_redirects=0,
    )
    assert answer.status == 401
    # a wrong password, then too many: rate-limited
    for _ in range(5):
        await page.goto(bot.url + "/admin/login")
        await page.fill("input[name=name]", "mallory")
        await page.fill("input[name=password]", "guess")
        await page.click("button[type=submit]")
        assert "密码不对 / wrong password" in await page.content()
    await page.goto(bot.url + "/admin/login")
    await page.fill("input[name=name]", "mallory")
    await page.fill("input[name=password]", PASSWORD)  # even the right one, now
    await page.click("button[type=submit]")
    assert "尝试太多次" in await page.content() and page.url.endswith("/admin/login")
    assert await bot.service.ledger.audit_log() == []  # nothing was attempted
    await context.close()


async def test_the_editors_day(bot: Bot, browser: Any) -> None:
    context = await browser.new_context(viewport=DESKTOP)
    watched = Watched(await context.new_page())
    page = watched.page
    await log_in(page, bot)
    cookie = next(c for c in await context.cookies() if c["name"] == "digest_admin")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["expires"] > 0

    # tomorrow's issue: invalid (its first error shown), then ready after a fix
    bot.write_issue(TOMORROW, issue_text(TOMORROW, broken=True))
    await page.goto(bot.url + "/admin/today")
    assert await page.get_attribute("#readiness", "data-state") == "invalid"
    assert "exa mple.com" in await page.inner_text(".line")
    bot.write_issue(TOMORROW, issue_text(TOMORROW))
    await page.reload()
    assert await page.get_attribute("#readiness", "data-state") == "ready"
    assert "集合通信的拓扑账" in await page.inner_text(".preview.telegram")
    assert "集合通信的拓扑账" in await page.inner_text(".preview.discord")
    await shoot(page, "today-desktop")

    # approve it (the chat's /approve: the same audit record)
    await page.click("button[data-action=approve]")
    assert "已批准" in await page.inner_text("#answer")
    await page.goto(bot.url + "/admin/today")
    assert await page.get_attribute("#readiness", "data-state") == "approved"
    await page.screenshot(path=str(SHOTS / "dashboard-today.png"))  # the README's
    approvals = await bot.service.ledger.audit_log(actions=["approve"])
    assert [(a.platform, a.user_id, a.args["date"]) for a in approvals] == [
        ("dashboard", "ann", str(TOMORROW))
    ]

    # a state-changing request with a wrong CSRF token is refused, and nothing happens
    refused = await page.request.post(
        bot.url + "/admin/action",
        form={"csrf": "forged", "command": "hold", "args": str(TOMORROW)},
        max_redirects=0,
    )
    assert refused.status == 403
    assert not await bot.service.ledger.audit_log(actions=["hold"])

    # publish now, confirmed, watched live on a Deliveries page opened before
    live = Watched(await context.new_page())
    await live.page.goto(bot.url + f"/admin/deliveries?day={TOMORROW}")
    assert await live.page.locator("section.delivery").count() == 0
    await page.click("button[data-action=repost]")
    assert "确认重新推送" in await page.inner_text("#answer")
    await page.click("button[data-action=confirm]")
    for platform in ("telegram", "discord"):
        state = live.page.locator(f'section.delivery[data-platform="{platform}"] .state')
        await state.filter(has_text="完成 / done").wait_for(timeout=20_000)
    summary = await live.page.inner_text('section.delivery[data-platform="telegram"] .summary')
    posted = bot.telegram.sent(CHANNEL)
    assert posted and bot.discord.messages(DISCORD_CHANNEL)
    assert f"已发 / sent {len(posted)} · 待发 / pending 0 · 失败 / failed 0" in summary, summary
    await live.page.wait_for_function(LOADED % "img.timeline")
    await shoot(live.page, "deliveries-desktop")

    # a tracked link in the post: it redirects to the original and is counted
    html = "".join(m.html for m in bot.telegram.sent(CHANNEL))
    tracked = re.findall(r'href="(http://127\.0\.0\.1:\d+/r/[^"]+)"', html)
    assert tracked and "example.org" not in html
    hops: list[Any] = []
    # (the original's site is out of reach on a closed network: only the hop matters; a page
    # of its own, closed after, so that its error page never interrupts the next navigation)
    clicked = await context.new_page()
    clicked.on("response", lambda r: hops.append(r))
    with contextlib.suppress(playwright.Error):
        await clicked.goto(tracked[0])
    await clicked.close()
    hop = next(r for r in hops if "/r/" in r.url)
    assert hop.status == 302
    assert hop.headers["location"] == "https://example.org/reports/topology-aware-allreduce"
    forged = await page.request.get(tracked[0][:-4] + "AAAA", max_redirects=0)
    assert forged.status == 404 and "location" not in forged.headers
    await page.goto(bot.url + f"/admin/stories?issue={TOMORROW}")
    row = page.locator(f'tr[data-story="{TOMORROW}:headline"]')
    assert await row.locator(".clicks").inner_text() == "1"
    assert "telegram #1: 1" in await row.inner_text()
    await shoot(page, "stories-desktop")

    # correct a brief: the posted messages are edited, the audit log records it
    bot.write_issue(TOMORROW, issue_text(TOMORROW).replace(WORD, CORRECTED))
    await page.goto(bot.url + "/admin/today")
    await page.click("button[data-action=correct]")
    answer = await page.inner_text("#answer")
    assert "edited" in answer or "更正" in answer, answer
    edited = [m for m in bot.telegram.sent(CHANNEL) if m.edits]
    assert edited and CORRECTED in "".join(m.text for m in edited)
    await page.goto(bot.url + "/admin/audit?action=correct&who=dashboard:ann")
    rows = page.locator("#audit tbody tr[data-action=correct]")
    assert await rows.count() == 1 and "dashboard:ann" in await rows.inner_text()
    await page.goto(bot.url + f"/admin/audit?day={TOMORROW - dt.timedelta(days=1)}")
    assert (
        await page.locator("#audit tbody tr[data-action]").count() >= 4
    )  # approve, early, repost, correct
    await shoot(page, "audit-desktop")

    await page.goto(bot.url + "/admin/audience")
    assert await page.locator('tr[data-platform="telegram"]').count() == 1
    await page.wait_for_function(LOADED % "img.chart")
    await shoot(page, "audience-desktop")
    assert watched.errors == [] and live.errors == []

    # the phone, in dark mode
    phone = await browser.new_context(viewport=PHONE, color_scheme="dark", is_mobile=True)
    await phone.add_cookies([cookie])
    small = Watched(await phone.new_page())
    for name in ("today", "deliveries", "audience", "stories"):
        query = f"?day={TOMORROW}" if name != "audience" else ""
        await small.page.goto(bot.url + f"/admin/{name}{query}")
        width = await small.page.evaluate("document.documentElement.scrollWidth")
        wide = await small.page.evaluate(WIDE % PHONE["width"])
        assert width <= PHONE["width"], (name, width, wide)
        await shoot(small.page, f"{name}-phone-dark")
    assert small.errors == []
    await phone.close()
    await context.close()
