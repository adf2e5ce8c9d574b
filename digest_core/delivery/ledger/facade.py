"""The ledger's facade: one object that opens the database and answers for its collaborators."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from digest_core.clock import Clock, SystemClock
from digest_core.delivery.health import LedgerHealth, RetryPolicy
from digest_core.delivery.ledger.analytics import Analytics
from digest_core.delivery.ledger.audit import Audit
from digest_core.delivery.ledger.core import Lifecycle
from digest_core.delivery.ledger.corrections import Corrections
from digest_core.delivery.ledger.engine import create_engine, set_aside_orphans
from digest_core.delivery.ledger.leases import Leases
from digest_core.delivery.ledger.migrate import SchemaState
from digest_core.delivery.ledger.planning import Planning
from digest_core.delivery.ledger.preferences import Readers
from digest_core.delivery.ledger.queries import Queries
from digest_core.delivery.ledger.records import LedgerStats
from digest_core.delivery.ledger.retention import Retention
from digest_core.delivery.ledger.schema import DEFAULT_LEDGER_URL
from digest_core.delivery.ledger.state import LedgerState
from digest_core.delivery.ledger.subscribers import Subscribers
from digest_core.delivery.ledger.targets import Targets
from digest_core.delivery.ledger.threads import ThreadBook
from digest_core.delivery.ledger.writer import Writer

__all__ = ["Ledger"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_C = TypeVar("_C")


def _via(
    attr: str, method: Callable[Concatenate[_C, _P], _R]
) -> Callable[Concatenate[Any, _P], _R]:
    """A method of :class:`Ledger` that is ``method`` of its collaborator ``attr`` (same
    signature and docstring: mypy checks callers against the collaborator's)."""

    @functools.wraps(method)
    def call(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return method(getattr(self, attr), *args, **kwargs)

    return call


class Ledger:
    """The delivery ledger, subscribers and audit log in one SQL database.

    Open it with ``async with Ledger.open(url, clock=...) as ledger``; the schema is created (or
    migrated) on open. Per-part state changes (:meth:`claim`, :meth:`mark_failed`, …) go through a
    group-commit writer: each call returns once its change is committed (:meth:`mark_sent_soon`
    at once, with the change to wait for), and changes that arrive while a transaction runs
    share the next one, so many concurrent sends cost few transactions.

    Several deliveries may share a database, in one process or many: :meth:`claim` is
    conditional, so a part is sent by one of them only, and :class:`DeliveryEngine` holds a
    lease per platform (:meth:`acquire_lease`) so a second process is refused while the first
    delivers. Each instance is one lease :attr:`owner`; rows it has in flight are live, and rows
    in flight that no live delivery owns are taken for a crashed run's and sent again.

    The work is done by collaborators that share one :class:`.state.LedgerState` (the
    engine, the lock, the writer's queue, the rows in flight here, lease holds, health): each
    method below is one of theirs, named in the table at the end of the class.
    """

    def __init__(self, state: LedgerState) -> None:
        self._state = state
        self._lifecycle = Lifecycle(state)
        self._planning = Planning(state)
        self._writer = Writer(state)
        self._targets = Targets(state)
        self._leases = Leases(state)
        self._subscribers = Subscribers(state)
        self._readers = Readers(state)
        self._audit = Audit(state)
        self._queries = Queries(state)
        self._retention = Retention(state)
        self._corrections = Corrections(state)
        self._threads = ThreadBook(state)
        self._analytics = Analytics(state)

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
        upgrade: bool = True,
    ) -> AsyncIterator[Self]:
        """Open (creating or migrating) the ledger at ``url``, any SQLAlchemy async URL.

        SQLite files get WAL, ``synchronous=NORMAL`` (a commit survives a killed process, not a
        power cut) and a busy timeout; their folder is created. ``owner`` names this instance
        in leases (default ``host:pid:token``, which lets a dead holder on this host be
        recognised); leases it still holds are released on close.

        An SQLite file gets a marker beside it (``<file>.marker``) holding the id stored in the
        database; while the marker exists, a missing, new or different database is refused
        unless ``new_ledger`` accepts it (and the marker is rewritten). A database that
        cannot be used is one :class:`LedgerError` line naming the file and the fix.

        An empty database gets the schema; an older one is upgraded (Alembic, see
        :mod:`.migrate`; one process at a time) unless ``upgrade`` is false, when it is
        refused with the command that upgrades it.

        Raises:
            ConfigError: the URL is malformed, names an unknown database, a synchronous or
                missing driver, or the database's schema is newer than this code
                (key ``database_url``; the password is never shown).
            LedgerError: the database is corrupt, truncated, unwritable, locked, cannot be
                reached, is not the one the marker records, or (without ``upgrade``) has
                an older schema.
        """
        engine = create_engine(url, echo=echo)
        state = LedgerState(engine, clock=clock or SystemClock(), owner=owner)
        ledger = cls(state)
        try:
            await ledger._lifecycle.start(url, new_ledger=new_ledger, upgrade=upgrade)
            state.writer = asyncio.create_task(ledger._writer.run(), name="ledger-writer")
            yield ledger
        finally:
            await ledger._lifecycle.close()
            await engine.dispose()
            lost_file = state.path if state.health.lost is not None else None
            if lost_file is not None and not lost_file.exists():
                # its -wal is ours and dead: left there, it would be replayed into a backup
                # copied to the path
                set_aside_orphans(lost_file, state.clock.now())

    # -- the shared state, as callers see it ---------------------------------------------------

    @property
    def owner(self) -> str:
        """This instance's lease owner id, ``host:pid:token``."""
        return self._state.owner

    @property
    def stats(self) -> LedgerStats:
        """Transactions and rows written so far."""
        return self._state.stats

    @property
    def health(self) -> LedgerHealth:
        """Whether the database answers (kept by the retries of the delivery path)."""
        return self._state.health

    @property
    def retry_policy(self) -> RetryPolicy:
        """How database trouble is waited out (settable)."""
        return self._state.retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        self._state.retry_policy = policy

    @property
    def path(self) -> Path | None:
        """The SQLite file (None on a server database)."""
        return self._state.path

    @property
    def file_id(self) -> tuple[int, int] | None:
        """The SQLite file's (st_dev, st_ino) when opened (the watchdog compares them)."""
        return self._state.file_id

    @property
    def ledger_id(self) -> str | None:
        """The id stored in the database (and in its marker file)."""
        return self._state.ledger_id

    @property
    def upgraded_from(self) -> SchemaState | None:
        """The schema as found when :meth:`open` created or upgraded it (None: it was current)."""
        return self._state.upgraded_from

    @property
    def busy(self) -> bool:
        """True while a transaction runs or state changes wait for one (tests use it to settle)."""
        return self._state.busy

    @property
    def retries_stopped(self) -> bool:
        """True once :meth:`stop_retrying` was called."""
        return self._state.retries_stopped

    @property
    def leases_are_locks(self) -> bool:
        """True where leases are OS locks beside an SQLite file (see :mod:`.leases`)."""
        return self._leases.leases_are_locks

    @property
    def _engine(self) -> AsyncEngine:
        """The engine (tests and benchmarks reach the database through it)."""
        return self._state.engine

    #: one transaction (tests and benchmarks write rows directly through it)
    _tx = _via("_state", LedgerState.tx)
    lose = _via("_state", LedgerState.lose)
    stop_retrying = _via("_state", LedgerState.stop_retrying)

    # -- each collaborator's methods ---------------------------------------------------------

    read_identity = _via("_lifecycle", Lifecycle.read_identity)
    answers = _via("_lifecycle", Lifecycle.answers)

    plan = _via("_planning", Planning.plan)

    claim = _via("_writer", Writer.claim)
    mark_sent_soon = _via("_writer", Writer.mark_sent_soon)
    release = _via("_writer", Writer.release)
    mark_unknown = _via("_writer", Writer.mark_unknown)
    mark_failed = _via("_writer", Writer.mark_failed)
    skip = _via("_writer", Writer.skip)
    abandon = _via("_writer", Writer.abandon)

    mark_gone = _via("_targets", Targets.mark_gone)
    move_target = _via("_targets", Targets.move_target)
    reactivate = _via("_targets", Targets.reactivate)
    inactive_targets = _via("_targets", Targets.inactive_targets)

    acquire_lease = _via("_leases", Leases.acquire_lease)
    renew_lease = _via("_leases", Leases.renew_lease)
    release_lease = _via("_leases", Leases.release_lease)
    lock_left_by = _via("_leases", Leases.lock_left_by)
    lock_file = _via("_leases", Leases.lock_file)
    lease = _via("_leases", Leases.lease)
    free_leases_of = _via("_leases", Leases.free_leases_of)

    subscribe = _via("_subscribers", Subscribers.subscribe)
    unsubscribe = _via("_subscribers", Subscribers.unsubscribe)
    subscribers = _via("_subscribers", Subscribers.subscribers)

    preference = _via("_readers", Readers.preference)
    set_preference = _via("_readers", Readers.set_preference)
    timed_subscribers = _via("_readers", Readers.timed_subscribers)
    formats = _via("_readers", Readers.formats)
    day_shapes = _via("_readers", Readers.day_shapes)
    follow = _via("_readers", Readers.follow)
    unfollow = _via("_readers", Readers.unfollow)
    following = _via("_readers", Readers.following)
    followers = _via("_readers", Readers.followers)
    follows_checked = _via("_readers", Readers.follows_checked)
    check_follows = _via("_readers", Readers.check_follows)

    record_audit = _via("_audit", Audit.record_audit)
    audit_log = _via("_audit", Audit.audit_log)
    audit_page = _via("_audit", Audit.audit_page)
    audit_actions = _via("_audit", Audit.audit_actions)

    records = _via("_queries", Queries.records)
    failures = _via("_queries", Queries.failures)
    waiting = _via("_queries", Queries.waiting)
    in_flight = _via("_queries", Queries.in_flight)
    last_sent = _via("_queries", Queries.last_sent)
    day_state = _via("_queries", Queries.day_state)
    posted_revision = _via("_queries", Queries.posted_revision)
    deliveries = _via("_queries", Queries.deliveries)

    prune = _via("_retention", Retention.prune)
    summaries = _via("_retention", Retention.summaries)
    last_summarised = _via("_retention", Retention.last_summarised)

    record_digests = _via("_corrections", Corrections.record_digests)
    plan_correction = _via("_corrections", Corrections.plan_correction)
    first_messages = _via("_corrections", Corrections.first_messages)

    intend_thread = _via("_threads", ThreadBook.intend_thread)
    thread_opened = _via("_threads", ThreadBook.thread_opened)
    threads_of = _via("_threads", ThreadBook.threads_of)
    day_threads = _via("_threads", ThreadBook.day_threads)
    known_threads = _via("_threads", ThreadBook.known_threads)
    add_clicks = _via("_analytics", Analytics.add_clicks)
    add_engagement = _via("_analytics", Analytics.add_engagement)
    clicks = _via("_analytics", Analytics.clicks)
    engagement = _via("_analytics", Analytics.engagement)
    subscriber_days = _via("_analytics", Analytics.subscriber_days)
    choices = _via("_analytics", Analytics.choices)
    deactivations = _via("_analytics", Analytics.deactivations)
    deactivation_reasons = _via("_analytics", Analytics.deactivation_reasons)
    latest_deliveries = _via("_analytics", Analytics.latest_deliveries)
    timeline = _via("_analytics", Analytics.timeline)
