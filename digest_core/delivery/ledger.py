"""The delivery ledger (what was sent where), subscribers and the audit log: SQLAlchemy 2 async."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import logging
import os
import re
import secrets
import socket
import sys
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import (
    Boolean,
    Column,
    Date,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    bindparam,
    case,
    cast,
    delete,
    event,
    func,
    insert,
    inspect,
    literal,
    make_url,
    select,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.exc import DBAPIError, IntegrityError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from digest_core.clock import Clock, SystemClock
from digest_core.delivery.health import LedgerHealth, RetryPolicy, retrying, short_error
from digest_core.delivery.identity import (
    NEW_LEDGER_FLAG,
    RUN_NEW_LEDGER,
    check_identity,
    marker_for,
    new_ledger_id,
    read_marker,
    write_marker,
)
from digest_core.errors import ConfigError, LedgerError, LedgerLost
from digest_core.models import IssueRef
from digest_core.platform import Target, TargetKind

log = logging.getLogger(__name__)

#: Where the ledger lives unless config says otherwise (relative to the working directory).
DEFAULT_LEDGER_URL = "sqlite+aiosqlite:///var/ledger.sqlite3"
#: Bumped with every schema change; :data:`_MIGRATIONS` holds the step from each older version.
SCHEMA_VERSION = 4
#: The settings key the ledger URL comes from (named in configuration errors).
CONFIG_KEY = "database_url"
#: How long a lease lasts unless renewed; a crashed holder blocks others at most this long
#: (less on the same host, where a dead holder's lease is taken over at once).
DEFAULT_LEASE_TTL = 60.0
#: SQLite's bound-parameter limit is 32766 since 3.32; stay far below it.
_CHUNK = 500
#: targets planned per transaction: bounds the time the event loop spends on one batch
#: (benchmarks/fanout.py --subscribers) and the rows held in memory
_PLAN_BATCH = 500


class PartState(StrEnum):
    """The life of one ledger row: pending -> in_flight -> sent | failed | gone | unknown.

    ``unknown`` rows (a send cut after the request may have left) count with the rows in
    flight as possible duplicates, and are sent again like pending ones (at least once).
    """

    PENDING = "pending"
    IN_FLIGHT = "in_flight"  # committed before the send: the only rows a crash can repeat
    SENT = "sent"
    FAILED = "failed"
    GONE = "gone"
    UNKNOWN = "unknown"  # outcome unknown: the message may have arrived; retried


#: the states of rows that may have reached their target without being recorded sent
MAYBE_SENT = frozenset({PartState.IN_FLIGHT, PartState.UNKNOWN})


class DayState(StrEnum):
    """How far the post of one day got on one platform (:meth:`Ledger.day_state`)."""

    NONE = "none"  # nothing planned
    PARTIAL = "partial"  # some part of the current rows is pending, in flight or unknown
    DONE = "done"  # every current row reached a final state (sent, failed or gone)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """An aware datetime stored as naive UTC (SQLite has no time zones) and read back aware."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the ledger stores aware datetimes only")
        return value.astimezone(dt.UTC).replace(tzinfo=None)

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        return None if value is None else value.replace(tzinfo=dt.UTC)


metadata = MetaData()

schema_version = Table("schema_version", metadata, Column("version", Integer, primary_key=True))

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("issue_date", Date, nullable=False),
    Column("revision", String(32), nullable=False),
    Column("platform", String(32), nullable=False),
    # 1 for the first delivery of an issue revision; every `force` adds one and keeps history.
    Column("generation", Integer, nullable=False),
    Column("forced", Boolean, nullable=False, default=False),
    Column("parts", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("issue_date", "revision", "platform", "generation"),
)

parts = Table(
    "parts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("delivery_id", Integer, ForeignKey("deliveries.id"), nullable=False),
    Column("target", String(128), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("part", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("message_id", String(128)),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("delivery_id", "target", "part"),
    Index("ix_parts_state", "state"),
    Index("ix_parts_target", "target"),
    # newest first (records(), last_sent(), the start-up "any rows?") without a sort
    Index("ix_parts_updated", "updated_at", "id"),
)

targets = Table(
    "targets",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("target_id", String(128), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("active", Boolean, nullable=False),
    Column("moved_to", String(128)),
    Column("reason", Text),
    Column("updated_at", UTCDateTime, nullable=False),
)

subscribers = Table(
    "subscribers",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("chat_id", String(128), primary_key=True),
    Column("active", Boolean, nullable=False),
    Column("since", UTCDateTime, nullable=False),
    Column("until", UTCDateTime),
)

#: Cross-process mutual exclusion (``deliver:<platform>``): one owner (a Ledger instance) at a
#: time, until ``expires_at`` unless renewed.
leases = Table(
    "leases",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
)

audit = Table(
    "audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("platform", String(32), nullable=False),
    Column("user_id", String(128), nullable=False),
    Column("action", String(64), nullable=False),
    Column("args", Text, nullable=False),
    Column("allowed", Boolean, nullable=False),
    Column("outcome", Text, nullable=False),
)

#: One row: the id of this ledger, also kept in a marker file beside it (see
#: :mod:`digest_core.delivery.identity`), so a lost database is not silently replaced.
ledger_identity = Table(
    "ledger_identity",
    metadata,
    Column("key", Integer, primary_key=True),  # always 1
    Column("id", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

#: version -> DDL/data steps that bring a database from that version to the next (new tables
#: need none: ``create_all`` adds them before the steps run).
_MIGRATIONS: dict[int, Sequence[str]] = {
    1: (),  # 2: the leases table
    # 3: the index behind records(); the state "unknown" needs no DDL (state is free text)
    2: ("CREATE INDEX IF NOT EXISTS ix_parts_updated ON parts (updated_at, id)",),
    3: (),  # 4: the ledger_identity table
}


class db_time(FunctionElement[dt.datetime]):
    """The database's clock plus ``seconds``, as the ledger stores datetimes (naive UTC).

    Leases are judged by this one clock, never a host's: with the hosts' clocks apart (or one
    jumping), a live lease still looks live to everyone.
    """

    type = UTCDateTime()
    inherit_cache = True
    name = "db_time"

    def __init__(self, seconds: float = 0.0) -> None:
        super().__init__(cast(literal(float(seconds), Float()), Float()))


@compiles(db_time, "sqlite")
def _db_time_sqlite(element: db_time, compiler: SQLCompiler, **kw: Any) -> str:
    # the text SQLAlchemy stores a DateTime as on SQLite ('YYYY-MM-DD HH:MM:SS.ffffff'), so
    # comparisons with stored values are text comparisons of one format
    seconds = compiler.process(element.clauses, **kw)
    return f"(strftime('%Y-%m-%d %H:%M:%f', julianday('now') + ({seconds}) / 86400.0) || '000')"


@compiles(db_time)
def _db_time_default(element: db_time, compiler: SQLCompiler, **kw: Any) -> str:
    # PostgreSQL (and any SQL with AT TIME ZONE and make_interval): naive UTC, like the columns
    seconds = compiler.process(element.clauses, **kw)
    return f"((CURRENT_TIMESTAMP AT TIME ZONE 'UTC') + make_interval(secs => {seconds}))"


def delivery_lease(platform: str) -> str:
    """The name of the lease a delivery on ``platform`` holds."""
    return f"deliver:{platform}"


@dataclass(frozen=True, slots=True)
class PlannedPart:
    """One ledger row a delivery still has to send."""

    id: int
    part: int
    #: the state found when planning: IN_FLIGHT (a crashed run's) or UNKNOWN (a cut send) mean
    #: it may already have arrived
    state: PartState
    attempts: int


@dataclass(frozen=True, slots=True)
class TargetPlan:
    """What one requested target still needs."""

    requested: Target
    #: ``requested`` after following recorded moves (Telegram group -> supergroup)
    target: Target
    #: the parts to send as plain ``(id, part, state, attempts)`` tuples, read as
    #: :attr:`parts`: a plan for 100k targets stays small, and plain tuples of numbers and
    #: strings drop out of the garbage collector's passes (which otherwise stall the loop)
    rows: tuple[tuple[int, int, str, int], ...]
    #: parts found sent (at this id or an earlier id of the target)
    already_sent: int
    #: unsent parts left out because another delivery running now has them in flight
    in_progress: int = 0
    #: set when the target already got (part of) this day's issue under that other revision:
    #: nothing of this revision is planned for it without ``force`` (``already_sent`` counts
    #: the parts it got)
    sent_revision: str | None = None

    @property
    def parts(self) -> tuple[PlannedPart, ...]:
        """The parts to send, in part order."""
        return tuple(PlannedPart(i, p, PartState(s), a) for i, p, s, a in self.rows)


@dataclass(frozen=True)
class Plan:
    """The result of :meth:`Ledger.plan`: the rows to send, per target, in part order."""

    delivery_id: int
    generation: int
    ref: IssueRef
    platform: str
    n_parts: int
    #: one plain tuple per planned target (:data:`_Entry`), read as :attr:`targets`: plain
    #: tuples of strings and numbers drop out of the garbage collector's passes, whose cost
    #: grows with every object alive and stalls the loop at 100k targets
    entries: tuple[_Entry, ...]
    #: requested targets skipped because they are deactivated (gone)
    inactive: tuple[Target, ...]

    @property
    def targets(self) -> tuple[TargetPlan, ...]:
        """What each requested target still needs, in request order."""
        return tuple(self.target_plans())

    def target_plans(self) -> Iterator[TargetPlan]:
        """:attr:`targets` one at a time (a caller with many targets yields between them)."""
        platform = self.platform
        for req_id, kind, final, rows, already, in_progress, revision in self.entries:
            requested = Target(platform, req_id, TargetKind(kind))
            target = requested if final == req_id else Target(platform, final, requested.kind)
            yield TargetPlan(requested, target, rows, already, in_progress, revision)


#: a planned target as :class:`Plan` keeps it: (requested id, kind, resolved id, rows,
#: already sent, in progress, sent revision), the fields of :class:`TargetPlan`
_Entry = tuple[str, str, str, tuple[tuple[int, int, str, int], ...], int, int, str | None]


@dataclass(frozen=True)
class PartRecord:
    """A ledger row as status queries return it."""

    id: int
    issue_date: dt.date
    revision: str
    platform: str
    generation: int
    target: str
    kind: TargetKind
    part: int
    state: PartState
    message_id: str | None
    attempts: int
    last_error: str | None
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True)
class DeliveryRecord:
    id: int
    issue_date: dt.date
    revision: str
    platform: str
    generation: int
    forced: bool
    parts: int
    created_at: dt.datetime


@dataclass(frozen=True)
class InactiveTarget:
    """A target deactivated because it went away (blocked, kicked, deleted, forbidden)."""

    target: Target
    #: when it was deactivated
    since: dt.datetime
    reason: str | None

    @property
    def id(self) -> str:
        return self.target.id


@dataclass(frozen=True)
class Lease:
    """A lease as it stands: held by ``owner`` until ``expires_at`` (aware UTC)."""

    name: str
    owner: str
    expires_at: dt.datetime


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: dt.datetime
    platform: str
    user_id: str
    action: str
    args: dict[str, Any]
    allowed: bool
    outcome: str


@dataclass
class LedgerStats:
    """Counters for benchmarks and status: how much the ledger wrote."""

    transactions: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0

    @property
    def rows_written(self) -> int:
        return self.rows_inserted + self.rows_updated


def _state_update(*where: Any, **values: Any) -> Any:
    return (
        update(parts)
        .where(parts.c.id == bindparam("b_id"), *where)
        .values(updated_at=bindparam("b_now"), **values)
    )


#: the states a row may be claimed from (a row left in flight by a dead run: see ``claim``)
_CLAIMABLE = (PartState.PENDING.value, PartState.FAILED.value, PartState.UNKNOWN.value)

# The per-part state changes the delivery engine makes, batched by the group-commit writer
# (claims are conditional and run apart: see ``Ledger._claim_batch``).
_STATE_STATEMENTS: dict[str, Any] = {
    # a sent row stays sent whatever else happens: the message is out
    "sent": _state_update(
        state=PartState.SENT.value, message_id=bindparam("b_message_id"), last_error=None
    ),
    "release": _state_update(
        parts.c.state == PartState.IN_FLIGHT.value,
        state=PartState.PENDING.value,
        last_error=bindparam("b_error"),
    ),
    # the send was cut after the request may have left: not "not sent"
    "unknown": _state_update(
        parts.c.state == PartState.IN_FLIGHT.value,
        state=PartState.UNKNOWN.value,
        last_error=bindparam("b_error"),
    ),
    "failed": _state_update(
        parts.c.state != PartState.SENT.value,
        state=PartState.FAILED.value,
        last_error=bindparam("b_error"),
    ),
    # a later part not attempted: only if no one holds or sent it
    "skip": _state_update(
        # no IN (...) here: an expanding parameter cannot go into executemany()
        (parts.c.state == PartState.PENDING.value) | (parts.c.state == PartState.FAILED.value),
        state=PartState.FAILED.value,
        last_error=bindparam("b_error"),
    ),
}


@dataclass(frozen=True)
class _Found:
    """A row found while planning."""

    id: int
    state: PartState
    #: the target id it is recorded under (an earlier id if the target moved since)
    target: str

    def rank(self, final: str) -> int:
        """Which of two rows for one (target, part) counts: a sent one, else the current id's."""
        return 2 if self.state is PartState.SENT else int(self.target == final)


@dataclass(frozen=True, slots=True)
class _Batch:
    """What every batch of one :meth:`Ledger.plan` shares."""

    ref: IssueRef
    n_parts: int
    delivery_id: int
    #: the day's deliveries on the platform -> their revision (empty with ``force``)
    revisions: dict[int, str]
    #: another owner holds the platform's live delivery lease
    foreign: bool
    now: dt.datetime


class _Moves:
    """A platform's recorded target moves and deactivations, to resolve requested targets."""

    def __init__(self, platform: str, rows: Iterable[Row[Any]]) -> None:
        self.platform = platform
        #: target id -> (active, moved_to) of the targets deactivated or moved
        self.known: dict[str, tuple[bool, str | None]] = {
            row.target_id: (row.active, row.moved_to) for row in rows
        }
        #: resolved target ids seen so far (a duplicate is planned once)
        self.seen: set[str] = set()
        #: resolved target id -> the earlier ids that lead to it
        self.earlier: dict[str, list[str]] = {}
        for moved_id, (_, moved_to) in self.known.items():
            if moved_to:
                self.earlier.setdefault(self.follow(moved_id), []).append(moved_id)

    def follow(self, target_id: str) -> str:
        hops = 0
        while (info := self.known.get(target_id)) is not None and info[1] and hops < 10:
            target_id = str(info[1])
            hops += 1
        return target_id

    def resolve(
        self, requested: Sequence[Target], inactive: list[Target]
    ) -> list[tuple[Target, Target]]:
        """(requested, resolved) pairs of targets not seen before; inactive requested targets
        are appended to ``inactive``."""
        pairs: list[tuple[Target, Target]] = []
        for req in requested:
            final = self.follow(req.id) if self.known else req.id
            current = req if final == req.id else Target(self.platform, final, req.kind)
            info = self.known.get(final)
            if info is not None and not info[0] and not info[1]:
                inactive.append(req)
            elif final not in self.seen:
                self.seen.add(final)
                pairs.append((req, current))
        return pairs

    def ids_of(self, final: str) -> list[str]:
        """Every id rows of the resolved target ``final`` may be recorded under."""
        return [final, *self.earlier.get(final, ())]


# Claims are built once: they run many times a second, and building a statement costs more
# than running it.
_CLAIM_VALUES: dict[str, Any] = {
    "state": PartState.IN_FLIGHT.value,
    "attempts": parts.c.attempts + 1,
}
#: the claims of a batch in one statement: the ids it returns are the rows claimed
_CLAIM_RETURNING = (
    update(parts)
    .where(parts.c.id.in_(bindparam("b_ids", expanding=True)), parts.c.state.in_(_CLAIMABLE))
    .values(updated_at=bindparam("b_now"), **_CLAIM_VALUES)
    .returning(parts.c.id)
)
#: one claim, for databases without UPDATE … RETURNING
_CLAIM_ONE = _state_update(parts.c.state.in_(_CLAIMABLE), **_CLAIM_VALUES)
#: resuming a row a dead run left in flight, if no one resumed it since
_CLAIM_RESUMED = _state_update(
    parts.c.state == PartState.IN_FLIGHT.value,
    parts.c.attempts == bindparam("b_attempts"),
    **_CLAIM_VALUES,
)


@dataclass(eq=False)
class _Op:
    kind: str
    params: dict[str, Any]
    done: asyncio.Future[bool]


def _new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _owner_dead(owner: str) -> bool:
    """True if ``owner`` (``host:pid:token``) is a process on this host that no longer exists.

    Only a certain death counts: another host, an unreadable owner, or a live pid (even a
    reused one) keep the lease until it expires.
    """
    try:
        host, pid_text, _ = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if sys.platform == "win32" or host != socket.gethostname() or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: alive, someone else's
        return False
    return False


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _retried(
    method: Callable[Concatenate[Ledger, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[Ledger, _P], Coroutine[Any, Any, _R]]:
    """Make a one-transaction method of the delivery path wait out database trouble
    (:meth:`Ledger._retrying`) instead of failing the delivery."""

    @functools.wraps(method)
    async def wrapper(self: Ledger, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await self._retrying(lambda: method(self, *args, **kwargs))

    return wrapper


class Ledger:
    """The delivery ledger, subscribers and audit log in one SQL database.

    Open it with ``async with Ledger.open(url, clock=...) as ledger``; the schema is created (or
    migrated) on open. Per-part state changes (:meth:`claim`, :meth:`mark_sent`, …) go through a
    group-commit writer: each call returns once its change is committed, and changes that arrive
    while a transaction runs share the next one, so many concurrent sends cost few transactions.

    Several deliveries may share a database, in one process or many: :meth:`claim` is
    conditional, so a part is sent by one of them only, and :class:`DeliveryEngine` holds a
    lease per platform (:meth:`acquire_lease`) so a second process is refused while the first
    delivers. Each instance is one lease :attr:`owner`; rows it has in flight are live, and rows
    in flight that no live delivery owns are taken for a crashed run's and sent again.
    """

    def __init__(self, engine: AsyncEngine, *, clock: Clock, owner: str | None = None) -> None:
        self._engine = engine
        self._clock = clock
        #: this instance's lease owner id, ``host:pid:token``
        self.owner = owner or _new_owner()
        self._lock = asyncio.Lock()
        self._queue: list[_Op] = []
        self._kick = asyncio.Event()
        self._closing = False
        self._active = 0
        self._writer: asyncio.Task[None] | None = None
        #: rows this instance claimed and has not settled: in flight in a live delivery
        self._live: set[int] = set()
        #: lease name -> how many holds this instance has on it (leases are reentrant)
        self._holds: dict[str, int] = {}
        self.stats = LedgerStats()
        #: whether the database answers (kept by the retries of the delivery path)
        self.health = LedgerHealth(clock)
        self.retry_policy = RetryPolicy()
        #: the SQLite file and its (st_dev, st_ino) when opened (the watchdog compares them)
        self.path: Path | None = None
        self.file_id: tuple[int, int] | None = None
        #: the id stored in the database (and in its marker file)
        self.ledger_id: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str = DEFAULT_LEDGER_URL,
        *,
        clock: Clock | None = None,
        echo: bool = False,
        owner: str | None = None,
        new_ledger: bool = False,
    ) -> AsyncIterator[Ledger]:
        """Open (creating or migrating) the ledger at ``url``, any SQLAlchemy async URL.

        SQLite files get WAL, ``synchronous=NORMAL`` (a commit survives a killed process, not a
        power cut) and a busy timeout; their folder is created. ``owner`` names this instance
        in leases (default ``host:pid:token``, which lets a dead holder on this host be
        recognised); leases it still holds are released on close.

        An SQLite file gets a marker beside it (``<file>.marker``) holding the id stored in the
        database; while the marker exists, a missing, new or different database is refused
        unless ``new_ledger`` accepts it (and the marker is rewritten). A database that
        cannot be used is one :class:`LedgerError` line naming the file and the fix.

        Raises:
            ConfigError: the URL is malformed, names an unknown database, a synchronous or
                missing driver, or the database's schema is newer than this code
                (key ``database_url``; the password is never shown).
            LedgerError: the database is corrupt, truncated, unwritable, locked, cannot be
                reached, or is not the one the marker records.
        """
        engine = _create_engine(url, echo=echo)
        ledger = cls(engine, clock=clock or SystemClock(), owner=owner)
        try:
            await ledger._start(url, new_ledger=new_ledger)
            ledger._writer = asyncio.create_task(ledger._write_loop(), name="ledger-writer")
            yield ledger
        finally:
            await ledger._close()
            await engine.dispose()
            lost_file = ledger.path if ledger.health.lost is not None else None
            if lost_file is not None and not lost_file.exists():
                # its -wal is ours and dead: left there, it would be replayed into a backup
                # copied to the path
                _set_aside_orphans(lost_file, ledger._clock.now())

    async def _start(self, url: str, *, new_ledger: bool) -> None:
        """Check the identity, migrate, check the file: everything :meth:`open` does first."""
        parsed = make_url(url)
        shown = parsed.render_as_string(hide_password=True)
        database = _sqlite_file(url)
        marker = marker_for(database) if database is not None else None
        expected = read_marker(marker) if marker is not None else None
        exists = database is None or database.exists()
        if database is not None:
            shown = str(database)
        if marker is not None and not exists:
            # before connecting: a connection would create the missing file
            check_identity(
                shown=shown,
                marker=marker,
                expected=expected,
                found=None,
                exists=False,
                new_ledger=new_ledger,
            )
        if database is not None and not exists:
            _set_aside_orphans(database, self._clock.now())
        if database is not None and (unwritable := _unwritable(database)):
            # found now, not as a post that waits for ever for a read-only file to answer
            raise _open_error(None, shown, database, reason=unwritable)
        try:
            if database is not None and exists and (damage := await self._check_file()):
                raise _open_error(None, shown, database, reason=f"damaged: {damage}")
            found = await self._read_identity()
            adopted = None
            if found is None and expected is not None and await self._has_schema():
                # a ledger from before ledger ids (a backup older than them): a real one
                adopted = expected
            if marker is not None:
                check_identity(
                    shown=shown,
                    marker=marker,
                    expected=expected,
                    found=found or adopted,
                    exists=exists,
                    new_ledger=new_ledger,
                )
            await self._migrate()
            self.ledger_id = found or await self._create_identity(adopted)
        except (LedgerError, ConfigError):
            raise
        except (DBAPIError, OSError) as exc:
            raise _open_error(exc, shown, database) from exc
        if marker is not None and expected != self.ledger_id:
            if expected is not None:
                log.warning("%s: accepting ledger %s (%s)", marker, self.ledger_id, NEW_LEDGER_FLAG)
            write_marker(marker, self.ledger_id)
        if database is not None:
            st = database.stat()
            self.path, self.file_id = database, (st.st_dev, st.st_ino)
            self.health.file = database.with_name(database.name + ".health")

    async def _check_file(self) -> str | None:
        """SQLite's quick check, so a truncated or damaged file is refused at start rather
        than found broken in the middle of a post; returns what is wrong, or None."""
        async with self._tx() as conn:
            found = (await conn.exec_driver_sql("PRAGMA quick_check(1)")).scalar()
        return None if found == "ok" else str(found)

    async def _read_identity(self) -> str | None:
        async with self._tx() as conn:
            if not await conn.run_sync(lambda c: inspect(c).has_table(ledger_identity.name)):
                return None
            found = (await conn.execute(select(ledger_identity.c.id))).scalar()
        return None if found is None else str(found)

    async def _has_schema(self) -> bool:
        async with self._tx() as conn:
            return bool(await conn.run_sync(lambda c: inspect(c).has_table(schema_version.name)))

    async def _create_identity(self, ledger_id: str | None = None) -> str:
        try:
            async with self._tx() as conn:
                ledger_id = ledger_id or new_ledger_id()
                await conn.execute(
                    insert(ledger_identity).values(
                        key=1, id=ledger_id, created_at=self._clock.now()
                    )
                )
                return ledger_id
        except IntegrityError:  # another process created it first
            found = await self._read_identity()
            assert found is not None
            return found

    async def read_identity(self) -> str | None:
        """The ledger id stored in the database now (the watchdog compares it with
        :attr:`ledger_id` where there is no file to watch)."""
        return await self._read_identity()

    def lose(self, error: LedgerLost) -> None:
        """The database was deleted or replaced: fail every waiting and future state change
        and ledger retry with ``error``, so nothing more is sent (a claim comes first)."""
        self.health.lose(error)
        queued, self._queue = self._queue, []
        for op in queued:
            if not op.done.done():
                op.done.set_exception(error)
        self._kick.set()

    async def _retrying(self, call: Callable[[], Awaitable[_R]]) -> _R:
        """Run the one-transaction ``call`` until the database answers (see
        :func:`digest_core.delivery.health.retrying`); give up once closing."""
        return await retrying(
            call,
            health=self.health,
            clock=self._clock,
            policy=self.retry_policy,
            give_up=lambda: self._closing,
        )

    async def _close(self) -> None:
        self._closing = True
        self._kick.set()
        if self._writer is not None:
            await self._writer
        if self._holds and self.health.lost is not None:
            self._holds.clear()  # the database is not ours any more: touch nothing
        if self._holds:
            self._holds.clear()
            try:
                async with self._tx() as conn:
                    await conn.execute(delete(leases).where(leases.c.owner == self.owner))
            except Exception:  # they expire anyway
                log.exception("could not release the leases of %s", self.owner)

    async def _migrate(self) -> None:
        async with self._tx() as conn:
            await conn.run_sync(metadata.create_all)
            found = (await conn.execute(select(func.max(schema_version.c.version)))).scalar()
            if found is None:
                await conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
                return
            if found > SCHEMA_VERSION:
                raise ConfigError(
                    f"ledger schema version {found} is newer than this code ({SCHEMA_VERSION})",
                    key=CONFIG_KEY,
                )
            if found == SCHEMA_VERSION:
                return  # no write: `digest-bot status` opens it while the bot holds the lock
            for version in range(found, SCHEMA_VERSION):
                log.info("migrating ledger schema from version %d", version)
                for statement in _MIGRATIONS[version]:
                    await conn.exec_driver_sql(statement)
            await conn.execute(update(schema_version).values(version=SCHEMA_VERSION))

    @property
    def busy(self) -> bool:
        """True while a transaction runs or state changes wait for one (tests use it to settle)."""
        return self._active > 0 or bool(self._queue)

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncConnection]:
        # One transaction at a time per process: SQLite serialises writers anyway, and the lock
        # lets an in-memory database share its single connection.
        self._active += 1
        try:
            async with self._lock, self._engine.begin() as conn:
                yield conn
            self.stats.transactions += 1
        finally:
            self._active -= 1

    # -- planning ----------------------------------------------------------------------------

    @_retried  # its first transaction; each batch retries on its own
    async def plan(
        self,
        ref: IssueRef,
        platform: str,
        requested: Sequence[Target],
        n_parts: int,
        *,
        force: bool = False,
    ) -> Plan:
        """Record a delivery of ``n_parts`` parts of ``ref`` to ``requested`` and say what to send.

        Without ``force``, the latest generation is completed: its rows that are pending, were
        in flight when a run died, failed or went gone are planned again; a (target, part) it
        lacks is inserted as pending unless an older generation sent it. A target that already
        got any part of this day's issue under another revision (a corrected file) gets nothing
        of this one (:attr:`TargetPlan.sent_revision`). With ``force``, a new generation is
        created and every part is planned again; older rows stay as history.

        Targets are resolved through recorded moves, and rows recorded under any id of a
        target's move chain count as its own; deactivated targets are left out and listed in
        :attr:`Plan.inactive`. Duplicates (after resolving) are planned once.

        A row in flight is planned again only if no live delivery owns it: not one of this
        instance's, and no other owner holds the platform's live delivery lease. A target with
        a row in flight in a live delivery is left out (:attr:`TargetPlan.in_progress`), so its
        parts keep their order.

        Targets are planned in batches of :data:`_PLAN_BATCH`, each in its own transaction, so
        a large fan-out neither blocks the event loop nor holds the day's rows in memory; a
        batch whose parts were all sent costs one aggregate query.

        Raises:
            ValueError: ``n_parts`` is less than 1, or a target is on another platform.
        """
        if n_parts < 1:
            raise ValueError("a delivery needs at least one part")
        for req in requested:
            if req.platform != platform:
                raise ValueError(f"target {req} is not on platform {platform!r}")
        now = self._clock.now()
        async with self._tx() as conn:
            moves = _Moves(
                platform,
                await conn.execute(
                    select(targets.c.target_id, targets.c.active, targets.c.moved_to).where(
                        targets.c.platform == platform,
                        (targets.c.active.is_(False)) | (targets.c.moved_to.is_not(None)),
                    )
                ),
            )
            delivery_id, generation = await self._delivery_for(
                conn, ref, platform, n_parts, force=force, now=now
            )
            foreign = await self._foreign_holder(conn, delivery_lease(platform))
            # the day's deliveries on the platform -> their revision (none read with force)
            revisions: dict[int, str] = {}
            if not force:
                revisions = {
                    d_id: revision
                    for d_id, revision in await conn.execute(
                        select(deliveries.c.id, deliveries.c.revision).where(
                            deliveries.c.issue_date == ref.date,
                            deliveries.c.platform == platform,
                        )
                    )
                }
        batch = _Batch(ref, n_parts, delivery_id, revisions, foreign is not None, now)
        entries: list[_Entry] = []
        inactive: list[Target] = []
        superseded = live = 0
        for start in range(0, len(requested), _PLAN_BATCH):
            pairs = moves.resolve(requested[start : start + _PLAN_BATCH], inactive)
            if pairs:
                # each batch waits out database trouble itself: retrying the whole plan
                # would start a second generation after a forced one was recorded
                found = await self._retrying(
                    functools.partial(self._plan_batch_tx, batch, pairs, moves)
                )
                entries += found
                superseded += sum(1 for e in found if e[6] is not None)
                live += sum(1 for e in found if e[5])
            await asyncio.sleep(0)  # let the loop breathe between batches
        if inactive:
            log.info("%s: skipping %d deactivated targets", platform, len(inactive))
        if superseded:
            log.info(
                "%s %s rev %s: %d targets already got another revision of the day",
                platform,
                ref.date,
                ref.revision,
                superseded,
            )
        if live:
            log.info("%s: %d targets are being delivered by another run", platform, live)
        return Plan(
            delivery_id, generation, ref, platform, n_parts, tuple(entries), tuple(inactive)
        )

    async def _plan_batch_tx(
        self, batch: _Batch, pairs: list[tuple[Target, Target]], moves: _Moves
    ) -> list[_Entry]:
        async with self._tx() as conn:
            return await self._plan_batch(conn, batch, pairs, moves)

    async def _plan_batch(
        self,
        conn: AsyncConnection,
        batch: _Batch,
        pairs: list[tuple[Target, Target]],
        moves: _Moves,
    ) -> list[_Entry]:
        """Plan one batch of (requested, resolved) targets (see :meth:`plan`)."""
        delivery_id, n_parts, now = batch.delivery_id, batch.n_parts, batch.now
        finals = [t.id for _, t in pairs]
        if batch.revisions:
            # the common re-post: every part of every target of the batch is already sent
            # (no state in the WHERE: SQLite would pick ix_parts_state over the unique index)
            sent = and_(parts.c.state == PartState.SENT.value, parts.c.part < n_parts)
            n_sent = (
                await conn.execute(
                    select(func.coalesce(func.sum(case((sent, 1), else_=0)), 0)).where(
                        parts.c.delivery_id == delivery_id, parts.c.target.in_(finals)
                    )
                )
            ).scalar_one()
            if n_sent == len(finals) * n_parts:
                return [(req.id, req.kind.value, t.id, (), n_parts, 0, None) for req, t in pairs]
        # (resolved target id, part) -> the row of the latest generation to complete
        current: dict[tuple[str, int], _Found] = {}
        # parts an older generation of this revision sent
        sent_before: set[tuple[str, int]] = set()
        # resolved target id -> other revision of the day -> parts sent under it
        other_revisions: dict[str, dict[str, set[int]]] = {}
        if batch.revisions:
            alias = {a: f for f in finals for a in moves.ids_of(f)}
            rows = await conn.execute(
                select(parts.c.id, parts.c.delivery_id, parts.c.target, parts.c.part, parts.c.state)
                .where(parts.c.delivery_id.in_(list(batch.revisions)))
                .where(parts.c.target.in_(list(alias)))
            )
            for row_id, d_id, stored, part, state in rows:
                final = alias[stored]
                if d_id == delivery_id:
                    row = _Found(row_id, PartState(state), stored)
                    key = (final, part)
                    if key not in current or row.rank(final) > current[key].rank(final):
                        current[key] = row
                elif state == PartState.SENT:
                    revision = batch.revisions[d_id]
                    if revision == batch.ref.revision:
                        sent_before.add((final, part))
                    else:
                        other_revisions.setdefault(final, {}).setdefault(revision, set())
                        other_revisions[final][revision].add(part)
        inserts: list[dict[str, Any]] = []
        resets: list[int] = []
        retarget: dict[str, list[int]] = {}
        already: dict[str, int] = {}
        superseded: dict[str, str] = {}
        live: set[str] = set()
        for _, target in pairs:
            keys = [(target.id, part) for part in range(n_parts)]
            if target.id in other_revisions and not any(
                k in current or k in sent_before for k in keys
            ):
                # the day's issue reached it under another revision: a correction is not
                # sent again without force
                revision, got = max(
                    other_revisions[target.id].items(), key=lambda kv: (len(kv[1]), kv[0])
                )
                superseded[target.id] = revision
                already[target.id] = len(got)
                continue
            for key in keys:
                found = current.get(key)
                if (found is None and key in sent_before) or (
                    found is not None and found.state is PartState.SENT
                ):
                    already[target.id] = already.get(target.id, 0) + 1
                elif found is None:
                    inserts.append(
                        {
                            "delivery_id": delivery_id,
                            "target": target.id,
                            "kind": target.kind.value,
                            "part": key[1],
                            "state": PartState.PENDING.value,
                            "attempts": 0,
                            "created_at": now,
                            "updated_at": now,
                        }
                    )
                else:
                    if found.target != target.id:  # recorded under an earlier id
                        retarget.setdefault(target.id, []).append(found.id)
                    if found.state in (PartState.FAILED, PartState.GONE):
                        resets.append(found.id)
                    elif found.state is PartState.IN_FLIGHT and (
                        found.id in self._live or batch.foreign
                    ):
                        live.add(target.id)
        if inserts:
            await conn.execute(insert(parts), inserts)
            self.stats.rows_inserted += len(inserts)
        for new_id, ids in retarget.items():
            for chunk in _chunks(ids):
                await conn.execute(update(parts).where(parts.c.id.in_(chunk)).values(target=new_id))
                self.stats.rows_updated += len(chunk)
        for chunk in _chunks(resets):
            await conn.execute(
                update(parts)
                .where(parts.c.id.in_(chunk))
                .values(state=PartState.PENDING.value, updated_at=now)
            )
            self.stats.rows_updated += len(chunk)
        todo: dict[str, list[tuple[int, int, str, int]]] = {}
        in_progress: dict[str, int] = {}
        unsent = await conn.execute(
            select(parts.c.id, parts.c.target, parts.c.part, parts.c.state, parts.c.attempts)
            .where(
                parts.c.delivery_id == delivery_id,
                parts.c.state != PartState.SENT.value,
                parts.c.target.in_(finals),
            )
            .order_by(parts.c.target, parts.c.part)
        )
        for row_id, target_id, part, state, attempts in unsent:
            if target_id in live:
                in_progress[target_id] = in_progress.get(target_id, 0) + 1
            else:
                todo.setdefault(target_id, []).append((row_id, part, state, attempts))
        return [
            (
                req.id,
                req.kind.value,
                t.id,
                tuple(todo.get(t.id, ())),
                already.get(t.id, 0),
                in_progress.get(t.id, 0),
                superseded.get(t.id),
            )
            for req, t in pairs
        ]

    async def _foreign_holder(self, conn: AsyncConnection, name: str) -> Lease | None:
        """The lease ``name`` if another owner holds it and it is live (unexpired by the
        database's clock, holder not known dead)."""
        row = (
            await conn.execute(
                select(
                    leases.c.owner,
                    leases.c.expires_at,
                    (leases.c.expires_at > db_time()).label("live"),
                ).where(leases.c.name == name)
            )
        ).first()
        if row is None or row.owner == self.owner or not row.live:
            return None
        if _owner_dead(row.owner):
            return None
        return Lease(name, row.owner, row.expires_at)

    async def _delivery_for(
        self,
        conn: AsyncConnection,
        ref: IssueRef,
        platform: str,
        n_parts: int,
        *,
        force: bool,
        now: dt.datetime,
    ) -> tuple[int, int]:
        latest = (
            await conn.execute(
                select(deliveries.c.id, deliveries.c.generation)
                .where(_issue_filter(ref, platform))
                .order_by(deliveries.c.generation.desc())
                .limit(1)
            )
        ).first()
        if latest is not None and not force:
            return int(latest.id), int(latest.generation)
        generation = 1 if latest is None else int(latest.generation) + 1
        result = await conn.execute(
            insert(deliveries).values(
                issue_date=ref.date,
                revision=ref.revision,
                platform=platform,
                generation=generation,
                forced=force,
                parts=n_parts,
                created_at=now,
            )
        )
        self.stats.rows_inserted += 1
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0]), generation

    # -- per-part state changes (group commit) ------------------------------------------------

    async def claim(self, row_id: int, *, resumed_attempts: int | None = None) -> bool:
        """Mark a row in flight (and count the attempt) if no one else has it; returns once
        committed, True if this call claimed it.

        A pending or failed row is claimed. A row a dead run left in flight (planned with state
        ``IN_FLIGHT``) is claimed only with ``resumed_attempts`` equal to the attempts it was
        planned with, so of two deliveries resuming it, one does. False means another delivery
        has the row (or sent it): the caller MUST NOT send it. The caller MUST await this before
        sending, so a crash can only repeat in-flight rows.
        """
        params: dict[str, Any] = {"b_id": row_id}
        if resumed_attempts is not None:
            params["b_attempts"] = resumed_attempts
        return await self._submit("claim", params)

    async def mark_sent(self, row_id: int, message_id: str) -> None:
        """Record a successful send and the platform's message id."""
        await self._submit("sent", {"b_id": row_id, "b_message_id": message_id})

    async def release(self, row_id: int, error: str) -> None:
        """Put an in-flight row back to pending after an attempt failed and will be retried.

        Only for a send known not to have reached the platform; MUST NOT be used when it may
        have (use :meth:`mark_unknown`)."""
        await self._submit("release", {"b_id": row_id, "b_error": error})

    async def mark_unknown(self, row_id: int, error: str) -> None:
        """Record that an in-flight row's send was cut after the request may have left: the
        row is ``UNKNOWN`` (a possible duplicate, counted with the rows in flight) and is
        claimed again like a pending one, so it is sent at least once."""
        await self._submit("unknown", {"b_id": row_id, "b_error": error})

    async def mark_failed(self, row_id: int, error: str) -> None:
        """Give up on a claimed row (retries exhausted, rejected payload); a sent row stays."""
        await self._submit("failed", {"b_id": row_id, "b_error": error})

    async def skip(self, row_id: int, error: str) -> None:
        """Mark an unclaimed row failed (not attempted after an earlier part failed), unless
        it is in flight or sent meanwhile."""
        await self._submit("skip", {"b_id": row_id, "b_error": error})

    def abandon(self, row_id: int) -> None:
        """Forget that this instance has a row in flight (its delivery was cancelled): the
        next plan takes it for a crashed run's and sends it again."""
        self._live.discard(row_id)

    async def _submit(self, kind: str, params: dict[str, Any]) -> bool:
        if self.health.lost is not None:
            raise self.health.lost
        if self._writer is None or self._closing:
            raise RuntimeError("the ledger is not open")
        params["b_now"] = self._clock.now()
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.append(_Op(kind, params, done))
        self._kick.set()
        return await done

    async def _write_loop(self) -> None:
        while True:
            await self._kick.wait()
            self._kick.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            batch, self._queue = self._queue, []
            claims: list[_Op] = []
            grouped: dict[str, list[dict[str, Any]]] = {}
            for op in batch:
                if op.kind == "claim":
                    claims.append(op)
                else:
                    grouped.setdefault(op.kind, []).append(op.params)
            try:
                # a database that does not answer (locked, full, gone away) is waited out:
                # the senders wait for their claims, and nothing recorded is lost
                won = await self._retrying(functools.partial(self._write_batch, claims, grouped))
            except Exception as exc:
                if not isinstance(exc, LedgerLost):
                    log.exception("ledger write of %d changes failed", len(batch))
                for op in batch:
                    if not op.done.done():
                        op.done.set_exception(exc)
                continue
            self.stats.rows_updated += len(batch) - len(claims) + len(won)
            for op in batch:
                row_id = op.params["b_id"]
                ok = op.kind != "claim" or op in won
                if op.kind == "claim":
                    # a claim whose caller was cancelled is in flight with no one to send it:
                    # left for the next plan, like a crashed run's
                    if ok and not op.done.cancelled():
                        self._live.add(row_id)
                else:
                    self._live.discard(row_id)
                if not op.done.done():
                    op.done.set_result(ok)

    async def _write_batch(
        self, claims: list[_Op], grouped: dict[str, list[dict[str, Any]]]
    ) -> set[_Op]:
        """One transaction of the writer; returns the claims that won their row."""
        async with self._tx() as conn:
            won = set(await self._claim_batch(conn, claims))
            for kind, params in grouped.items():
                await conn.execute(_STATE_STATEMENTS[kind], params)
        return won

    async def _claim_batch(self, conn: AsyncConnection, claims: list[_Op]) -> list[_Op]:
        """Run the claims of one batch; returns those that won their row (one per row)."""
        if not claims:
            return []
        now = max(op.params["b_now"] for op in claims)
        won: list[_Op] = []
        seen: set[int] = set()
        plain: dict[int, _Op] = {}
        for op in claims:
            row_id = op.params["b_id"]
            if row_id in seen:
                continue  # a second claim of a row in one batch: the first one decides
            seen.add(row_id)
            if "b_attempts" in op.params:  # resuming a dead run's row: rare, one by one
                if (await conn.execute(_CLAIM_RESUMED, op.params)).rowcount:
                    won.append(op)
            else:
                plain[row_id] = op
        if not plain:
            return won
        if conn.dialect.update_returning:
            for chunk in _chunks(list(plain)):
                result = await conn.execute(_CLAIM_RETURNING, {"b_ids": chunk, "b_now": now})
                won += [plain[row_id] for (row_id,) in result]
        else:
            for row_id, op in plain.items():
                result = await conn.execute(_CLAIM_ONE, {"b_id": row_id, "b_now": now})
                if result.rowcount:
                    won.append(op)
        return won

    # -- targets that went away or moved --------------------------------------------------------

    @_retried
    async def mark_gone(self, target: Target, *, row_ids: Iterable[int] = (), reason: str) -> None:
        """Deactivate ``target`` (and unsubscribe it) and mark ``row_ids`` gone.

        Future :meth:`plan` calls skip the target until :meth:`reactivate` or :meth:`subscribe`.
        """
        now = self._clock.now()
        async with self._tx() as conn:
            await self._mark_rows(conn, row_ids, PartState.GONE, reason, now)
            await _upsert_target(conn, target, active=False, moved_to=None, reason=reason, now=now)
            result = await conn.execute(
                update(subscribers)
                .where(
                    subscribers.c.platform == target.platform,
                    subscribers.c.chat_id == target.id,
                    subscribers.c.active.is_(True),
                )
                .values(active=False, until=now)
            )
            self.stats.rows_updated += result.rowcount
        log.info("%s deactivated: %s", target, reason)

    @_retried
    async def move_target(
        self, old: Target, new: Target, *, row_ids: Iterable[int] = (), reason: str = ""
    ) -> list[int]:
        """Record that ``old`` is now ``new``: rewrite ``row_ids`` and the subscriber to ``new``.

        Returns the row ids now addressed to ``new``; a row whose part ``new`` already has in
        the same delivery is marked gone instead (it would be a duplicate).
        """
        now = self._clock.now()
        moved: list[int] = []
        async with self._tx() as conn:
            await _upsert_target(
                conn,
                old,
                active=False,
                moved_to=new.id,
                reason=reason or f"moved to {new.id}",
                now=now,
            )
            await _upsert_target(conn, new, active=True, moved_to=None, reason=None, now=now)
            ids = list(row_ids)
            taken: set[tuple[int, int]] = set()
            if ids:
                rows = (
                    await conn.execute(
                        select(parts.c.id, parts.c.delivery_id, parts.c.part).where(
                            parts.c.id.in_(ids)
                        )
                    )
                ).all()
                d_ids = {r.delivery_id for r in rows}
                taken = {
                    (r.delivery_id, r.part)
                    for r in await conn.execute(
                        select(parts.c.delivery_id, parts.c.part).where(
                            parts.c.target == new.id, parts.c.delivery_id.in_(d_ids)
                        )
                    )
                }
                self._live.difference_update(ids)
                clash = [r.id for r in rows if (r.delivery_id, r.part) in taken]
                moved = [r.id for r in rows if (r.delivery_id, r.part) not in taken]
                for chunk in _chunks(moved):
                    await conn.execute(
                        update(parts)
                        .where(parts.c.id.in_(chunk))
                        .values(target=new.id, updated_at=now)
                    )
                await self._mark_rows(conn, clash, PartState.GONE, f"moved to {new.id}", now)
                self.stats.rows_updated += len(moved)
            old_sub = (
                await conn.execute(
                    select(subscribers.c.active).where(
                        subscribers.c.platform == old.platform, subscribers.c.chat_id == old.id
                    )
                )
            ).first()
            if old_sub is not None and old_sub.active:
                await conn.execute(
                    update(subscribers)
                    .where(subscribers.c.platform == old.platform, subscribers.c.chat_id == old.id)
                    .values(active=False, until=now)
                )
                await _subscribe(conn, new.platform, new.id, now)
        log.info("%s moved to %s", old, new.id)
        return moved

    async def reactivate(self, target: Target) -> bool:
        """Let :meth:`plan` send to a deactivated (gone or moved) target again: an admin action
        after the bot got its rights back. A subscription that ended when the target was marked
        gone is restored. Returns False if the target was not deactivated.
        """
        now = self._clock.now()
        async with self._tx() as conn:
            found = (
                await conn.execute(
                    select(targets.c.active, targets.c.updated_at).where(
                        targets.c.platform == target.platform, targets.c.target_id == target.id
                    )
                )
            ).first()
            if found is None or found.active:
                return False
            await _upsert_target(conn, target, active=True, moved_to=None, reason=None, now=now)
            # mark_gone ends the subscription at the very time it deactivates the target
            await conn.execute(
                update(subscribers)
                .where(
                    subscribers.c.platform == target.platform,
                    subscribers.c.chat_id == target.id,
                    subscribers.c.active.is_(False),
                    subscribers.c.until == found.updated_at,
                )
                .values(active=True, until=None)
            )
        log.info("%s reactivated", target)
        return True

    async def inactive_targets(self, platform: str) -> list[InactiveTarget]:
        """Targets of ``platform`` deactivated as gone (moved ones aside), latest first."""
        async with self._tx() as conn:
            rows = await conn.execute(
                select(targets.c.target_id, targets.c.kind, targets.c.updated_at, targets.c.reason)
                .where(
                    targets.c.platform == platform,
                    targets.c.active.is_(False),
                    targets.c.moved_to.is_(None),
                )
                .order_by(targets.c.updated_at.desc(), targets.c.target_id)
            )
            return [
                InactiveTarget(
                    Target(platform, r.target_id, TargetKind(r.kind)), r.updated_at, r.reason
                )
                for r in rows
            ]

    async def _mark_rows(
        self,
        conn: AsyncConnection,
        row_ids: Iterable[int],
        state: PartState,
        error: str,
        now: dt.datetime,
    ) -> None:
        ids = list(row_ids)
        self._live.difference_update(ids)
        for chunk in _chunks(ids):
            result = await conn.execute(
                update(parts)
                .where(parts.c.id.in_(chunk), parts.c.state != PartState.SENT.value)
                .values(state=state.value, last_error=error, updated_at=now)
            )
            self.stats.rows_updated += result.rowcount

    # -- leases -------------------------------------------------------------------------------

    @_retried
    async def acquire_lease(self, name: str, *, ttl: float = DEFAULT_LEASE_TTL) -> Lease:
        """Take the lease ``name`` for ``ttl`` seconds, unless another owner holds it.

        Returns the lease as it stands: this instance holds it iff ``lease.owner ==
        self.owner``. It is free when no one holds it, it expired, or its holder is a process
        of this host that no longer exists (a crashed run: taken over at once). Leases are
        reentrant: each acquisition by the holder extends it and MUST be matched by one
        :meth:`release_lease`. The holder SHOULD :meth:`renew_lease` well within ``ttl``.
        """
        if ttl <= 0:
            raise ValueError("a lease needs a positive ttl")
        for attempt in range(3):
            try:
                lease = await self._try_acquire(name, ttl)
            except IntegrityError:  # another process inserted it first: look again
                if attempt == 2:
                    raise
                continue
            if lease.owner == self.owner:
                self._holds[name] = self._holds.get(name, 0) + 1
            return lease
        raise AssertionError("unreachable")

    async def _try_acquire(self, name: str, ttl: float) -> Lease:
        # Expiry is set and judged by the database's clock (db_time), so hosts whose clocks
        # disagree, or a clock that jumps, cannot both think they hold the lease.
        expires = db_time(ttl)
        async with self._tx() as conn:
            # write first: on SQLite the transaction takes the write lock before it reads
            result = await conn.execute(
                update(leases)
                .where(
                    leases.c.name == name,
                    (leases.c.owner == self.owner) | (leases.c.expires_at <= db_time()),
                )
                .values(owner=self.owner, expires_at=expires)
            )
            if not result.rowcount:
                row = (
                    await conn.execute(
                        select(leases.c.owner, leases.c.expires_at).where(leases.c.name == name)
                    )
                ).first()
                if row is None:
                    await conn.execute(
                        insert(leases).values(name=name, owner=self.owner, expires_at=expires)
                    )
                elif not _owner_dead(row.owner):
                    return Lease(name, row.owner, row.expires_at)
                elif (
                    await conn.execute(
                        update(leases)
                        .where(leases.c.name == name, leases.c.owner == row.owner)
                        .values(owner=self.owner, expires_at=expires)
                    )
                ).rowcount:
                    log.warning("lease %s: took over from %s, which is gone", name, row.owner)
            row = (
                await conn.execute(
                    select(leases.c.owner, leases.c.expires_at).where(leases.c.name == name)
                )
            ).one()
            return Lease(name, row.owner, row.expires_at)

    async def renew_lease(self, name: str, *, ttl: float = DEFAULT_LEASE_TTL) -> bool:
        """Extend a lease this instance holds to ``ttl`` seconds from now (the database's
        clock); False if it lost it (it expired and another owner took it)."""
        async with self._tx() as conn:
            result = await conn.execute(
                update(leases)
                .where(leases.c.name == name, leases.c.owner == self.owner)
                .values(expires_at=db_time(ttl))
            )
        return bool(result.rowcount)

    @_retried
    async def release_lease(self, name: str) -> None:
        """Undo one :meth:`acquire_lease`; the last one frees the lease for others."""
        holds = self._holds.get(name, 0) - 1
        if holds > 0:
            self._holds[name] = holds
            return
        self._holds.pop(name, None)
        async with self._tx() as conn:
            await conn.execute(
                delete(leases).where(leases.c.name == name, leases.c.owner == self.owner)
            )

    async def lease(self, name: str) -> Lease | None:
        """The lease ``name`` as stored (possibly expired), or None."""
        async with self._tx() as conn:
            row = (
                await conn.execute(
                    select(leases.c.owner, leases.c.expires_at).where(leases.c.name == name)
                )
            ).first()
        return None if row is None else Lease(name, row.owner, row.expires_at)

    # -- subscribers ----------------------------------------------------------------------------

    async def subscribe(self, platform: str, chat_id: str) -> bool:
        """Subscribe a private chat to the daily issue; False if it already was.

        Also reactivates the chat as a target if it had been marked gone (it talks to us again).
        """
        now = self._clock.now()
        async with self._tx() as conn:
            added = await _subscribe(conn, platform, chat_id, now)
            await conn.execute(
                update(targets)
                .where(
                    targets.c.platform == platform,
                    targets.c.target_id == chat_id,
                    targets.c.moved_to.is_(None),
                )
                .values(active=True, reason=None, updated_at=now)
            )
        return added

    async def unsubscribe(self, platform: str, chat_id: str) -> bool:
        """End a subscription; False if there was none active."""
        async with self._tx() as conn:
            result = await conn.execute(
                update(subscribers)
                .where(
                    subscribers.c.platform == platform,
                    subscribers.c.chat_id == chat_id,
                    subscribers.c.active.is_(True),
                )
                .values(active=False, until=self._clock.now())
            )
        return bool(result.rowcount)

    async def subscribers(self, platform: str) -> list[Target]:
        """Active subscribers of ``platform`` as private-chat targets, oldest first."""
        async with self._tx() as conn:
            rows = await conn.execute(
                select(subscribers.c.chat_id)
                .where(subscribers.c.platform == platform, subscribers.c.active.is_(True))
                .order_by(subscribers.c.since, subscribers.c.chat_id)
            )
            return [Target(platform, chat_id, TargetKind.PRIVATE) for (chat_id,) in rows]

    # -- audit log ----------------------------------------------------------------------------

    async def record_audit(
        self,
        platform: str,
        user_id: str,
        action: str,
        *,
        args: Mapping[str, Any] | None = None,
        allowed: bool,
        outcome: str,
    ) -> int:
        """Append an admin action to the audit log; returns its id."""
        async with self._tx() as conn:
            result = await conn.execute(
                insert(audit).values(
                    at=self._clock.now(),
                    platform=platform,
                    user_id=user_id,
                    action=action,
                    args=json.dumps(
                        dict(args or {}), ensure_ascii=False, sort_keys=True, default=str
                    ),
                    allowed=allowed,
                    outcome=outcome,
                )
            )
            self.stats.rows_inserted += 1
            key = result.inserted_primary_key
            assert key is not None
            return int(key[0])

    async def audit_log(self, *, platform: str | None = None, limit: int = 50) -> list[AuditEntry]:
        """The latest audit entries, newest first."""
        query = select(audit).order_by(audit.c.id.desc()).limit(limit)
        if platform is not None:
            query = query.where(audit.c.platform == platform)
        async with self._tx() as conn:
            return [
                AuditEntry(
                    r.id,
                    r.at,
                    r.platform,
                    r.user_id,
                    r.action,
                    json.loads(r.args),
                    r.allowed,
                    r.outcome,
                )
                for r in await conn.execute(query)
            ]

    # -- status -------------------------------------------------------------------------------

    async def records(
        self,
        ref: IssueRef | None = None,
        *,
        platform: str | None = None,
        states: Iterable[PartState] | None = None,
        target: str | None = None,
        limit: int | None = None,
    ) -> list[PartRecord]:
        """Ledger rows, newest first, filtered by issue, platform, states and target."""
        query = (
            select(
                parts,
                deliveries.c.issue_date,
                deliveries.c.revision,
                deliveries.c.platform,
                deliveries.c.generation,
            )
            .join(deliveries, parts.c.delivery_id == deliveries.c.id)
            .order_by(parts.c.updated_at.desc(), parts.c.id.desc())
        )
        if ref is not None:
            query = query.where(
                deliveries.c.issue_date == ref.date, deliveries.c.revision == ref.revision
            )
        if platform is not None:
            query = query.where(deliveries.c.platform == platform)
        if states is not None:
            query = query.where(parts.c.state.in_([s.value for s in states]))
        if target is not None:
            query = query.where(parts.c.target == target)
        if limit is not None:
            query = query.limit(limit)
        async with self._tx() as conn:
            return [_record(row) for row in await conn.execute(query)]

    async def failures(
        self, ref: IssueRef | None = None, *, platform: str | None = None, limit: int = 50
    ) -> list[PartRecord]:
        """Failed rows, newest first."""
        return await self.records(ref, platform=platform, states=[PartState.FAILED], limit=limit)

    async def in_flight(self, ref: IssueRef | None = None) -> list[PartRecord]:
        """Rows in flight or of unknown outcome (:data:`MAYBE_SENT`): the only parts a rerun
        may send twice."""
        return await self.records(ref, states=MAYBE_SENT)

    async def last_sent(self, platform: str, target_id: str) -> PartRecord | None:
        """The most recent part sent to a target, or None."""
        found = await self.records(
            platform=platform, target=target_id, states=[PartState.SENT], limit=1
        )
        return found[0] if found else None

    async def counts(self, ref: IssueRef, *, platform: str | None = None) -> dict[PartState, int]:
        """How many rows of an issue revision (all generations) are in each state."""
        return await self._counts(
            deliveries.c.issue_date == ref.date,
            deliveries.c.revision == ref.revision,
            platform=platform,
        )

    async def day_counts(
        self, day: dt.date, *, platform: str | None = None
    ) -> dict[PartState, int]:
        """How many of a day's current rows (see :meth:`day_state`) are in each state, summed
        over platforms unless ``platform`` is given."""
        totals = dict.fromkeys(PartState, 0)
        for states in (await self._day_rows(day, platform)).values():
            for state in states:
                totals[state] += 1
        return totals

    async def day_state(self, day: dt.date, *, platform: str) -> DayState:
        """How far the post of ``day`` got on ``platform``, judged by its current rows.

        The current rows of a target are those of the latest generation it has in the day's
        latest revision delivered on ``platform``; a target that has no rows there but got a
        part under another revision counts as done (:meth:`plan` sends it nothing more without
        ``force``); otherwise its rows of its latest delivery count. So stale rows of an older
        generation or revision never make a completed day look partial.

        Returns ``NONE`` without rows, ``PARTIAL`` if a current row is pending, in flight or
        of unknown outcome, else ``DONE`` (failed and gone rows are final: they are reported,
        not retried here).
        """
        states = (await self._day_rows(day, platform)).get(platform, [])
        if not states:
            return DayState.NONE
        if any(s is PartState.PENDING or s in MAYBE_SENT for s in states):
            return DayState.PARTIAL
        return DayState.DONE

    async def _day_rows(self, day: dt.date, platform: str | None) -> dict[str, list[PartState]]:
        """platform -> the states of the day's current rows (see :meth:`day_state`)."""
        query = (
            select(
                deliveries.c.platform,
                deliveries.c.id,
                deliveries.c.revision,
                deliveries.c.generation,
                parts.c.target,
                parts.c.state,
            )
            .join(deliveries, parts.c.delivery_id == deliveries.c.id)
            .where(deliveries.c.issue_date == day)
        )
        latest = (
            select(deliveries.c.platform, deliveries.c.revision)
            .where(deliveries.c.issue_date == day)
            .order_by(deliveries.c.id)
        )
        if platform is not None:
            query = query.where(deliveries.c.platform == platform)
            latest = latest.where(deliveries.c.platform == platform)
        async with self._tx() as conn:
            # the revision of each platform's latest delivery (later rows overwrite)
            revision_of = {p: r for p, r in await conn.execute(latest)}
            rows: dict[tuple[str, str], list[tuple[int, str, int, PartState]]] = {}
            for p, d_id, revision, generation, target, state in await conn.execute(query):
                rows.setdefault((p, target), []).append(
                    (d_id, revision, generation, PartState(state))
                )
        found: dict[str, list[PartState]] = {}
        for (p, _), mine in rows.items():
            latest_revision = [r for r in mine if r[1] == revision_of[p]]
            if latest_revision:
                generation = max(r[2] for r in latest_revision)
                chosen = [r[3] for r in latest_revision if r[2] == generation]
            else:
                sent = [r for r in mine if r[3] is PartState.SENT]
                pool = sent or mine
                d_id = max(r[0] for r in pool)
                chosen = [r[3] for r in pool if r[0] == d_id]
            found.setdefault(p, []).extend(chosen)
        return found

    async def _counts(self, *where: Any, platform: str | None) -> dict[PartState, int]:
        query = (
            select(parts.c.state, func.count())
            .join(deliveries, parts.c.delivery_id == deliveries.c.id)
            .where(*where)
            .group_by(parts.c.state)
        )
        if platform is not None:
            query = query.where(deliveries.c.platform == platform)
        async with self._tx() as conn:
            found = {PartState(state): int(n) for state, n in await conn.execute(query)}
        return {state: found.get(state, 0) for state in PartState}

    async def deliveries(
        self, ref: IssueRef, *, platform: str | None = None
    ) -> list[DeliveryRecord]:
        """The deliveries (generations) of an issue revision, oldest first."""
        query = (
            select(deliveries)
            .where(deliveries.c.issue_date == ref.date, deliveries.c.revision == ref.revision)
            .order_by(deliveries.c.platform, deliveries.c.generation)
        )
        if platform is not None:
            query = query.where(deliveries.c.platform == platform)
        async with self._tx() as conn:
            return [
                DeliveryRecord(
                    r.id,
                    r.issue_date,
                    r.revision,
                    r.platform,
                    r.generation,
                    r.forced,
                    r.parts,
                    r.created_at,
                )
                for r in await conn.execute(query)
            ]


def _create_engine(url: str, *, echo: bool) -> AsyncEngine:
    """An async engine for ``url``; every way the URL itself can be wrong is a ConfigError
    naming ``database_url``, never showing the password."""
    example = "e.g. sqlite+aiosqlite:///var/digest-bot.db or postgresql+asyncpg://user@host/db"
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ConfigError(
            f"not a database URL: {_redact(url)!r} ({example})", key=CONFIG_KEY
        ) from exc
    shown = parsed.render_as_string(hide_password=True)
    sqlite = parsed.get_backend_name() == "sqlite"
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    try:
        if sqlite and in_memory:
            # one shared connection, or every connection would see its own empty database
            engine = create_async_engine(parsed, echo=echo, poolclass=StaticPool)
        elif sqlite:
            engine = create_async_engine(parsed, echo=echo)
        else:
            engine = create_async_engine(parsed, echo=echo, pool_pre_ping=True)
    except NoSuchModuleError as exc:
        raise ConfigError(
            f"{shown}: unknown database kind or driver {parsed.drivername!r} ({example})",
            key=CONFIG_KEY,
        ) from exc
    except InvalidRequestError as exc:  # a synchronous driver
        hint = "sqlite+aiosqlite" if sqlite else f"{parsed.get_backend_name()}+<async driver>"
        raise ConfigError(
            f"{shown}: driver {parsed.get_driver_name()!r} is not async; use {hint}:// ({example})",
            key=CONFIG_KEY,
        ) from exc
    except ImportError as exc:
        extra = (
            " (pip install 'digest-bot[postgres]')"
            if parsed.get_backend_name() == ("postgresql")
            else ""
        )
        raise ConfigError(
            f"{shown}: the database driver is not installed: {exc.name or exc}{extra}",
            key=CONFIG_KEY,
        ) from exc
    except Exception as exc:  # bad query arguments and the like
        raise ConfigError(f"{shown}: {type(exc).__name__}: {exc}", key=CONFIG_KEY) from exc
    if not sqlite:
        return engine
    # ?timeout=SECONDS in the URL sets how long a write waits for another's lock
    timeout = parsed.query.get("timeout", "5")
    try:
        busy_ms = int(float(timeout if isinstance(timeout, str) else timeout[-1]) * 1000)
    except ValueError:
        raise ConfigError(f"{shown}: timeout is not a number of seconds", key=CONFIG_KEY) from None
    if not in_memory:
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _open_error(exc, database, Path(database)) from exc

    @event.listens_for(engine.sync_engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # https://www.sqlite.org/wal.html: readers never block the writer; with WAL,
        # synchronous=NORMAL loses no commit when the process dies, only on power loss.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def _sqlite_file(url: str) -> Path | None:
    """The file of an SQLite URL (None for other databases and in-memory SQLite)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):  # a URI filename: file:path?mode=…
        if parsed.query.get("uri") in (None, "false") or database.startswith("file::memory:"):
            return None
        database = database.removeprefix("file:").split("?", 1)[0]
    return Path(database)


def _set_aside_orphans(database: Path, now: dt.datetime) -> None:
    """Rename the ``-wal`` and ``-shm`` files a deleted database left behind: SQLite would
    replay that old log into the new, empty file."""
    for suffix in ("-wal", "-shm"):
        orphan = database.with_name(database.name + suffix)
        if orphan.exists():
            aside = orphan.with_name(f"{orphan.name}.orphaned-{now:%Y%m%dT%H%M%S}")
            try:
                orphan.rename(aside)
            except OSError as exc:
                log.warning("could not set aside %s: %s", orphan, exc)
            else:
                log.warning("%s has no database; moved it to %s", orphan, aside)


def _unwritable(database: Path) -> str | None:
    """Why SQLite could not write ``database`` and its ``-wal`` beside it, or None. Asks the
    kernel (``access``), which also refuses root an immutable file or a read-only mount."""
    folder = database.parent
    if database.is_dir():
        return f"{database} is a folder, not a file"
    if folder.is_dir() and not os.access(folder, os.W_OK):
        return f"the folder {folder} is read-only"
    if database.is_file() and not os.access(database, os.W_OK):
        return f"{database} is read-only"
    return None


def _open_error(
    exc: BaseException | None, shown: str, database: Path | None, *, reason: str = ""
) -> LedgerError:
    """One line for a database that cannot be opened: what is wrong with which file, and the
    fix (restore a backup, make it writable, wait for the lock)."""
    reason = reason or (short_error(exc) if exc is not None else "unknown error")
    if isinstance(exc, OSError) and exc.strerror:
        reason = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if database is not None:
        for folder in database.parents:
            if folder.exists() and not folder.is_dir():
                reason = f"{folder} is a file, not a folder"
                break
        if database.is_dir():
            reason = f"{database} is a folder, not a file"
    low = reason.lower()
    where = f"ledger {shown} ({CONFIG_KEY})"
    restore = (
        f"restore it from a backup (copy the backup to {shown}, removing any {shown}-wal "
        f"and {shown}-shm), or move it aside and run `{RUN_NEW_LEDGER}` to begin an empty "
        "ledger"
    )
    if "not a database" in low or "malformed" in low or "damaged" in low or "corrupt" in low:
        text = f"{where} is damaged or truncated ({reason}); {restore}"
    elif "locked" in low or "busy" in low:
        text = (
            f"{where} is locked by another program ({reason}); start again once it has "
            "finished, or stop it"
        )
    elif database is not None:
        text = (
            f"{where} cannot be opened for writing ({reason}); make {shown} and its folder "
            f"writable by this user (SQLite also writes {database.name}-wal and "
            f"{database.name}-shm beside it), or set {CONFIG_KEY} to another file"
        )
    else:
        text = (
            f"{where} cannot be used ({reason}); check that the database server is running "
            f"and that {CONFIG_KEY} is right"
        )
    return LedgerError(text, where=shown)


def _redact(url: str) -> str:
    """``url`` with anything between ``user:`` and ``@`` hidden (it may not even parse)."""
    return re.sub(r"(://[^/@:]*:)[^@]*@", r"\1***@", url)


def _issue_filter(ref: IssueRef, platform: str) -> Any:
    return and_(
        deliveries.c.issue_date == ref.date,
        deliveries.c.revision == ref.revision,
        deliveries.c.platform == platform,
    )


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _record(row: Row[Any]) -> PartRecord:
    return PartRecord(
        id=row.id,
        issue_date=row.issue_date,
        revision=row.revision,
        platform=row.platform,
        generation=row.generation,
        target=row.target,
        kind=TargetKind(row.kind),
        part=row.part,
        state=PartState(row.state),
        message_id=row.message_id,
        attempts=row.attempts,
        last_error=row.last_error,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def _upsert_target(
    conn: AsyncConnection,
    target: Target,
    *,
    active: bool,
    moved_to: str | None,
    reason: str | None,
    now: dt.datetime,
) -> None:
    values = {
        "kind": target.kind.value,
        "active": active,
        "moved_to": moved_to,
        "reason": reason,
        "updated_at": now,
    }
    result = await conn.execute(
        update(targets)
        .where(targets.c.platform == target.platform, targets.c.target_id == target.id)
        .values(**values)
    )
    if not result.rowcount:
        await conn.execute(
            insert(targets).values(platform=target.platform, target_id=target.id, **values)
        )


async def _subscribe(conn: AsyncConnection, platform: str, chat_id: str, now: dt.datetime) -> bool:
    found = (
        await conn.execute(
            select(subscribers.c.active).where(
                subscribers.c.platform == platform, subscribers.c.chat_id == chat_id
            )
        )
    ).first()
    if found is None:
        await conn.execute(
            insert(subscribers).values(platform=platform, chat_id=chat_id, active=True, since=now)
        )
        return True
    if found.active:
        return False
    await conn.execute(
        update(subscribers)
        .where(subscribers.c.platform == platform, subscribers.c.chat_id == chat_id)
        .values(active=True, since=now, until=None)
    )
    return True
