"""The Platform boundary: what an adapter of a chat platform implements for the core."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from digest_core.rendering import Message, Renderer, RenderOptions


class TargetKind(StrEnum):
    """What sort of place a target is; pacing differs per kind."""

    CHANNEL = "channel"  # a broadcast channel (or a Discord text channel / thread)
    GROUP = "group"  # a group chat
    PRIVATE = "private"  # a one-to-one chat with a subscriber


@dataclass(frozen=True, order=True, slots=True)
class Target:
    """Where a message goes: ``platform`` plus the platform's id (``-100123``, ``@name``, …).

    A place inside a chat that is configured as such (a forum topic) is part of ``id``, in
    the platform's own notation. ``thread`` is the thread the core opened for the issue being
    sent or corrected on a :class:`Threads` platform (a forum post, a thread on the issue's
    first message): the same target, so it takes no part in equality, hashing or order.

    (Slots: a delivery to 100k subscribers holds two of these per subscriber.)"""

    platform: str
    id: str
    kind: TargetKind = TargetKind.CHANNEL
    thread: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.platform}:{self.id}"


@dataclass(frozen=True)
class PartKey:
    """Which part a send is: the identity of its ledger row (issue date, revision, platform,
    generation, target, part), the same on every retry and after a restart.

    A platform whose creates can be made idempotent derives its token from this (Discord's
    ``nonce``). ``generation`` is part of it so a forced repost is a new part, not a repeat.
    """

    issue_date: dt.date
    revision: str
    generation: int
    #: where the part goes (after recorded moves): also names the platform
    target: Target
    #: the part's index in the issue's rendering, from 0
    part: int


@dataclass(frozen=True)
class Rate:
    """A token bucket: ``per_second`` sustained, up to ``burst`` at once; with ``window``, also
    at most ``burst`` messages in any ``window`` seconds (a sliding window, as a platform that
    counts "N per W seconds" does: a bucket alone lets ``burst + per_second * W`` through)."""

    per_second: float
    burst: int = 1
    #: seconds of the sliding window that holds at most ``burst`` messages (None: no window)
    window: float | None = None


@dataclass(frozen=True)
class PlatformLimits:
    """A platform's sending limits, which the core paces under (never hits on purpose)."""

    #: all messages of one bot together
    overall: Rate
    #: one target of each kind
    per_target: dict[TargetKind, Rate]
    #: creates carry the part's key as an idempotency token (Discord's ``nonce``): a part
    #: resent after a crash returns the message already created. Only then may the ledger
    #: hold the record of a send back a moment to share a transaction with the next claim
    #: (``LedgerState.linger``); elsewhere a crash in that moment would double a post.
    idempotent_creates: bool = False

    def for_kind(self, kind: TargetKind) -> Rate:
        return self.per_target.get(kind, self.overall)


@runtime_checkable
class Platform(Protocol):
    """A chat platform as the core sees it.

    Implementations MUST translate every SDK error into :mod:`digest_core.errors`'s
    ``DeliveryError`` tree and MUST NOT retry or sleep: retries, pacing and bookkeeping are the
    core's, so every platform behaves the same.
    """

    #: a short stable name, used in the ledger and config (the platform registry's name)
    name: str

    @property
    def flavor(self) -> Renderer:
        """The renderer that produces this platform's payloads (posts and notices)."""
        ...

    #: the pacing model for this platform
    limits: PlatformLimits
    #: how channel posts are rendered (buttons, embeds, previews)
    post_options: RenderOptions

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        """Send one message to one target and return the platform's message id.

        ``key`` names the part when the send is one of a delivery's (``None`` for one-off
        sends such as alerts): it is equal on every retry of the part, also by a process
        restarted after a crash, and different for another part, target or generation. A
        platform with idempotent creates SHOULD derive its idempotency token from it, so that
        resending a part whose outcome was unknown returns the message already created; the
        others ignore it.

        Raises:
            RateLimited: the platform asked to wait (``retry_after``).
            TransientError: network trouble, 5xx, timeout.
            TargetGone: the target cannot receive messages any more.
            TargetMoved: the target has a new id (``new_target``).
            Rejected: the payload was refused.
        """
        ...


@runtime_checkable
class Editor(Protocol):
    """An optional capability of a :class:`Platform`: change and remove messages it sent.

    Send-only platforms (webhooks) do not implement it; the core checks with
    ``isinstance(platform, Editor)``. The same error contract as :meth:`Platform.send`, plus
    :class:`~digest_core.errors.MessageGone` when the message no longer exists.
    """

    def corrected(self, message: Message, note: str) -> Message:
        """``message`` with the short correction mark ``note`` added where the platform shows
        it (pure; the message stays within the platform's limits: a mark that does not fit is
        left out)."""
        ...

    async def edit(self, target: Target, message_id: str, message: Message) -> None:
        """Replace the text (and buttons) of a message this bot sent with ``message``.

        An edit identical to what the message shows already (a resumed edit that had gone
        through before a crash) succeeds without change.

        Raises:
            MessageGone: no such message (deleted, or never sent by this bot).
            the :meth:`Platform.send` errors otherwise.
        """
        ...

    async def delete(self, target: Target, message_id: str) -> bool:
        """Delete a message this bot sent; False when the platform does not allow it (then the
        caller replaces it with a short note). A message already gone counts as deleted.

        Raises:
            the :meth:`Platform.send` errors (not ``MessageGone``).
        """
        ...


@runtime_checkable
class Pinner(Protocol):
    """An optional capability of a :class:`Platform`: pin and unpin messages it sent."""

    #: whether the daily post's first message is pinned (the platform's ``pin`` setting)
    pin_posts: bool

    async def pin(self, target: Target, message_id: str) -> None:
        """Pin a message without notifying anyone.

        Raises:
            NotPermitted: the bot lacks the right to pin there.
            MessageGone: no such message.
            the :meth:`Platform.send` errors otherwise.
        """
        ...

    async def unpin(self, target: Target, message_id: str) -> None:
        """Unpin a message (one that is not pinned, or gone, is no error).

        Raises:
            NotPermitted: the bot lacks the right to unpin there.
            the :meth:`Platform.send` errors otherwise.
        """
        ...


@dataclass(frozen=True)
class Opened:
    """A thread a :class:`Threads` platform opened (or found again) for one issue on one
    target, with the issue's first message."""

    #: the thread's id ("" when the first message went out but no thread could be opened on
    #: it, as a platform may allow: the issue is delivered all the same)
    thread_id: str
    #: the issue's first message: what the ledger records for part 0
    message_id: str


@runtime_checkable
class Threads(Protocol):
    """An optional capability of a :class:`Platform`: targets that get one thread per issue
    (a forum channel's post, or a thread opened on the issue's first message).

    For such a target the core sends part 0 with :meth:`open_thread` instead of
    :meth:`Platform.send`, after recording in the ledger that it is about to (the intent and
    its time); it records the thread once opened, and gives every later part and every
    correction of that issue the thread in :attr:`Target.thread`. A first part whose thread
    may have been opened already (a crash or an unknown outcome after the intent) is looked
    for with :meth:`find_thread` before anything is opened again, so one issue never gets two
    threads. The error contract is :meth:`Platform.send`'s.
    """

    def threaded(self, target: Target) -> bool:
        """Whether ``target`` gets a thread per issue (pure, from configuration)."""
        ...

    async def open_thread(
        self, target: Target, message: Message, *, title: str, key: PartKey
    ) -> Opened:
        """Open the issue's thread on ``target`` named ``title`` (the platform shortens it to
        its limit) with ``message``, the issue's first part, as its first message; ``key`` is
        part 0's (:meth:`Platform.send`)."""
        ...

    async def find_thread(
        self, target: Target, *, title: str, since: dt.datetime, known: frozenset[str]
    ) -> Opened | None:
        """The thread an earlier :meth:`open_thread` of ``title`` on ``target`` opened, if
        any: one this bot opened there no earlier than ``since`` (the recorded intent, on the
        core's clock; the platform allows for its clock differing), not among ``known`` (the
        threads recorded for the target's other posts)."""
        ...
