"""The ledger's tables, part states, schema version, and small SQL helpers."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any, TypeVar

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
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    cast,
    literal,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement, Select
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from digest_core.models import IssueRef

_Selected = TypeVar("_Selected", bound=Select[Any])

__all__ = [
    "CONFIG_KEY",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_LEDGER_URL",
    "FULL_VARIANT",
    "IN_CHUNK",
    "MAYBE_SENT",
    "SCHEMA_VERSION",
    "DayState",
    "PartState",
    "UTCDateTime",
    "audit",
    "day_summaries",
    "db_time",
    "deliveries",
    "follow_checks",
    "follows",
    "in_chunks",
    "issue_filter",
    "leases",
    "ledger_identity",
    "link_clicks",
    "metadata",
    "narrowed",
    "part_digests",
    "parts",
    "preferences",
    "schema_version",
    "subscribers",
    "targets",
    "threads",
    "usage_counts",
]

log = logging.getLogger(__name__)

#: Where the ledger lives unless config says otherwise (relative to the working directory).
DEFAULT_LEDGER_URL = "sqlite+aiosqlite:///var/ledger.sqlite3"
#: Bumped with every schema change: the number of the newest Alembic revision in
#: ``migrations/versions`` (``v0011_…``), also kept in the ``schema_version`` table.
SCHEMA_VERSION = 11
#: The settings key the ledger URL comes from (named in configuration errors).
CONFIG_KEY = "database_url"
#: How long a lease lasts unless renewed; a crashed holder blocks others at most this long
#: (less on the same host, where a dead holder's lease is taken over at once).
DEFAULT_LEASE_TTL = 60.0
#: The variant (format) of a delivery's messages that channels get, and the one a part row
#: without a variant shows (rows of schema 7 and older were all recorded so): see
#: :data:`part_digests`.
FULL_VARIANT = "full"
#: How many ids :func:`in_chunks` puts in one ``IN (…)``: SQLite's bound-parameter limit is
#: 32766 since 3.32; stay far below it.
IN_CHUNK = 500


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
    #: when retention deleted its part rows (their summary is in ``day_summaries``)
    Column("pruned_at", UTCDateTime),
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
    #: the variant (format) of the delivery's messages this row shows; NULL for
    #: :data:`FULL_VARIANT` (channels and most subscribers: nothing stored)
    Column("variant", String(16)),
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
    # the dashboard's audience per day, read from the indexes alone (schema 11)
    Index("ix_subscribers_since", "platform", "since"),
    Index("ix_subscribers_until", "platform", "until"),
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
    # the dashboard's filters (who, what, day), newest first (schema 11)
    Index("ix_audit_at", "at"),
    Index("ix_audit_action", "action", "id"),
    Index("ix_audit_user", "user_id", "id"),
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

#: What a target got of one day's issue on one platform, kept after retention pruned the
#: day's part rows (:mod:`digest_core.delivery.retention`): counts of parts by outcome over
#: every delivery of the day (``unsent``: pending, in flight or unknown when pruned).
day_summaries = Table(
    "day_summaries",
    metadata,
    Column("issue_date", Date, primary_key=True),
    Column("platform", String(32), primary_key=True),
    Column("target", String(128), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("sent", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("gone", Integer, nullable=False),
    Column("unsent", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_sent_at", UTCDateTime),
    Index("ix_day_summaries_target", "platform", "target"),
)

#: What each part of a delivery showed, per variant (format: the channels' ``full`` issue, a
#: subscriber's ``compact`` or ``headline`` one; a delivery's targets may get different ones,
#: named by their rows' ``variant``): a digest of its rendered payload (without any correction
#: mark). A correction compares these with the new revision's in the target's variant, so only
#: messages whose content changed are edited (the old revision's file is gone by then).
part_digests = Table(
    "part_digests",
    metadata,
    Column("delivery_id", Integer, ForeignKey("deliveries.id"), primary_key=True),
    Column("variant", String(16), primary_key=True, server_default=FULL_VARIANT),
    Column("part", Integer, primary_key=True),
    Column("digest", String(32), nullable=False),
)


#: one row per reader who set anything: ``at`` ("HH:MM", local to ``zone``) is NULL for the
#: digest's own time (the reader then gets the channel post's delivery); ``zone`` NULL for the
#: digest's zone
preferences = Table(
    "preferences",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("chat_id", String(128), primary_key=True),
    Column("at", String(5)),
    Column("zone", String(64)),
    Column("format", String(16), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

follows = Table(
    "follows",
    metadata,
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("word", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("platform", "chat_id", "word"),
)

#: one row per (platform, issue date) whose follow messages were all sent: an issue that
#: became public is considered once for follows, so a restart neither resends nor forgets
#: (schema 9); ``revision`` is the one considered (a correction sends nothing more)
follow_checks = Table(
    "follow_checks",
    metadata,
    Column("platform", String(32), nullable=False),
    Column("issue_date", Date, nullable=False),
    Column("revision", String(64), nullable=False),
    Column("checked_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("platform", "issue_date"),
)

#: the thread one delivery opened on one target, a forum post or a thread on the issue's first
#: message (schema 10; see :mod:`digest_core.delivery.threads`): recorded, with ``title`` and
#: ``opened_at``, before the platform is asked to open it (the intent), and ``thread_id`` and
#: ``message_id`` (the issue's first message) once it is open (``thread_id`` "" when the first
#: message went out but the platform opened no thread on it), so a crash between opening it
#: and recording part 0 sent never opens a second one for the same post
threads = Table(
    "threads",
    metadata,
    Column("delivery_id", Integer, ForeignKey("deliveries.id"), primary_key=True),
    Column("target", String(128), primary_key=True),
    Column("title", String(256), nullable=False),
    Column("thread_id", String(128)),
    Column("message_id", String(128)),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)


#: clicks on tracked links (``[analytics] track_links``), counted per issue, story
#: (``headline``, ``brief-3``, ``classic``), link (1-based in the story), platform and day
#: (the digest's zone); never who clicked (schema 11)
link_clicks = Table(
    "link_clicks",
    metadata,
    Column("issue_date", Date, nullable=False),
    Column("story", String(16), nullable=False),
    Column("link", Integer, nullable=False),
    Column("platform", String(32), nullable=False),
    Column("day", Date, nullable=False),
    Column("clicks", Integer, nullable=False),
    PrimaryKeyConstraint("issue_date", "story", "link", "platform", "day"),
    Index("ix_link_clicks_day", "day"),
)

#: what readers did, counted per day (the digest's zone), platform, kind and key, never who
#: (schema 11): ``command`` (key: the command's name), ``section`` (a section button of an
#: issue: ``2026-11-27:briefs``), ``found`` (a story a search showed: ``2026-11-27:brief-3``).
#: Their engagement, as the code calls it (``Analytics.add_engagement``); the table keeps the
#: name it was created with (a migration for a word is not worth it)
usage_counts = Table(
    "usage_counts",
    metadata,
    Column("day", Date, nullable=False),
    Column("platform", String(32), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("key", String(64), nullable=False),
    Column("n", Integer, nullable=False),
    PrimaryKeyConstraint("day", "platform", "kind", "key"),
    Index("ix_usage_counts_key", "kind", "key"),
)


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


def issue_filter(ref: IssueRef, platform: str) -> Any:
    """The deliveries of issue revision ``ref`` on ``platform`` (a WHERE clause)."""
    return and_(
        deliveries.c.issue_date == ref.date,
        deliveries.c.revision == ref.revision,
        deliveries.c.platform == platform,
    )


def in_chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    """``ids`` in slices of at most :data:`IN_CHUNK`, each few enough for one ``IN (…)``."""
    for start in range(0, len(ids), IN_CHUNK):
        yield ids[start : start + IN_CHUNK]


def narrowed(
    query: _Selected, *equal: tuple[ColumnElement[Any], object], limit: int | None = None
) -> _Selected:
    """``query`` narrowed to ``column == value`` for each (column, value) of ``equal`` whose
    value is given (not None), then to at most ``limit`` rows if given: the optional filters
    of a listing."""
    for column, value in equal:
        if value is not None:
            query = query.where(column == value)
    return query if limit is None else query.limit(limit)
