"""Tracked links: the tokens (naming an issue's story and link and a platform, never a
reader, never a URL), the redirect's 404s, and every renderer emitting the mapped links."""

from __future__ import annotations

import datetime as dt

import pytest

from bots.links import LinkTokens, LinkTracker
from digest_core.archive import Archive
from digest_core.models import Issue
from digest_core.rendering import (
    Part,
    RenderOptions,
    dingtalk,
    email,
    feishu,
    plain,
    render,
    wecom,
    with_links,
)
from digest_core.rendering import discord as discord_render
from digest_core.rendering import telegram as telegram_render
from digest_core.service.dashboard import stories_of
from tests.samples import SAMPLE_ARCHIVE

DAY = dt.date(2026, 11, 30)


@pytest.fixture(scope="module")
def issue() -> Issue:
    return Archive(SAMPLE_ARCHIVE, index=False).on(DAY)


def test_a_token_reads_back_and_a_forged_one_does_not() -> None:
    tokens = LinkTokens("key")
    token = tokens.token(DAY, "brief-3", 2, "telegram")
    assert tokens.read(token) == (DAY, "brief-3", 2, "telegram")
    assert LinkTokens("another key").read(token) is None
    assert tokens.read(token[:-2] + ("AA" if token[-2:] != "AA" else "BB")) is None
    assert tokens.read("x" * 400) is None and tokens.read("") is None
    # a genuine signature over a value that is not a link's: refused too
    other = LinkTokens("key")._serializer.dumps(["20261130", "../etc", 1, "telegram"])
    assert tokens.read(str(other)) is None
    assert "http" not in token and "example" not in token


def test_with_links_maps_every_story_link_and_keeps_the_revision(issue: Issue) -> None:
    seen: list[tuple[dt.date, str, int, str]] = []

    def mapping(date: dt.date, story: str, n: int, url: str) -> str:
        seen.append((date, story, n, url))
        return f"https://bot.example/r/{story}-{n}"

    mapped = with_links(issue, mapping)
    assert mapped.revision == issue.revision
    originals = [(s, n, u) for s, item in stories_of(issue) for n, u in enumerate(item.links, 1)]
    assert sorted((s, n, u) for _, s, n, u in seen) == sorted(originals)
    assert all(d == DAY for d, *_ in seen)
    for story, item in stories_of(mapped):
        assert all(u.startswith(f"https://bot.example/r/{story}-") for u in item.links)


@pytest.mark.parametrize(
    "flavor",
    [telegram_render, discord_render, plain, feishu, dingtalk, wecom, email],
    ids=lambda f: getattr(f, "__name__", str(f)),
)
def test_every_renderer_emits_the_tracked_links_only(issue: Issue, flavor: object) -> None:
    tracker = LinkTracker(LinkTokens("key"), "https://bot.example/", "telegram")
    options = RenderOptions(links=tracker)
    text = "".join(str(m.payload) for m in render(issue, flavor, Part.ALL, options=options))  # type: ignore[arg-type]
    assert "https://bot.example/r/" in text
    for _, item in stories_of(issue):
        for url in item.links:
            assert url not in text, url
    untracked = "".join(str(m.payload) for m in render(issue, flavor, Part.ALL))  # type: ignore[arg-type]
    assert "bot.example" not in untracked and issue.headline.links[0] in untracked
