"""What the editor's dashboard reads: counts that name no reader, each query bounded.

- **Counts** written by the bot as readers act: clicks on tracked links (``link_clicks``) and
  the rest of their engagement, commands, section buttons, search hits and unsubscribes
  (``usage_counts``: the table keeps the name it was created with), added in batches (one
  upsert per batch: :meth:`Analytics.add_clicks`, :meth:`Analytics.add_engagement`).
- **Audience**: subscribers per platform per day (from each subscription's ``since`` and
  ``until``), preferences (formats, delivery hours), follows, unsubscribes and deactivations.
- **A day's deliveries**: per platform and target, its parts by state, retries and when it
  completed, and the last delivery's timeline (sends per second), aggregated by the database.

Reads go on a connection of their own where the database allows it (an SQLite file in WAL
mode, PostgreSQL), never in the ledger's one-transaction-at-a-time lock, so the dashboard
never holds up a delivery's writes; every aggregate is computed by the database (rows are
not turned into objects on the event loop), over indexes, and bounded by a day range or a
limit.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Date, String, case, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from digest_core.delivery.ledger.schema import (
    PartState,
    deliveries,
    follows,
    link_clicks,
    parts,
    preferences,
    subscribers,
    targets,
    usage_counts,
)
from digest_core.delivery.ledger.state import LedgerState

__all__ = [
    "MAX_ROWS",
    "RECENT",
    "SENT",
    "Analytics",
    "ClickKey",
    "EngagementKey",
    "LatestDelivery",
    "TargetProgress",
    "reading",
]

log = logging.getLogger(__name__)

#: (issue date, story, link, platform, day) of a click count
ClickKey = tuple[dt.date, str, int, str, dt.date]
#: (day, platform, kind, key) of an engagement count (a command, a section button, a search
#: hit, an unsubscribe: :mod:`digest_core.service.engagement`'s kinds)
EngagementKey = tuple[dt.date, str, str, str]
#: the most rows one dashboard list shows
MAX_ROWS = 500
#: the targets a delivery's list shows besides the troubled ones: the last planned
RECENT = 50
#: how long a delivery's figures are reused once it is done, and while it runs (seconds)
KEEP_DONE, KEEP_LIVE = 30.0, 2.0
_T = TypeVar("_T")
#: the states a target's row counts, in :class:`TargetProgress`'s order
_SHOWN = (
    PartState.SENT,
    PartState.PENDING,
    PartState.IN_FLIGHT,
    PartState.FAILED,
    PartState.GONE,
    PartState.UNKNOWN,
)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SENT = PartState.SENT.value
_UNSENT = frozenset(st.value for st in PartState if st is not PartState.SENT)


@dataclass(frozen=True)
class TargetProgress:
    """One target's parts in a platform's latest delivery of a day."""

    platform: str
    target: str
    kind: str
    sent: int
    pending: int
    in_flight: int
    failed: int
    gone: int
    unknown: int
    #: attempts beyond the first, summed over the parts
    retries: int
    #: the last change of its rows (its completion, once nothing is pending)
    updated_at: dt.datetime | None
    last_error: str | None

    @property
    def done(self) -> bool:
        return not (self.pending or self.in_flight or self.unknown)

    @property
    def troubled(self) -> bool:
        """A part failed, went to a gone target, or is not sent yet."""
        return bool(self.failed or self.gone or not self.done)


@dataclass(frozen=True)
class LatestDelivery:
    """A platform's latest delivery of a day: which one, and its parts per target."""

    platform: str
    delivery_id: int
    revision: str
    generation: int
    created_at: dt.datetime
    #: the troubled targets and the latest changed (at most :data:`MAX_ROWS` + RECENT)
    targets: list[TargetProgress]
    #: its rows by state (``pending``, ``sent``, …), ``retries`` and ``targets`` (how many)
    totals: dict[str, int]
    #: the last change of its rows
    updated_at: dt.datetime | None

    @property
    def done(self) -> bool:
        """Nothing pending, in flight or of unknown outcome."""
        t = self.totals
        return not (t["pending"] or t["in_flight"] or t["unknown"])


@contextlib.asynccontextmanager
async def reading(state: LedgerState) -> AsyncIterator[AsyncConnection]:
    """A connection for reads beside the ledger's writes (an SQLite file in WAL mode or a
    server database); an in-memory database has one connection, shared under the lock."""
    if state.engine.dialect.name == "sqlite" and state.path is None:
        async with state.tx() as conn:
            yield conn
        return
    async with state.engine.connect() as conn:
        yield conn


def _upsert(conn: AsyncConnection, table: Any, keys: Sequence[str], counter: str) -> Any:
    # each dialect's module imported when its ledger first writes a count: a bot on SQLite
    # never pays for PostgreSQL's (about 25 ms of every start)
    statement: Any
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        statement = pg_insert(table)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        statement = sqlite_insert(table)
    return statement.on_conflict_do_update(
        index_elements=list(keys),
        set_={counter: getattr(table.c, counter) + getattr(statement.excluded, counter)},
    )


class Analytics:
    """Counts for the dashboard: written in batches, read bounded (module docstring)."""

    def __init__(self, state: LedgerState) -> None:
        self.state = state
        #: (what, delivery id) -> (when, the answer); the deliveries seen done
        self._cache: dict[tuple[str, int], tuple[float, object]] = {}
        self._done: set[int] = set()

    # ------------------------------------------------------------ writing counts

    async def add_clicks(self, counts: Mapping[ClickKey, int]) -> None:
        """Add ``counts`` of clicks (one upsert for the batch)."""
        rows = [
            {"issue_date": i, "story": s, "link": n, "platform": p, "day": d, "clicks": c}
            for (i, s, n, p, d), c in counts.items()
        ]
        if not rows:
            return
        keys = ("issue_date", "story", "link", "platform", "day")
        async with self.state.tx() as conn:
            await conn.execute(_upsert(conn, link_clicks, keys, "clicks"), rows)
        self.state.stats.rows_inserted += len(rows)

    async def add_engagement(self, counts: Mapping[EngagementKey, int]) -> None:
        """Add engagement ``counts``: commands, section buttons, search hits, unsubscribes
        (one upsert)."""
        rows = [
            {"day": d, "platform": p, "kind": k, "key": key[:64], "n": n}
            for (d, p, k, key), n in counts.items()
        ]
        if not rows:
            return
        async with self.state.tx() as conn:
            await conn.execute(
                _upsert(conn, usage_counts, ("day", "platform", "kind", "key"), "n"), rows
            )
        self.state.stats.rows_inserted += len(rows)

    # ------------------------------------------------------------ reading counts

    async def clicks(
        self, *, since: dt.date | None = None, issue: dt.date | None = None
    ) -> list[tuple[dt.date, str, int, str, int]]:
        """(issue date, story, link, platform, clicks) summed over days (from ``since``), of
        one issue or all, most clicked first (at most :data:`MAX_ROWS`)."""
        total = func.sum(link_clicks.c.clicks)
        query = (
            select(
                link_clicks.c.issue_date,
                link_clicks.c.story,
                link_clicks.c.link,
                link_clicks.c.platform,
                total,
            )
            .group_by(
                link_clicks.c.issue_date,
                link_clicks.c.story,
                link_clicks.c.link,
                link_clicks.c.platform,
            )
            .order_by(total.desc())
            .limit(MAX_ROWS)
        )
        if since is not None:
            query = query.where(link_clicks.c.day >= since)
        if issue is not None:
            query = query.where(link_clicks.c.issue_date == issue)
        async with reading(self.state) as conn:
            return [(d, s, int(n), p, int(c)) for d, s, n, p, c in await conn.execute(query)]

    async def engagement(
        self, kind: str, *, since: dt.date, prefix: str | None = None
    ) -> list[tuple[dt.date, str, str, int]]:
        """(day, platform, key, n) of one kind of engagement count from ``since`` on (keys starting
        ``prefix`` if given), oldest day first."""
        query = (
            select(
                usage_counts.c.day, usage_counts.c.platform, usage_counts.c.key, usage_counts.c.n
            )
            .where(usage_counts.c.kind == kind, usage_counts.c.day >= since)
            .order_by(usage_counts.c.day)
            .limit(MAX_ROWS * 20)
        )
        if prefix is not None:
            query = query.where(usage_counts.c.key.startswith(prefix, autoescape=True))
        async with reading(self.state) as conn:
            return [(d, p, k, int(n)) for d, p, k, n in await conn.execute(query)]

    # ------------------------------------------------------------ audience

    async def subscriber_days(
        self, *, since: dt.date
    ) -> tuple[dict[str, int], list[tuple[str, dt.date, int, int]]]:
        """The audience's history: (active subscribers per platform before ``since``, and
        (platform, day, joined, left) from ``since`` on, by the UTC day of each
        subscription's start and end). A reader who subscribed again counts from the last
        time."""
        c = subscribers.c
        days: dict[tuple[str, dt.date], list[int]] = {}
        base: dict[str, int] = {}
        start = dt.datetime.combine(since, dt.time(), dt.UTC)
        async with reading(self.state) as conn:
            # over the (platform, since) and (platform, until) indexes alone: those who
            # joined (left) before ``since`` counted per platform, and only the days from
            # ``since`` on grouped by day (a year of 100k readers grouped by day: 37 ms)
            joined, left = _day(conn, c.since), _day(conn, c.until)
            before = [
                select(c.platform, func.count()).where(c.since < start).group_by(c.platform),
                select(c.platform, func.count()).where(c.until < start).group_by(c.platform),
            ]
            for sign, query in zip((1, -1), before, strict=True):
                for p, n in await conn.execute(query):
                    base[p] = base.get(p, 0) + sign * int(n)
            joins = (
                select(c.platform, joined, func.count())
                .where(c.since >= start)
                .group_by(c.platform, joined)
            )
            leaves = (
                select(c.platform, left, func.count())
                .where(c.until >= start)
                .group_by(c.platform, left)
            )
            for column, query in ((0, joins), (1, leaves)):
                for p, day, n in await conn.execute(query):
                    days.setdefault((p, _date(day)), [0, 0])[column] += int(n)
        base = {p: n for p, n in base.items() if n}
        rows = sorted((p, d, j, left) for (p, d), (j, left) in days.items())
        return base, rows

    async def choices(self) -> dict[str, list[tuple[str, str, int]]]:
        """What readers chose, counted: ``formats`` (platform, format, n), ``hours``
        (platform, "HH" of their own time or "" for the digest's, n), ``follows``
        (platform, "", readers following anything) and ``words`` (platform, word, n; the
        most followed)."""
        queries = {
            "formats": select(preferences.c.platform, preferences.c.format, func.count())
            .group_by(preferences.c.platform, preferences.c.format),
            "times": select(preferences.c.platform, preferences.c.at, func.count())
            .group_by(preferences.c.platform, preferences.c.at),
            "follows": select(follows.c.platform, func.count(func.distinct(follows.c.chat_id)))
            .group_by(follows.c.platform),
            "words": select(follows.c.platform, follows.c.word, func.count())
            .group_by(follows.c.platform, follows.c.word)
            .order_by(func.count().desc(), follows.c.word)
            .limit(20),
        }  # fmt: skip
        async with reading(self.state) as conn:
            rows = {name: list(await conn.execute(q)) for name, q in queries.items()}
        hours: collections.Counter[tuple[str, str]] = collections.Counter()
        for p, at, n in rows["times"]:  # at most 1,440 times a platform
            hours[(p, (at or "")[:2])] += int(n)
        return {
            "formats": [(p, str(f), int(n)) for p, f, n in rows["formats"]],
            "hours": sorted((p, h, n) for (p, h), n in hours.items()),
            "follows": [(p, "", int(n)) for p, n in rows["follows"]],
            "words": [(p, str(w), int(n)) for p, w, n in rows["words"]],
        }

    async def deactivations(self, *, limit: int = 50) -> list[tuple[str, str, str, dt.datetime]]:
        """(platform, target, reason, when) of the targets deactivated (gone or moved),
        newest first."""
        query = (
            select(targets.c.platform, targets.c.target_id, targets.c.reason, targets.c.updated_at)
            .where(targets.c.active.is_(False))
            .order_by(targets.c.updated_at.desc())
            .limit(min(limit, MAX_ROWS))
        )
        async with reading(self.state) as conn:
            return [(p, t, r or "", at) for p, t, r, at in await conn.execute(query)]

    async def deactivation_reasons(self, *, since: dt.datetime) -> list[tuple[str, str, bool, int]]:
        """(platform, reason, moved, n): the targets deactivated (gone or moved) from
        ``since`` on and still so, counted per platform and reason text, most first (at
        most :data:`MAX_ROWS`)."""
        count = func.count()
        query = (
            select(targets.c.platform, targets.c.reason, targets.c.moved_to.is_not(None), count)
            .where(targets.c.active.is_(False), targets.c.updated_at >= since)
            .group_by(targets.c.platform, targets.c.reason, targets.c.moved_to.is_not(None))
            .order_by(count.desc(), targets.c.platform, targets.c.reason)
            .limit(MAX_ROWS)
        )
        async with reading(self.state) as conn:
            return [(p, r or "", bool(m), int(n)) for p, r, m, n in await conn.execute(query)]

    # ------------------------------------------------------------ a day's deliveries

    async def latest_deliveries(self, day: dt.date) -> list[LatestDelivery]:
        """Each platform's latest delivery of ``day`` (follow messages' included, under their
        own platform key) with its parts per target, failures and waits first."""
        latest = (
            select(func.max(deliveries.c.id))
            .where(deliveries.c.issue_date == day)
            .group_by(deliveries.c.platform)
        )
        found: list[LatestDelivery] = []
        async with reading(self.state) as conn:
            ids = [i for (i,) in await conn.execute(latest)]
            heads = list(await conn.execute(select(deliveries).where(deliveries.c.id.in_(ids))))
            for head in heads:
                read = functools.partial(_targets_of, conn, head.id, head.platform)
                rows, totals, at = await self._kept(("targets", head.id), read)
                live = totals["pending"] or totals["in_flight"] or totals["unknown"]
                (self._done.discard if live else self._done.add)(head.id)
                found.append(
                    LatestDelivery(
                        head.platform,
                        head.id,
                        head.revision,
                        head.generation,
                        head.created_at,
                        rows,
                        totals,
                        at,
                    )
                )
        return sorted(found, key=lambda d: d.platform)

    async def timeline(self, delivery_id: int) -> list[tuple[dt.datetime, int]]:
        """(second, parts recorded sent in it) of one delivery, in order: its sends per
        second as the ledger saw them (the writer's group commits shift a send by at most a
        batch)."""
        return await self._kept(("timeline", delivery_id), lambda: self._timeline(delivery_id))

    async def _kept(self, key: tuple[str, int], compute: Callable[[], Awaitable[_T]]) -> _T:
        """``compute()``'s answer about one delivery, kept :data:`KEEP_DONE` seconds once the
        delivery is done (nothing pending, in flight or unknown: its rows change again only
        by a repost or a correction), :data:`KEEP_LIVE` while it runs: a page polled every
        second reads 100k rows at most that often."""
        now = self.state.clock.monotonic()
        ttl = KEEP_DONE if key[1] in self._done else KEEP_LIVE
        kept = self._cache.get(key)
        if kept is not None and now - kept[0] < ttl:
            return kept[1]  # type: ignore[return-value]  # (the key names what was kept)
        value = await compute()
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (now, value)
        return value

    async def _timeline(self, delivery_id: int) -> list[tuple[dt.datetime, int]]:
        async with reading(self.state) as conn:
            if conn.dialect.name == "postgresql":
                second: Any = func.date_trunc("second", parts.c.updated_at)
            else:
                # the stored text's first 19 characters ("YYYY-MM-DD HH:MM:SS"): a third of
                # strftime()'s cost over a delivery of 100k rows
                second = func.substr(parts.c.updated_at, 1, 19)
            # by the delivery's rows alone: ``state || ''`` keeps SQLite (no statistics) off
            # the state index, whose "sent" holds every delivery's rows (1.4M rows read for
            # 100k: 150 ms, against 40 ms)
            query = (
                select(second, func.count())
                .where(parts.c.delivery_id == delivery_id, _unindexed(parts.c.state) == SENT)
                .group_by(second)
                .order_by(second)
                .limit(24 * 3600)
            )
            rows = list(await conn.execute(query))
        return [(_second(at), int(n)) for at, n in rows]


async def _targets_of(
    conn: AsyncConnection, delivery_id: int, platform: str
) -> tuple[list[TargetProgress], dict[str, int], dt.datetime | None]:
    """One delivery's totals (one pass over its rows, by the database), and the targets to
    show: every troubled one (a part not sent; at most :data:`MAX_ROWS`) and the
    :data:`RECENT` most recently changed, each with its parts by state."""
    totals, last, last_id = await _totals_of(conn, delivery_id)
    chosen = await _chosen_targets(conn, delivery_id, totals, last_id)
    rows = await _progress_of(conn, delivery_id, platform, chosen) if chosen else []
    rows.sort(key=lambda t: (not t.troubled, -(t.updated_at or _EPOCH).timestamp()))
    return rows, totals, last


def _retries() -> Any:
    c = parts.c
    return func.sum(case((c.attempts > 1, c.attempts - 1), else_=0))


async def _totals_of(
    conn: AsyncConnection, delivery_id: int
) -> tuple[dict[str, int], dt.datetime | None, int]:
    """A delivery's parts by state, its retries and targets, its last change and last row id:
    one pass over its rows, grouped by state (cheaper than a sum per state over every row)."""
    c = parts.c
    totals = dict.fromkeys([st.value for st in PartState], 0)
    totals["retries"] = totals["targets"] = 0
    last: dt.datetime | None = None
    last_id = 0
    by_state = (
        select(
            c.state, func.count(), _retries(), func.max(c.updated_at), func.max(c.id),
            func.sum(case((c.part == 0, 1), else_=0)),
        )
        .where(c.delivery_id == delivery_id)
        .group_by(c.state)
    )  # fmt: skip
    for state, count, again, at, top, first in await conn.execute(by_state):
        totals[str(state)] = int(count)
        totals["retries"] += int(again or 0)
        totals["targets"] += int(first or 0)
        last_id = max(last_id, int(top))
        at = _aware(at)
        last = at if last is None or (at is not None and at > last) else last
    return totals, last, last_id


async def _chosen_targets(
    conn: AsyncConnection, delivery_id: int, totals: dict[str, int], last_id: int
) -> list[str]:
    """The targets to show: the troubled ones first, then the most recently planned."""
    c = parts.c
    # its rows not sent, by the state index (a done delivery's few failed rows, not its
    # 100k sent ones), only of the states it has
    unsent = [st for st, k in totals.items() if k and st in _UNSENT]
    troubled = (
        select(c.target)
        .where(c.state.in_(unsent), _unindexed(c.delivery_id) == delivery_id)
        .limit(MAX_ROWS)
    )
    # (the newest rows by id: its last planned targets; ordering 100k rows by their time
    # would sort them all, and so would the delivery's index, ordered by target: backwards
    # over the table from its last row instead, which reads just these)
    recent = (
        select(c.target)
        .where(c.id <= last_id, _unindexed(c.delivery_id) == delivery_id)
        .order_by(c.id.desc())
        .limit(RECENT * 4)
    )
    chosen = list(dict.fromkeys([t for (t,) in await conn.execute(troubled)] if unsent else []))
    for (t,) in await conn.execute(recent):
        if t not in chosen and len(chosen) < MAX_ROWS + RECENT:
            chosen.append(t)
    return chosen


async def _progress_of(
    conn: AsyncConnection, delivery_id: int, platform: str, chosen: list[str]
) -> list[TargetProgress]:
    """Each chosen target's parts by state, retries, last change and last error."""
    c = parts.c

    def n(state: PartState) -> Any:
        return func.sum(case((c.state == state.value, 1), else_=0))

    query = (
        select(
            c.target, func.min(c.kind), *(n(st) for st in _SHOWN), _retries(),
            func.max(c.updated_at), func.max(c.last_error),
        )
        .where(c.delivery_id == delivery_id, c.target.in_(chosen))
        .group_by(c.target)
    )  # fmt: skip
    rows: list[TargetProgress] = []
    for t, k, s_, p, f, fl, g, u, r, at, err in await conn.execute(query):
        rows.append(TargetProgress(platform, t, k, int(s_), int(p), int(f), int(fl),
                                   int(g), int(u), int(r), _aware(at), err))  # fmt: skip
    return rows


def _unindexed(column: Any) -> Any:
    """``column`` in a form no index matches (SQLite's planner has no statistics and would
    take any index of an equality, however many rows it holds)."""
    if isinstance(column.type, String):
        return column.concat("")
    return column + 0


def _day(conn: AsyncConnection, column: Any) -> Any:
    """The UTC day of a datetime column (SQLite stores text "YYYY-MM-DD HH:MM:SS…": its first
    ten characters; a cast elsewhere)."""
    return func.substr(column, 1, 10) if conn.dialect.name == "sqlite" else cast(column, Date)


def _date(value: Any) -> dt.date:
    """A date as the database gives it (SQLite: text)."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value)[:10])


def _aware(value: Any) -> dt.datetime | None:
    """An aggregate's datetime (naive UTC, or SQLite's text) as an aware one."""
    if value is None:
        return None
    at = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return at.replace(tzinfo=dt.UTC) if at.tzinfo is None else at


def _second(value: Any) -> dt.datetime:
    at = _aware(value)
    assert at is not None
    return at
