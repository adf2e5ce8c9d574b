"""The editor's dashboard, the core's side: what each page shows, and its buttons' actions.

Every button runs the chat command it stands for through :meth:`Commands.handle
<digest_core.commands.dispatch.Commands.handle>`, as an admin of the dashboard (``platform`` is
:data:`DASHBOARD`, the user the name given at login): the same checks, the same confirmation
(:class:`~digest_core.commands.confirmation.Confirmations`) and the same audit record as in a
chat. An action that outlasts :data:`ANSWER_WITHIN` (a post) goes on in the background; its
answer joins :attr:`Dashboard.jobs`.

The pages read the ledger through its bounded queries (:mod:`digest_core.delivery.ledger.
analytics`), the counts of :class:`~digest_core.service.engagement.Engagement` (flushed first, so
they are current), and the archive from a worker thread.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field

from digest_core.archive import Archive
from digest_core.commands import Reply, Request, Status
from digest_core.commands.catalogue import CATALOGUE
from digest_core.commands.confirmation import Action, Confirmations
from digest_core.commands.dispatch import Commands
from digest_core.commands.requests import ADMIN
from digest_core.delivery import Ledger
from digest_core.delivery.ledger.analytics import LatestDelivery
from digest_core.delivery.ledger.records import AuditEntry
from digest_core.errors import IssueNotFound
from digest_core.models import Issue, Item, Section
from digest_core.platform import Target
from digest_core.port import Adapter
from digest_core.publishing.approval import ApprovalDecision, Publishing, Readiness
from digest_core.publishing.schedule import PostState
from digest_core.rendering import Message, plain_renderer, preview
from digest_core.service.engagement import (
    COMMAND,
    DASHBOARD,
    FOUND,
    LEFT,
    SECTION,
    Engagement,
    Live,
)
from digest_core.service.posting import Posting
from digest_core.site.links import anchor

log = logging.getLogger(__name__)

#: how long a button waits for its action's answer before it goes on in the background
ANSWER_WITHIN = 3.0
#: how long the Audience page's figures are reused (seconds)
AUDIENCE_FRESH = 30.0
#: the commands the dashboard's buttons run (declared ``dashboard=True``)
ACTIONS = frozenset(spec.name for spec in CATALOGUE if spec.dashboard)


@dataclass(frozen=True)
class Preview:
    """What one platform's channels get for the day: the payloads and their text views."""

    platform: str
    messages: list[Message]
    texts: list[str]


@dataclass(frozen=True)
class Today:
    """The Today page: the next issue's readiness, publish time, decision and previews."""

    day: dt.date
    readiness: Readiness
    line: str
    issue: Issue | None
    publish_at: dt.datetime
    held: bool
    decision: ApprovalDecision | None
    state: PostState
    previews: list[Preview]
    #: each running platform's targets (for "repost to one target")
    targets: dict[str, list[Target]]
    require_approval: bool


@dataclass
class Job:
    """A button's action: the command it ran, by whom, and its answer once there."""

    number: int
    command: str
    args: tuple[str, ...]
    user: str
    started: dt.datetime
    answer: str | None = None
    status: Status | None = None


@dataclass(frozen=True)
class Answer:
    """What a button's press gives the page: done (``text``), a confirmation to ask
    (``confirm``: the button data Confirm sends), or a job running in the background."""

    text: str
    status: Status | None
    confirm: str | None = None
    job: Job | None = None


@dataclass(frozen=True)
class Deliveries:
    """The Deliveries page: each platform's latest delivery of the day, the live counts."""

    day: dt.date
    latest: list[LatestDelivery]
    live: dict[str, Live]
    rates: dict[str, float]
    limits: dict[str, float]
    zone: dt.tzinfo


@dataclass(frozen=True)
class Audience:
    """The Audience page's series and tables."""

    days: list[dt.date]
    #: platform -> active subscribers at the end of each day of ``days``
    subscribers: dict[str, list[int]]
    joined: dict[str, list[int]]
    left: dict[str, list[int]]
    #: platform -> commands answered per day; and the day's button presses
    commands: dict[str, list[int]]
    buttons: list[int]
    top_commands: list[tuple[str, int]]
    choices: dict[str, list[tuple[str, str, int]]]
    #: the latest deactivated targets: (platform, target, reason's label, its text, when)
    deactivations: list[tuple[str, str, str, str, dt.datetime]]
    #: why subscriptions ended over ``days``: (platform, reason's label, n), most first. The
    #: readers' own (/unsubscribe, the email's link, mailto, bounce, complaint, as counted
    #: since they are) and the targets that went away (blocked, chat deleted, moved: the
    #: ones still deactivated); ``unrecorded`` is what the days' ``left`` holds beyond them
    #: (ends from before reasons were counted)
    reasons: list[tuple[str, str, int]]


@dataclass(frozen=True)
class StoryRow:
    """One story's response: its clicks, section presses and search hits."""

    date: dt.date
    story: str
    title: str
    clicks: int
    sections: int
    found: int
    #: (link, platform) -> clicks
    links: dict[tuple[int, str], int] = field(default_factory=dict)

    @property
    def score(self) -> int:
        return self.clicks + self.sections + self.found


class Dashboard:
    """See the module docstring."""

    def __init__(
        self,
        *,
        archive: Archive,
        ledger: Ledger,
        publishing: Publishing,
        posting: Posting,
        engagement: Engagement,
        commands: Commands,
        confirmations: Confirmations,
        zone: dt.tzinfo,
    ) -> None:
        self.archive, self.ledger, self.publishing = archive, ledger, publishing
        self.posting, self.engagement, self.zone = posting, engagement, zone
        self.commands, self.confirmations = commands, confirmations
        self.clock = commands.clock
        #: the latest button actions, newest last
        self.jobs: collections.deque[Job] = collections.deque(maxlen=50)
        self._tasks: set[asyncio.Task[Reply]] = set()
        self._audience: dict[int, tuple[float, Audience]] = {}

    @property
    def platforms(self) -> Mapping[str, Adapter]:
        return self.posting.platforms

    def today_date(self) -> dt.date:
        return self.clock.now().astimezone(self.zone).date()

    # ------------------------------------------------------------ Today

    async def today(self, day: dt.date | None = None) -> Today:
        """The Today page of ``day`` (default: the next post's day)."""
        day = day or self.publishing.next_day()
        readiness, line = await self.publishing.readiness(day)
        issue = None
        if readiness is not Readiness.MISSING and readiness is not Readiness.INVALID:
            issue = await asyncio.to_thread(self.archive.on, day)
        previews = await asyncio.to_thread(self._previews, day) if issue is not None else []
        embargo = self.publishing.embargo
        at = embargo.scheduled(day) if embargo.held(day) else embargo.publish_time(day)
        targets = {n: list(p.channel_targets()) for n, p in self.platforms.items()}
        return Today(
            day=day,
            readiness=readiness,
            line=line,
            issue=issue,
            publish_at=at.astimezone(self.zone),
            held=embargo.held(day),
            decision=await self.publishing.decision(day),
            state=await self._state(day),
            previews=previews,
            targets=targets,
            require_approval=self.publishing.config.require_approval,
        )

    async def _state(self, day: dt.date) -> PostState:
        """How far the post of ``day`` got, from each platform's latest delivery as the
        database aggregates it (:meth:`Posting.state` reads every subscriber and every row of
        the day: too much for a page)."""
        latest = [
            d for d in await self.ledger.latest_deliveries(day) if d.platform in self.platforms
        ]
        if not latest:
            return PostState.NONE
        if all(d.done for d in latest):
            return PostState.DONE
        return PostState.PARTIAL

    def _previews(self, day: dt.date) -> list[Preview]:
        """Each platform's channel post of ``day`` (blocking: a worker thread)."""
        found = []
        for name, platform in self.platforms.items():
            try:
                messages = self.publishing.preview_of(day, platform)
            except IssueNotFound:
                return []
            texts = [preview(m, platform.flavor) for m in messages]
            found.append(Preview(name, messages, texts))
        return found

    # ------------------------------------------------------------ the buttons

    def request(self, command: str, args: Sequence[str], *, user: str) -> Request:
        """The chat command a button stands for, as the dashboard's admin ``user``."""
        return Request(
            command,
            tuple(args),
            platform=DASHBOARD,
            flavor=plain_renderer(),
            user=user,
            capabilities=ADMIN,
        )

    async def press(self, command: str, args: Sequence[str], *, user: str) -> Answer:
        """Run the command of a button (one of :data:`ACTIONS`) as ``user``: its answer, the
        confirmation it asks for, or the job it goes on as."""
        if command not in ACTIONS:
            return Answer(f"未知操作 / unknown action {command!r}", Status.USAGE)
        request = self.request(command, args, user=user)
        return await self._answer(request, self.commands.handle(request))

    async def confirm(self, data: str, *, user: str) -> Answer:
        """Confirm (or cancel: ``cx``) the prompt whose Confirm button carries ``data``, as
        the chats' buttons do (:meth:`Confirmations.press`); only its asker may press."""
        by = self.request("", (), user=user)
        async with self.confirmations.press(data, by=by, prompt=(user, data), asked_by=user) as d:
            if d.action is not Action.RUN:
                return Answer(d.note or d.text, None)
            assert d.request is not None
            return await self._answer(d.request, self.confirmations.run(d))

    async def _answer(self, request: Request, work: Awaitable[Reply]) -> Answer:
        job = Job(len(self.jobs) + 1, request.command, request.args, request.user,
                  self.clock.now())  # fmt: skip
        task: asyncio.Task[Reply] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(job, t))
        done, _ = await asyncio.wait({task}, timeout=ANSWER_WITHIN)
        if not done:
            self.jobs.append(job)
            return Answer("", None, job=job)
        reply = task.result()
        text = _text(reply)
        if reply.status is Status.CONFIRM and reply.confirm is not None:
            prompt = self.confirmations.prompt(reply)
            data = prompt.buttons[0].data if prompt.buttons else None
            return Answer(text, reply.status, confirm=data)
        self.jobs.append(job)
        return Answer(text, reply.status, job=job)

    def _finished(self, job: Job, task: asyncio.Task[Reply]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            job.answer, job.status = "已取消 / cancelled", Status.ERROR
            return
        error = task.exception()
        if error is not None:  # handle() never raises; confirmations.run neither
            job.answer, job.status = f"失败 / failed: {error}", Status.ERROR
            return
        reply = task.result()
        job.answer, job.status = _text(reply), reply.status

    # ------------------------------------------------------------ Deliveries

    async def deliveries(self, day: dt.date | None = None) -> Deliveries:
        """Each platform's latest delivery of ``day`` (default today) and the live counts."""
        day = day or self.today_date()
        latest = await self.ledger.latest_deliveries(day)
        names = {d.platform.split("~")[0] for d in latest} | set(self.platforms)
        limits = {n: p.limits.overall.per_second for n, p in self.platforms.items() if n in names}
        return Deliveries(
            day=day,
            latest=latest,
            live={n: self.engagement.live.get(n, Live()) for n in sorted(names)},
            rates={n: self.engagement.rate(n) for n in sorted(names)},
            limits=limits,
            zone=self.zone,
        )

    async def timeline(self, delivery_id: int) -> list[tuple[dt.datetime, int]]:
        """Sends per second of one delivery, as the ledger recorded them."""
        return await self.ledger.timeline(delivery_id)

    # ------------------------------------------------------------ Audience

    async def audience(self, *, days: int = 90) -> Audience:
        """Subscribers per platform per day over ``days``, commands and button presses per
        day, readers' choices, deactivations; the same for :data:`AUDIENCE_FRESH` seconds
        (the page and its charts ask for it together; it changes by the day)."""
        now = self.clock.monotonic()
        kept = self._audience.get(days)
        if kept is not None and now - kept[0] < AUDIENCE_FRESH:
            return kept[1]
        view = await self._audience_now(days)
        self._audience[days] = (now, view)
        return view

    async def _audience_now(self, days: int) -> Audience:
        await self.engagement.flush(self.ledger)
        today = self.today_date()
        span = [today - dt.timedelta(days=days - 1 - i) for i in range(days)]
        base, rows = await self.ledger.subscriber_days(since=span[0])
        platforms = sorted(set(base) | {p for p, *_ in rows} | set(self.platforms))
        index = {d: i for i, d in enumerate(span)}
        joined = {p: [0] * days for p in platforms}
        left = {p: [0] * days for p in platforms}
        for p, d, j, lf in rows:
            if d in index:
                joined[p][index[d]] += j
                left[p][index[d]] += lf
        subscribers = {}
        for p in platforms:
            total, series = base.get(p, 0), []
            for i in range(days):
                total += joined[p][i] - left[p][i]
                series.append(total)
            subscribers[p] = series
        commands, buttons, top = await self._engagement_per_day(span, index)
        return Audience(
            days=span,
            subscribers=subscribers,
            joined=joined,
            left=left,
            commands=commands,
            buttons=buttons,
            top_commands=top,
            choices=await self.ledger.choices(),
            deactivations=[
                (p, t, gone_reason(r, moved=False), r, at)
                for p, t, r, at in await self.ledger.deactivations()
            ],
            reasons=await self._reasons(span[0], left),
        )

    async def _reasons(
        self, since: dt.date, left: dict[str, list[int]]
    ) -> list[tuple[str, str, int]]:
        """Why subscriptions ended from ``since`` on (:attr:`Audience.reasons`)."""
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for _, p, reason, n in await self.ledger.engagement(LEFT, since=since):
            counts[(p, LEFT_LABELS.get(reason, reason))] += n
        start = dt.datetime.combine(since, dt.time(), dt.UTC)
        for p, reason, moved, n in await self.ledger.deactivation_reasons(since=start):
            counts[(p, gone_reason(reason, moved=moved))] += n
        for p, series in left.items():
            told = sum(n for (q, _), n in counts.items() if q == p)
            if sum(series) > told:
                counts[(p, UNRECORDED)] += sum(series) - told
        return sorted(((p, r, n) for (p, r), n in counts.items()), key=lambda x: (-x[2], x[:2]))

    async def _engagement_per_day(
        self, span: list[dt.date], index: dict[dt.date, int]
    ) -> tuple[dict[str, list[int]], list[int], list[tuple[str, int]]]:
        commands: dict[str, list[int]] = {}
        per_command: collections.Counter[str] = collections.Counter()
        for d, p, key, n in await self.ledger.engagement(COMMAND, since=span[0]):
            commands.setdefault(p, [0] * len(span))[index[d]] += n
            per_command[key] += n
        buttons = [0] * len(span)
        for d, _, _, n in await self.ledger.engagement(SECTION, since=span[0]):
            buttons[index[d]] += n
        return commands, buttons, per_command.most_common(10)

    # ------------------------------------------------------------ Stories

    async def stories(self, *, days: int = 30, issue: dt.date | None = None) -> list[StoryRow]:
        """Per story of the issues of the last ``days`` (or of one issue): clicks on its links,
        presses of its section's button, searches that showed it; most read first."""
        await self.engagement.flush(self.ledger)
        since = self.today_date() - dt.timedelta(days=days - 1)
        prefix = None if issue is None else issue.isoformat() + ":"
        rows: dict[tuple[dt.date, str], _Tally] = collections.defaultdict(_Tally)
        for d, story, link, platform, n in await self.ledger.clicks(since=since, issue=issue):
            rows[(d, story)].clicks += n
            rows[(d, story)].links[(link, platform)] += n
        sections = collections.Counter[tuple[dt.date, str]]()
        for _, _, key, n in await self.ledger.engagement(SECTION, since=since, prefix=prefix):
            day, _, section = key.partition(":")
            sections[(dt.date.fromisoformat(day), section)] += n
        for _, _, key, n in await self.ledger.engagement(FOUND, since=since, prefix=prefix):
            day, _, story = key.partition(":")
            rows[(dt.date.fromisoformat(day), story)].found += n
        days_ = {d for d, _ in rows} | {d for d, _ in sections}
        titles = await asyncio.to_thread(self._titles, days_)
        for (d, section), n in sections.items():
            for story in titles.get(d, {}):
                if _section_of(story) == section:
                    rows[(d, story)].sections += n
        found = [
            StoryRow(d, s, titles.get(d, {}).get(s, s), t.clicks, t.sections, t.found,
                     dict(t.links))
            for (d, s), t in rows.items()
        ]  # fmt: skip
        return sorted(found, key=lambda r: (-r.score, r.date, r.story))[:200]

    def _titles(self, days: set[dt.date]) -> dict[dt.date, dict[str, str]]:
        """story -> title of each issue of ``days`` (blocking: a worker thread)."""
        found: dict[dt.date, dict[str, str]] = {}
        for day in days:
            try:
                issue = self.archive.on(day)
            except IssueNotFound:
                continue
            found[day] = {story: item.title for story, item in stories_of(issue)}
        return found

    # ------------------------------------------------------------ the audit log

    async def audit(
        self,
        *,
        who: str | None = None,
        action: str | None = None,
        day: dt.date | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[AuditEntry]:
        """A page of the audit log filtered by who, what and day (the digest's zone)."""
        since = until = None
        if day is not None:
            since = dt.datetime.combine(day, dt.time(), self.zone)
            until = since + dt.timedelta(days=1)
        return await self.ledger.audit_page(
            who=who, action=action, since=since, until=until, before_id=before_id, limit=limit
        )


#: the readers' own reasons (``LEFT_REASONS``) as the Audience page names them
LEFT_LABELS = {
    "command": "/unsubscribe",
    "link": "退订链接 / unsubscribe link",
    "mailto": "退订邮件 / unsubscribe mail (mailto)",
    "bounce": "退信 / bounce",
    "complaint": "投诉为垃圾邮件 / spam complaint",
}
UNRECORDED = "未记录 / not recorded"
#: a deactivation's label by words of its error (the platforms' own texts), first match
_GONE_LABELS = (
    ("被读者屏蔽 / blocked by the reader",
     ("blocked by the user", "cannot send messages to this user", "code 50007")),
    ("账号已注销 / account deleted", ("user is deactivated", "deactivated")),
    ("被移出 / removed from the chat",
     ("kicked", "not a member", "bot was removed", "missing access", "not enough rights",
      "have no rights", "cannot post there", "outside the app")),
    ("会话已删除 / chat deleted",
     ("chat not found", "unknown channel", "was deleted", "chat_not_found", "code 10003")),
    ("邮箱拒收 / address refused (bounce)", ("address is refused",)),
    ("已退订 / unsubscribed", ("has unsubscribed",)),
)  # fmt: skip


def gone_reason(reason: str, *, moved: bool) -> str:
    """A short label for why a target was deactivated: its error text as the platform gave
    it (``TargetGone: Forbidden: bot was blocked by the user``) sorted into kinds."""
    if moved or reason.startswith("moved to "):
        return "已迁移 / moved"
    low = reason.lower()
    for label, words in _GONE_LABELS:
        if any(w in low for w in words):
            return label
    return "其他 / other"


@dataclass
class _Tally:
    clicks: int = 0
    sections: int = 0
    found: int = 0
    links: collections.Counter[tuple[int, str]] = field(default_factory=collections.Counter)


def stories_of(issue: Issue) -> list[tuple[str, Item]]:
    """(story id, item) of every story of ``issue``: ``headline``, ``brief-N``, ``classic``."""
    found: list[tuple[str, Item]] = []
    number = 0
    for section, item in issue.items():
        if section is Section.BRIEFS:
            number += 1
            found.append((anchor(section, number), item))
        else:
            found.append((anchor(section), item))
    return found


def _section_of(story: str) -> str:
    return "briefs" if story.startswith("brief-") else story


def _text(reply: Reply) -> str:
    plain = plain_renderer()
    return "\n".join(preview(m, plain) for m in reply.messages)
