"""Private deliveries on readers' own terms: the issue at each subscriber's time and in their
format, and one message per new issue to readers who follow a word it mentions.

"New" has one answer for every reader surface, :meth:`Visibility.public` (publish times, not
dates): follows consider every issue that became public in the last :data:`FOLLOW_WINDOW`,
each once (recorded in the ledger), timed subscribers get the newest one public at their slot,
inline mode shows the newest one public now.

Both go through the ledger and the engine like the daily post, so each is paced under the
platform's budget, sent once, and resumed after a crash. A run (:meth:`Personal.run_due`) is
cheap when nothing is due; the service runs it every minute.

No duplicate when a preference changes: a subscriber's rows of the day are the ledger's answer
(parts sent are not sent again, a crashed delivery resumes), and one whose rows have another
number of parts than their format now renders was served another format that day and gets
nothing more (:meth:`~digest_core.delivery.ledger.preferences.Readers.day_shapes`; without
this, a switch from one message to two would send the second); follow messages have a
ledger key of their own (``<platform>~follow``, revision ``follow-<revision>``), so they never
stand for the issue in the ledger, and they share the platform's pacing (``paced_as``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from digest_core.archive import Archive
from digest_core.archive.scan import SearchHit
from digest_core.clock import Clock
from digest_core.delivery import DeliveryEngine, DeliveryReport, Ledger
from digest_core.delivery.ledger.preferences import Format, Preference
from digest_core.errors import DeliveryBusy, IssueNotFound
from digest_core.models import Issue, IssueRef, Section
from digest_core.platform import PartKey, Platform, PlatformLimits, Target, TargetKind
from digest_core.publishing.embargo import Embargo
from digest_core.rendering import Message, Part, Renderer, RenderOptions, notice, render
from digest_core.subscriptions.commands import zone_named

log = logging.getLogger(__name__)

#: what each format renders
PART_OF_FORMAT: dict[Format, Part] = {
    Format.FULL: Part.ALL,
    Format.COMPACT: Part.TOC,
    Format.HEADLINE: Part.HEADLINE,
}
#: the format a rendering part stands for (the variant its deliveries record)
FORMAT_OF_PART: dict[Part, Format] = {part: fmt for fmt, part in PART_OF_FORMAT.items()}
#: a follow message names at most this many items per word
MAX_HITS_PER_WORD = 5
#: how long after its publish time an issue still counts as new for follows
FOLLOW_WINDOW = dt.timedelta(hours=24)
#: a timed subscriber gets the newest issue that became public within this before their slot
#: (today's or yesterday's as scheduled, an early-published or released one)
SLOT_WINDOW = dt.timedelta(hours=48)
#: the suffix of the ledger's platform key of follow messages
FOLLOW_KEY = "~follow"


#: the id of the scheduler job that runs :meth:`Personal.run_due`
JOB_ID = "personal-deliveries"
#: how often it runs by default (seconds): a subscriber's time is kept to within this
EVERY_SECONDS = 60


def install(
    scheduler: AsyncIOScheduler,
    run: Callable[[], Awaitable[object]],
    *,
    now: dt.datetime,
    every: float = EVERY_SECONDS,
) -> None:
    """Add the job that runs ``run`` (the service's ``deliver_personal``) every ``every``
    seconds (``[schedule] personal_seconds``, a minute), the first time at ``now`` (what came
    due while the bot was down, within the catch-up)."""
    if scheduler.get_job(JOB_ID) is not None:
        scheduler.remove_job(JOB_ID)
    scheduler.add_job(
        run,
        IntervalTrigger(seconds=every),
        id=JOB_ID,
        name="subscribers' times and follows",
        coalesce=True,
        max_instances=1,
        misfire_grace_time=max(1, round(every)),
        next_run_time=now,
    )


class Visibility:
    """What readers may see: the core's one embargo rule
    (:class:`~digest_core.publishing.embargo.Embargo`),
    so follows, inline results and personal deliveries obey an admin's early publish and an
    editor's hold too.

    :meth:`public` is the one answer to "what is new" for every reader surface: follows ask
    it for the issues that became public in the last :data:`FOLLOW_WINDOW`, timed
    subscribers for the newest issue public at their slot, inline mode for the newest public
    now. An issue's date relative to today does not matter, only its publish time.
    """

    def __init__(self, embargo: Embargo) -> None:
        self.embargo = embargo
        self.clock: Clock = embargo.clock

    def post_at(self, day: dt.date) -> dt.datetime:
        """When readers may first see the issue of ``day`` (its publish time)."""
        return self.embargo.publish_time(day)

    def visible(self, day: dt.date, *, at: dt.datetime | None = None) -> bool:
        """True when readers may see the issue of ``day`` (now, or at ``at``)."""
        return self.embargo.publish_time(day) <= (at or self.clock.now())

    def public(
        self,
        days: Sequence[dt.date],
        *,
        at: dt.datetime | None = None,
        since: dt.datetime | None = None,
    ) -> Iterator[dt.date]:
        """The days among ``days`` (dates with an issue, oldest first, as
        :meth:`Archive.dates` gives them) that readers may see at ``at`` (default now), and
        with ``since`` only those that became public after it, newest date first. Early
        publishes, holds and late releases count by their moment.

        Lazy and cheap: the scan stops at the first day whose post time is ``since`` or
        earlier (every older day was public by then, but one released late)."""
        embargo = self.embargo
        until = at or self.clock.now()
        stop: dt.date | None = None
        for day in reversed(days):
            published = embargo.publish_time(day)
            if published <= until and (since is None or published > since):
                yield day
            if since is not None and embargo.scheduled(day) <= since:
                stop = day
                break
        if stop is None or since is None:
            return
        for day in sorted((d for d in embargo.released if d < stop), reverse=True):
            published = embargo.publish_time(day)
            if since < published <= until and day in days:
                yield day

    def newest(
        self, archive: Archive, *, at: dt.datetime | None = None, since: dt.datetime | None = None
    ) -> Issue | None:
        """The issue of the newest day :meth:`public` names that loads (file I/O: call from
        a thread)."""
        return self.first_issue(archive, self.public(archive.dates(), at=at, since=since))

    @staticmethod
    def first_issue(archive: Archive, days: Iterable[dt.date]) -> Issue | None:
        """The issue of the first of ``days`` that loads (file I/O: call from a thread)."""
        for day in days:
            try:
                return archive.on(day)
            except IssueNotFound:
                continue
        return None


class FollowSender:
    """A platform seen by the ledger as ``<name>~follow``: its own rows, the platform's sends
    and pacing (:attr:`paced_as`)."""

    def __init__(self, inner: Platform) -> None:
        self.inner = inner
        self.name = inner.name + FOLLOW_KEY
        self.paced_as = inner.name
        self.limits: PlatformLimits = inner.limits
        self.post_options: RenderOptions = inner.post_options

    @property
    def flavor(self) -> Renderer:
        return self.inner.flavor

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        to = Target(self.inner.name, target.id, target.kind)
        return await self.inner.send(
            to, message, key=None if key is None else replace(key, target=to)
        )


@dataclass
class Personal:
    """The subscribers' own times and formats, and follows, for ``platforms`` (those that can
    write to readers privately)."""

    archive: Archive
    ledger: Ledger
    engine: DeliveryEngine
    clock: Clock
    zone: dt.tzinfo
    visibility: Visibility
    platforms: Mapping[str, Platform]
    #: one delivery of a day per platform at a time (the service's lock)
    lock: Callable[[dt.date, str], asyncio.Lock]
    #: a slot missed by more than this (the bot was down) is skipped
    catch_up: dt.timedelta = dt.timedelta(hours=6)
    #: (platform, date) of issues whose follow messages are all sent (the ledger's
    #: ``follow_checks``, as far as this process has read or written them)
    _checked: set[tuple[str, dt.date]] = field(default_factory=set)
    #: (platform, date, chat) of timed subscribers known served that day (the ledger decides
    #: after a restart; this spares planning them again every minute)
    _served: set[tuple[str, dt.date, str]] = field(default_factory=set)

    async def run_due(self) -> list[DeliveryReport]:
        """Deliver what is due now: timed subscribers' issues, then follow messages."""
        reports: list[DeliveryReport] = []
        for platform in self.platforms.values():
            try:
                reports += await self.slots(platform)
                reports += await self.follows(platform)
            except DeliveryBusy as exc:  # another process delivers there: the next run
                log.info("personal deliveries on %s wait: %s", platform.name, exc)
        return reports

    # ------------------------------------------------------------ time slots

    def last_slot(self, pref: Preference) -> dt.datetime | None:
        """The latest moment at or before now that is ``pref``'s time in its zone."""
        if pref.at is None:
            return None
        zone = zone_named(pref.zone) if pref.zone else None
        tz = zone or self.zone
        now = self.clock.now()
        local = now.astimezone(tz)
        for back in (0, 1):
            day = local.date() - dt.timedelta(days=back)
            slot = dt.datetime.combine(day, pref.at).replace(tzinfo=tz).astimezone(dt.UTC)
            if slot <= now:
                return slot
        return None  # unreachable: yesterday's time has passed

    async def slots(self, platform: Platform) -> list[DeliveryReport]:
        """Deliver the issue to the subscribers of ``platform`` whose time has come."""
        now = self.clock.now()
        due: dict[tuple[dt.date, Format], tuple[Issue, list[Target]]] = {}
        issues: dict[tuple[dt.date, ...], Issue | None] = {}  # each looked up once a run
        dates = await asyncio.to_thread(self.archive.dates)
        for pref in await self.ledger.timed_subscribers(platform.name):
            slot = self.last_slot(pref)
            if slot is None or now - slot > self.catch_up:
                continue
            if pref.updated_at is not None and slot < pref.updated_at:
                continue  # set after today's time: from the next one on
            days = tuple(self.visibility.public(dates, at=slot, since=slot - SLOT_WINDOW))
            if days not in issues:
                issues[days] = await asyncio.to_thread(
                    self.visibility.first_issue, self.archive, days
                )
            issue = issues[days]
            if issue is None:
                continue
            if (platform.name, issue.date, pref.chat_id) in self._served:
                continue
            target = Target(platform.name, pref.chat_id, TargetKind.PRIVATE)
            due.setdefault((issue.date, pref.format), (issue, []))[1].append(target)
        reports: list[DeliveryReport] = []
        for (day, fmt), (issue, targets) in sorted(due.items()):
            messages = render(
                issue, platform.flavor, PART_OF_FORMAT[fmt], options=platform.post_options
            )
            todo = await self.same_shape(platform, day, targets, len(messages))
            self._served.update((platform.name, day, t.id) for t in targets if t not in todo)
            if not todo:
                continue
            log.info("%s: %s in %s format to %d subscribers", platform.name, day, fmt, len(todo))
            async with self.lock(day, platform.name):
                report = await self.engine.deliver(
                    issue.ref, platform, messages, todo, variant=fmt.value
                )
            self._served.update(
                (platform.name, day, t.target.id)
                for t in report.targets
                if t.complete and not t.in_progress
            )
            if report.sent or not report.ok:
                reports.append(report)  # a run that found everything sent is no news
        return reports

    async def same_shape(
        self, platform: Platform, day: dt.date, targets: Sequence[Target], n_parts: int
    ) -> list[Target]:
        """``targets`` but those served ``day``'s issue in another number of parts (another
        format) already: sending them ``n_parts`` parts would repeat or mix formats."""
        shapes = await self.ledger.day_shapes(platform.name, day, [t.id for t in targets])
        return [t for t in targets if shapes.get(t.id, n_parts) == n_parts]

    async def groups(
        self,
        issue: Issue,
        platform: Platform,
        targets: Sequence[Target],
        messages: list[Message],
        *,
        default: Part = Part.ALL,
        force: bool = False,
    ) -> list[tuple[Format, list[Message], list[Target]]]:
        """The daily post's targets by what they get, with its format: ``messages`` (the
        whole issue) for channels; private subscribers get the format they chose, else the
        platform's subscriber part ``default`` (e.g. the compact one-message issue), rendered
        so. Without ``force``, a private subscriber served the day in another format (they
        changed it since) is left out."""
        formats = await self.ledger.formats(platform.name)
        fallback = FORMAT_OF_PART.get(default, Format.FULL)
        groups: dict[Format, list[Target]] = {}
        for target in targets:
            fmt = (
                formats.get(target.id, fallback)
                if target.kind is TargetKind.PRIVATE
                else Format.FULL
            )
            groups.setdefault(fmt, []).append(target)
        result: list[tuple[Format, list[Message], list[Target]]] = []
        for fmt, group in groups.items():
            rendered = messages
            if fmt is not Format.FULL:
                part = PART_OF_FORMAT[fmt]
                rendered = render(issue, platform.flavor, part, options=platform.post_options)
            if not force:
                private = [t for t in group if t.kind is TargetKind.PRIVATE]
                kept = set(await self.same_shape(platform, issue.date, private, len(rendered)))
                group = [t for t in group if t.kind is not TargetKind.PRIVATE or t in kept]
            if group:
                result.append((fmt, rendered, group))
        return result

    # ------------------------------------------------------------ follows

    def new_days(self) -> list[dt.date]:
        """The days whose issue became public within :data:`FOLLOW_WINDOW` (on schedule,
        early, after a late approval), oldest publish first (file I/O: call from a thread)."""
        now = self.clock.now()
        days = self.visibility.public(self.archive.dates(), at=now, since=now - FOLLOW_WINDOW)
        return sorted(days, key=lambda d: (self.visibility.post_at(d), d))

    async def follows(self, platform: Platform) -> list[DeliveryReport]:
        """One private message per follower and new issue that mentions the follower's words.

        Every issue that became public in the last :data:`FOLLOW_WINDOW` is considered once
        (several of one day each): once all its messages are sent, the ledger records it
        (:meth:`~digest_core.delivery.ledger.preferences.Readers.check_follows`) and neither
        a later run, a restart nor a correction of the issue considers it again; a delivery
        cut short is resumed by the next run (its ledger rows: nothing is sent twice)."""
        days = await asyncio.to_thread(self.new_days)
        days = [d for d in days if (platform.name, d) not in self._checked]
        if not days:
            return []
        done = await self.ledger.follows_checked(platform.name, days)
        self._checked.update((platform.name, d) for d in done)
        days = [d for d in days if d not in done]
        if not days:
            return []
        followers = await self.ledger.followers(platform.name)
        reports: list[DeliveryReport] = []
        for day in days:
            try:
                issue = await asyncio.to_thread(self.archive.on, day)
            except IssueNotFound as exc:  # broken since: the next run tries again
                log.warning("follows of %s on %s wait: %s", day, platform.name, exc)
                continue
            found = await self.follow_issue(platform, issue, followers)
            reports += found
            if all(_settled(r) for r in found):
                await self.ledger.check_follows(platform.name, day, issue.revision)
                self._checked.add((platform.name, day))
                log.info(
                    "follows of %s on %s: %d message(s) sent",
                    day,
                    platform.name,
                    sum(r.sent for r in found),
                )
        return reports

    async def follow_issue(
        self, platform: Platform, issue: Issue, followers: Mapping[str, Sequence[str]]
    ) -> list[DeliveryReport]:
        """Deliver ``issue``'s follow messages to those of ``followers`` (chat -> words)
        whose words it mentions."""
        sender = FollowSender(platform)
        ref = IssueRef(date=issue.date, revision=f"follow-{issue.revision}")
        hits: dict[str, list[SearchHit]] = {}
        # followers with the same matching words get the same text: one delivery for them
        groups: dict[tuple[str, ...], list[str]] = {}
        for chat, words in followers.items():
            matched: list[str] = []
            for word in words:
                if word not in hits:
                    hits[word] = await asyncio.to_thread(self.archive.hits_on, issue.date, word)
                if hits[word]:
                    matched.append(word)
            if matched:
                groups.setdefault(tuple(matched), []).append(chat)
        reports: list[DeliveryReport] = []
        for words_of, chats in groups.items():
            text = follow_text(issue, [(word, hits[word]) for word in words_of])
            targets = [Target(sender.name, chat, TargetKind.PRIVATE) for chat in chats]
            report = await self.engine.deliver(ref, sender, notice(text, platform.flavor), targets)
            reports.append(report)
        return reports


def _settled(report: DeliveryReport) -> bool:
    """Every target of ``report`` has its message, or is gone or deactivated (nothing more
    will reach it): the issue's follows need no further run."""
    return all((t.complete and not t.in_progress) or t.gone for t in report.targets)


def follow_text(issue: Issue, found: Sequence[tuple[str, Sequence[SearchHit]]]) -> str:
    """The follow message: each followed word with the items of ``issue`` that mention it."""
    lines = [
        f"你关注的词出现在 {issue.date} 的日报中 / Words you follow are in the issue of "
        f"{issue.date}:"
    ]
    for word, hits in found:
        lines.append(f"“{word}”")
        for hit in hits[:MAX_HITS_PER_WORD]:
            lines.append(f"· {hit.where} · {hit.title}")
            url = _url(issue, hit)
            if url:
                lines.append(f"  {url}")
    lines.append(f"/issue {issue.date} 查看全文 / reads the whole issue")
    return "\n".join(lines)


def _url(issue: Issue, hit: SearchHit) -> str | None:
    if hit.section is Section.HEADLINE:
        return issue.headline.url
    if hit.section is Section.BRIEFS:
        return issue.brief(hit.index).url
    if hit.section is Section.CLASSIC and issue.classic is not None:
        return issue.classic.url
    return None
