"""The delivery ledger (what was sent where), subscribers and the audit log: SQLAlchemy 2 async."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Date,
    DateTime,
    Dialect,
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
    event,
    func,
    insert,
    make_url,
    select,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from digest_core.clock import Clock, SystemClock
from digest_core.errors import ConfigError
from digest_core.models import IssueRef
from digest_core.platform import Target, TargetKind

log = logging.getLogger(__name__)

#: Where the ledger lives unless config says otherwise (relative to the working directory).
DEFAULT_LEDGER_URL = "sqlite+aiosqlite:///var/ledger.sqlite3"
#: Bumped with every schema change; :data:`_MIGRATIONS` holds the step from each older version.
SCHEMA_VERSION = 1
#: SQLite's bound-parameter limit is 32766 since 3.32; stay far below it.
_CHUNK = 500


class PartState(StrEnum):
    """The life of one ledger row: pending -> in_flight -> sent | failed | gone."""

    PENDING = "pending"
    IN_FLIGHT = "in_flight"  # committed before the send: the only rows a crash can repeat
    SENT = "sent"
    FAILED = "failed"
    GONE = "gone"


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

#: version -> DDL/data steps that bring a database from that version to the next.
_MIGRATIONS: dict[int, Sequence[str]] = {}


@dataclass(frozen=True)
class PlannedPart:
    """One ledger row a delivery still has to send."""

    id: int
    part: int
    #: the state found when planning: IN_FLIGHT means a crashed run may already have sent it
    state: PartState
    attempts: int


@dataclass(frozen=True)
class TargetPlan:
    """What one requested target still needs."""

    requested: Target
    #: ``requested`` after following recorded moves (Telegram group -> supergroup)
    target: Target
    parts: tuple[PlannedPart, ...]
    already_sent: int


@dataclass(frozen=True)
class Plan:
    """The result of :meth:`Ledger.plan`: the rows to send, per target, in part order."""

    delivery_id: int
    generation: int
    ref: IssueRef
    platform: str
    n_parts: int
    targets: tuple[TargetPlan, ...]
    #: requested targets skipped because they are deactivated (gone)
    inactive: tuple[Target, ...]


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


def _state_update(**values: Any) -> Any:
    return (
        update(parts)
        .where(parts.c.id == bindparam("b_id"))
        .values(updated_at=bindparam("b_now"), **values)
    )


# The per-part state changes the delivery engine makes, batched by the group-commit writer.
_STATE_STATEMENTS: dict[str, Any] = {
    "claim": _state_update(state=PartState.IN_FLIGHT.value, attempts=parts.c.attempts + 1),
    "sent": _state_update(
        state=PartState.SENT.value, message_id=bindparam("b_message_id"), last_error=None
    ),
    "release": _state_update(state=PartState.PENDING.value, last_error=bindparam("b_error")),
    "failed": _state_update(state=PartState.FAILED.value, last_error=bindparam("b_error")),
}


@dataclass
class _Op:
    kind: str
    params: dict[str, Any]
    done: asyncio.Future[None]


class Ledger:
    """The delivery ledger, subscribers and audit log in one SQL database.

    Open it with ``async with Ledger.open(url, clock=...) as ledger``; the schema is created (or
    migrated) on open. Per-part state changes (:meth:`claim`, :meth:`mark_sent`, …) go through a
    group-commit writer: each call returns once its change is committed, and changes that arrive
    while a transaction runs share the next one, so many concurrent sends cost few transactions.

    One process SHOULD own a ledger at a time: rows found in flight by :meth:`plan` are taken to
    belong to a crashed run and are sent again.
    """

    def __init__(self, engine: AsyncEngine, *, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._lock = asyncio.Lock()
        self._queue: list[_Op] = []
        self._kick = asyncio.Event()
        self._closing = False
        self._active = 0
        self._writer: asyncio.Task[None] | None = None
        self.stats = LedgerStats()

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls, url: str = DEFAULT_LEDGER_URL, *, clock: Clock | None = None, echo: bool = False
    ) -> AsyncIterator[Ledger]:
        """Open (creating or migrating) the ledger at ``url``, any SQLAlchemy async URL.

        SQLite files get WAL, ``synchronous=NORMAL`` (a commit survives a killed process, not a
        power cut) and a busy timeout; their folder is created.

        Raises:
            ConfigError: the URL is malformed or the database's schema is newer than this code.
        """
        engine = _create_engine(url, echo=echo)
        ledger = cls(engine, clock=clock or SystemClock())
        try:
            await ledger._migrate()
            ledger._writer = asyncio.create_task(ledger._write_loop(), name="ledger-writer")
            yield ledger
        finally:
            await ledger._close()
            await engine.dispose()

    async def _close(self) -> None:
        self._closing = True
        self._kick.set()
        if self._writer is not None:
            await self._writer

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
                    key="ledger.url",
                )
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
        lacks is inserted as pending unless an older generation sent it. With ``force``, a new
        generation is created and every part is planned again; older rows stay as history.

        Targets are resolved through recorded moves; deactivated ones are left out and listed
        in :attr:`Plan.inactive`. Duplicates (after resolving) are planned once.

        Raises:
            ValueError: ``n_parts`` is less than 1.
        """
        if n_parts < 1:
            raise ValueError("a delivery needs at least one part")
        now = self._clock.now()
        async with self._tx() as conn:
            resolved, inactive = await self._resolve_targets(conn, platform, requested)
            delivery_id, generation = await self._delivery_for(
                conn, ref, platform, n_parts, force=force, now=now
            )
            already: dict[str, int] = {}
            wanted = {t.id for _, t in resolved}
            # The latest generation is completed for the requested targets; a target it lacks
            # gets rows unless an older generation already delivered that part.
            current: dict[tuple[str, int], tuple[int, str]] = {}
            sent_before: set[tuple[str, int]] = set()
            if not force:
                rows = await conn.execute(
                    select(
                        parts.c.id, parts.c.delivery_id, parts.c.target, parts.c.part, parts.c.state
                    )
                    .join(deliveries, parts.c.delivery_id == deliveries.c.id)
                    .where(_issue_filter(ref, platform))
                )
                for row_id, d_id, target, part, state in rows:
                    if target not in wanted:
                        continue
                    if d_id == delivery_id:
                        current[(target, part)] = (row_id, state)
                    elif state == PartState.SENT:
                        sent_before.add((target, part))
            inserts: list[dict[str, Any]] = []
            resets: list[int] = []
            for _, target in resolved:
                for part in range(n_parts):
                    key = (target.id, part)
                    found = current.get(key)
                    if (found is None and key in sent_before) or (
                        found is not None and found[1] == PartState.SENT
                    ):
                        already[target.id] = already.get(target.id, 0) + 1
                    elif found is None:
                        inserts.append(
                            {
                                "delivery_id": delivery_id,
                                "target": target.id,
                                "kind": target.kind.value,
                                "part": part,
                                "state": PartState.PENDING.value,
                                "attempts": 0,
                                "created_at": now,
                                "updated_at": now,
                            }
                        )
                    elif found[1] in (PartState.FAILED, PartState.GONE):
                        resets.append(found[0])
            if inserts:
                await conn.execute(insert(parts), inserts)
                self.stats.rows_inserted += len(inserts)
            for chunk in _chunks(resets):
                await conn.execute(
                    update(parts)
                    .where(parts.c.id.in_(chunk))
                    .values(state=PartState.PENDING.value, updated_at=now)
                )
                self.stats.rows_updated += len(chunk)
            todo: dict[str, list[PlannedPart]] = {}
            rows = await conn.execute(
                select(parts.c.id, parts.c.target, parts.c.part, parts.c.state, parts.c.attempts)
                .where(parts.c.delivery_id == delivery_id, parts.c.state != PartState.SENT.value)
                .order_by(parts.c.target, parts.c.part)
            )
            for row_id, target, part, state, attempts in rows:
                if target in wanted:
                    todo.setdefault(target, []).append(
                        PlannedPart(row_id, part, PartState(state), attempts)
                    )
        plans = tuple(
            TargetPlan(req, t, tuple(todo.get(t.id, ())), already.get(t.id, 0))
            for req, t in resolved
        )
        if inactive:
            log.info("%s: skipping %d deactivated targets", platform, len(inactive))
        return Plan(delivery_id, generation, ref, platform, n_parts, plans, tuple(inactive))

    async def _resolve_targets(
        self, conn: AsyncConnection, platform: str, requested: Sequence[Target]
    ) -> tuple[list[tuple[Target, Target]], list[Target]]:
        known = {
            row.target_id: row
            for row in await conn.execute(
                select(targets.c.target_id, targets.c.active, targets.c.moved_to).where(
                    targets.c.platform == platform,
                    (targets.c.active.is_(False)) | (targets.c.moved_to.is_not(None)),
                )
            )
        }
        resolved: list[tuple[Target, Target]] = []
        inactive: list[Target] = []
        seen: set[str] = set()
        for req in requested:
            if req.platform != platform:
                raise ValueError(f"target {req} is not on platform {platform!r}")
            current, hops = req, 0
            while (info := known.get(current.id)) is not None and info.moved_to and hops < 10:
                current = Target(platform, info.moved_to, req.kind)
                hops += 1
            info = known.get(current.id)
            if info is not None and not info.active and not info.moved_to:
                inactive.append(req)
            elif current.id not in seen:
                seen.add(current.id)
                resolved.append((req, current))
        return resolved, inactive

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

    async def claim(self, row_id: int) -> None:
        """Mark a row in flight (and count the attempt); returns once committed.

        The caller MUST await this before sending, so a crash can only repeat in-flight rows.
        """
        await self._submit("claim", {"b_id": row_id})

    async def mark_sent(self, row_id: int, message_id: str) -> None:
        """Record a successful send and the platform's message id."""
        await self._submit("sent", {"b_id": row_id, "b_message_id": message_id})

    async def release(self, row_id: int, error: str) -> None:
        """Put an in-flight row back to pending after an attempt failed and will be retried."""
        await self._submit("release", {"b_id": row_id, "b_error": error})

    async def mark_failed(self, row_id: int, error: str) -> None:
        """Give up on a row (retries exhausted, rejected payload, or skipped after a failure)."""
        await self._submit("failed", {"b_id": row_id, "b_error": error})

    async def _submit(self, kind: str, params: dict[str, Any]) -> None:
        if self._writer is None or self._closing:
            raise RuntimeError("the ledger is not open")
        params["b_now"] = self._clock.now()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Op(kind, params, done))
        self._kick.set()
        await done

    async def _write_loop(self) -> None:
        while True:
            await self._kick.wait()
            self._kick.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            batch, self._queue = self._queue, []
            grouped: dict[str, list[dict[str, Any]]] = {}
            for op in batch:
                grouped.setdefault(op.kind, []).append(op.params)
            try:
                async with self._tx() as conn:
                    for kind, params in grouped.items():
                        await conn.execute(_STATE_STATEMENTS[kind], params)
            except Exception as exc:
                log.exception("ledger write of %d changes failed", len(batch))
                for op in batch:
                    if not op.done.done():
                        op.done.set_exception(exc)
            else:
                self.stats.rows_updated += len(batch)
                for op in batch:
                    if not op.done.done():
                        op.done.set_result(None)

    # -- targets that went away or moved --------------------------------------------------------

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

    async def reactivate(self, target: Target) -> None:
        """Let :meth:`plan` send to a deactivated target again (an admin action)."""
        async with self._tx() as conn:
            await _upsert_target(
                conn, target, active=True, moved_to=None, reason=None, now=self._clock.now()
            )

    async def _mark_rows(
        self,
        conn: AsyncConnection,
        row_ids: Iterable[int],
        state: PartState,
        error: str,
        now: dt.datetime,
    ) -> None:
        for chunk in _chunks(list(row_ids)):
            await conn.execute(
                update(parts)
                .where(parts.c.id.in_(chunk))
                .values(state=state.value, last_error=error, updated_at=now)
            )
            self.stats.rows_updated += len(chunk)

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
        """Rows in flight: after a crash, the only parts a rerun may send twice."""
        return await self.records(ref, states=[PartState.IN_FLIGHT])

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
        """How many rows of a day's issue (any revision, all generations) are in each state."""
        return await self._counts(deliveries.c.issue_date == day, platform=platform)

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
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise ConfigError(f"not a database URL: {url!r}", key="ledger.url") from exc
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(parsed, echo=echo, pool_pre_ping=True)
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        # one shared connection, or every connection would see its own empty database
        engine = create_async_engine(parsed, echo=echo, poolclass=StaticPool)
    else:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(parsed, echo=echo)

    @event.listens_for(engine.sync_engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # https://www.sqlite.org/wal.html: readers never block the writer; with WAL,
        # synchronous=NORMAL loses no commit when the process dies, only on power loss.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


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
