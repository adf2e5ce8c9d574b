"""Service notices (help, errors, search hits) are escaped, never ping, and fit the limits."""

from __future__ import annotations

from digest_core.rendering import discord as discord_render
from digest_core.rendering import notice
from digest_core.rendering import plain as plain_render
from digest_core.rendering import telegram as telegram_render
from digest_core.rendering.discord import check_message
from digest_core.rendering.split import utf16_len
from tests.rendering.inverses import check_html, unescape, visible_text


def test_telegram_notice_is_escaped_and_mutes_mentions() -> None:
    [msg] = notice("a <b> & @someone", telegram_render)
    html = msg.payload["text"]
    check_html(html)
    assert html == "a &lt;b&gt; &amp; @\u200bsomeone"
    assert msg.payload["parse_mode"] == "HTML"


def test_discord_notice_is_escaped_and_pings_nobody() -> None:
    [msg] = notice("*bold* @everyone <@123>", discord_render)
    assert check_message(msg.payload) == []
    assert msg.payload["allowed_mentions"] == {"parse": []}
    assert unescape(msg.payload["content"]).replace("\u200b", "") == "*bold* @everyone <@123>"


def test_long_notices_split_at_lines_within_limits_losing_nothing() -> None:
    lines = [f"第 {i} 行：" + "字" * 90 + " *_~|" for i in range(200)]
    text = "\n".join(lines)
    tg = notice(text, telegram_render)
    dc = notice(text, discord_render)
    plain = notice(text, plain_render)
    assert len(tg) > 1 and len(dc) > 1 and len(plain) > 1
    assert all(utf16_len(visible_text(m.payload["text"])) <= 4096 for m in tg)
    assert all(check_message(m.payload) == [] for m in dc)
    assert "\n".join(visible_text(m.payload["text"]) for m in tg) == text
    assert "\n".join(unescape(m.payload["content"]) for m in dc) == text
    assert "\n".join(m.payload["text"] for m in plain) == text
