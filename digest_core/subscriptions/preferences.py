"""A reader's preferences as one form: read at once, checked whole, stored at once.

Chats change them a command at a time (``/subscribe HH:MM FORMAT``, ``/zone``, ``/follow``,
``/unfollow``); a page that shows them all (the email edition's preferences page) submits
them together. :func:`checked` reads such a form's words by the commands' own rules (the
same time, zone and keyword readers, :data:`MAX_FOLLOWS`) and raises
:class:`PreferenceRefused` naming the first field that does not fit, before anything is
stored; :func:`store` then writes the checked values into the same ledger preferences and
follows the commands keep, keyed by platform and reader id.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from digest_core.delivery.ledger.preferences import MAX_FOLLOWS, Format
from digest_core.errors import BadArgument
from digest_core.subscriptions.commands import (
    MAX_WORD,
    ReaderStore,
    read_clock_time,
    read_followed_word,
    read_zone_name,
)

log = logging.getLogger(__name__)

__all__ = [
    "MAX_FOLLOWS",
    "MAX_WORD",
    "PreferenceRefused",
    "ReaderPreferences",
    "checked",
    "read",
    "store",
]


@dataclass(frozen=True, slots=True)
class ReaderPreferences:
    """What a reader chose: ``at`` None takes the issue with the daily post, ``zone`` None is
    the digest's zone, ``follows`` the keywords in the order followed."""

    at: dt.time | None = None
    zone: str | None = None
    format: Format = Format.FULL
    follows: tuple[str, ...] = ()
    #: an active subscriber (read only: a form does not change it)
    subscribed: bool = False


class PreferenceRefused(BadArgument):
    """A form's field that does not fit: ``field`` is its name (``at``, ``zone``,
    ``format``, ``follows``), ``problem`` says why in both languages."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


def checked(*, at: str, zone: str, format: str, follows: Sequence[str]) -> ReaderPreferences:
    """The form's words as preferences: ``at`` HH:MM or "" (with the daily post), ``zone`` an
    IANA name or "" (the digest's), ``format`` full, compact or headline, ``follows`` the
    keywords (blank ones skipped, repeats once, at most :data:`MAX_FOLLOWS`).

    Raises:
        PreferenceRefused: the first field that does not fit, and why.
    """
    when: dt.time | None = None
    if at.strip():
        try:
            when = read_clock_time(at.strip())
        except ValueError:
            raise PreferenceRefused(
                "at", f"“{at.strip()[:16]}” 不是 HH:MM 时间 / is not a time such as 07:30"
            ) from None
    name: str | None = None
    if zone.strip():
        try:
            name = read_zone_name(zone.strip())
        except BadArgument as exc:
            raise PreferenceRefused("zone", exc.problem) from None
    try:
        fmt = Format(format.strip() or Format.FULL.value)
    except ValueError:
        raise PreferenceRefused(
            "format", "格式只能是 full、compact 或 headline / full, compact or headline"
        ) from None
    words: list[str] = []
    for given in follows:
        if not given.strip():
            continue
        try:
            word = read_followed_word(" ".join(given.split()))
        except BadArgument as exc:
            raise PreferenceRefused("follows", exc.problem) from None
        if word in words:
            continue
        if len(words) == MAX_FOLLOWS:  # (stops at once, however many lines a form has)
            raise PreferenceRefused(
                "follows",
                f"最多关注 {MAX_FOLLOWS} 个词 / {MAX_FOLLOWS} keywords at most",
            )
        words.append(word)
    return ReaderPreferences(at=when, zone=name, format=fmt, follows=tuple(words))


async def read(store: ReaderStore, platform: str, reader: str) -> ReaderPreferences:
    """``reader``'s preferences on ``platform`` (the defaults when they never chose)."""
    pref = await store.preference(platform, reader)
    words = await store.following(platform, reader)
    return ReaderPreferences(
        at=pref.at,
        zone=pref.zone,
        format=pref.format,
        follows=tuple(words),
        subscribed=pref.subscribed,
    )


async def store(
    store: ReaderStore, platform: str, reader: str, chosen: ReaderPreferences
) -> ReaderPreferences:
    """Make ``chosen`` (from :func:`checked`) ``reader``'s preferences: time, zone and format
    in one write, the follows by unfollowing what is no longer in them and following the new
    ones (never past :data:`MAX_FOLLOWS`); what is kept then."""
    await store.set_preference(
        platform, reader, at=chosen.at, zone=chosen.zone, format=chosen.format
    )
    had = await store.following(platform, reader)
    for word in had:
        if word not in chosen.follows:
            await store.unfollow(platform, reader, word)
    for word in chosen.follows:
        if word not in had:
            await store.follow(platform, reader, word)
    log.info("%s reader %s changed their preferences", platform, reader)
    return await read(store, platform, reader)
