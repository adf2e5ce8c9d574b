"""The state every collaborator of the ledger shares: engine, clock, owner, transactions."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from digest_core.clock import Clock
from digest_core.delivery.health import LedgerHealth, RetryPolicy, retrying
from digest_core.delivery.ledger.migrate import SchemaState
from digest_core.delivery.ledger.oslocks import FileLocks
from digest_core.delivery.ledger.records import LedgerStats
from digest_core.errors import LedgerLost

__all__ = [
    "LINGER_SECONDS",
    "WRITERS",
    "HasState",
    "LedgerState",
    "Op",
    "Recorded",
    "new_owner",
    "retried",
    "settle_sends",
]

log = logging.getLogger(__name__)

#: the writer's concurrent transactions on a server database (PostgreSQL)
WRITERS = 2
#: see ``LedgerState.linger``
LINGER_SECONDS = 0.02


@dataclass(eq=False, slots=True)
class Op:
    """One per-part state change waiting for the group-commit writer (see :mod:`.writer`).
    Its time is the batch's, taken when the batch is written.

    A send recorded with ``mark_sent_soon`` is ``shared``: its caller holds the op itself
    (:meth:`wait`), and ``done`` is the one future of the sends queued for the same batch,
    done (never failed) once the batch is settled; the op's own failure is ``error``. Every
    other op has its own future, whose result (a claim's: claimed) or error is the op's."""

    kind: str
    row_id: int
    #: the message id (``sent``), the error (``release``, ``unknown``, ``failed``, ``skip``),
    #: or a resumed claim's planned attempts (None: a plain claim)
    value: Any
    done: asyncio.Future[Any]
    shared: bool = False
    error: BaseException | None = None
    #: a shared op's: asks the writer to write its batch now (see ``LedgerState.linger``)
    urge: Callable[[], None] | None = None
    #: a claim's: the record of the send before it, in the same batch (see ``Writer.claim``)
    after: Op | None = None

    def fail(self, error: BaseException) -> None:
        """Settle the op with ``error`` (a shared op's future is settled with its batch)."""
        if self.shared:
            self.error = error
        elif not self.done.done():
            self.done.set_exception(error)

    def hurry(self) -> None:
        """Someone waits for this shared op: the writer writes its batch without lingering
        (see ``LedgerState.linger``)."""
        if self.urge is not None:
            self.urge()

    async def wait(self) -> None:
        """Until a shared op is committed; raises its error (the ledger's)."""
        if not self.done.done():
            self.hurry()  # someone waits for it: its batch need not wait for company
            await asyncio.shield(self.done)  # (shared: a cancelled waiter leaves it alone)
        if self.error is not None:
            raise self.error


#: what ``Ledger.mark_sent_soon`` returns: the queued change itself (see :class:`Op`)
Recorded = Op


def settle_sends(sends: asyncio.Future[None] | None) -> None:
    """Tell the waiters of a batch's shared ops (:class:`Op`) that each op is settled."""
    if sends is not None and not sends.done():
        sends.set_result(None)


def new_owner() -> str:
    """A lease owner id, ``host:pid:token`` (a dead holder on this host can be recognised)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class HasState(Protocol):
    """A collaborator of the ledger: it works on one shared :class:`LedgerState`."""

    @property
    def state(self) -> LedgerState: ...


_P = ParamSpec("_P")
_R = TypeVar("_R")
_C = TypeVar("_C", bound=HasState)


def retried(
    method: Callable[Concatenate[_C, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[_C, _P], Coroutine[Any, Any, _R]]:
    """Make a one-transaction method of the delivery path wait out database trouble
    (:meth:`LedgerState.retrying`) instead of failing the delivery."""

    @functools.wraps(method)
    async def wrapper(self: _C, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await self.state.retrying(lambda: method(self, *args, **kwargs))

    return wrapper


class LedgerState:
    """What the ledger's collaborators share: the engine, the clock, the owner id, one
    transaction at a time (:meth:`tx`), the writer's queue, the rows in flight here, lease
    holds, health and retries. See :class:`~digest_core.delivery.ledger.Ledger` for the
    contracts."""

    def __init__(self, engine: AsyncEngine, *, clock: Clock, owner: str | None = None) -> None:
        self.engine = engine
        self.clock = clock
        #: this instance's lease owner id, ``host:pid:token``
        self.owner = owner or new_owner()
        self.lock = asyncio.Lock()
        #: the writer's transactions that may run at once: one on SQLite (one writer per
        #: file anyway), two on a server database, so one batch is written while the next
        #: one gathers (the engine's CPU and the server's overlap instead of taking turns)
        self.writers = 1 if engine.dialect.name == "sqlite" else WRITERS
        self.queue: list[Op] = []
        #: the future the shared ops in ``queue`` settle with (see :class:`Op`), if any
        self.queued_sends: asyncio.Future[None] | None = None
        #: whether ``queue`` holds an op someone waits for (not only shared sends), or a
        #: waiter urged the shared ones: the writer then writes it without lingering
        self.pressing = False
        #: real seconds the writer holds a queue of shared sends only, nobody waiting for
        #: them, for an op that is waited for (a claim) to share their transaction: at a
        #: paced platform's rate (50 a second) the sends and claims of a delivery came one
        #: at a time, each its own transaction, two a part (0: no lingering)
        self.linger = LINGER_SECONDS
        #: the writer holds such a queue now
        self.lingering = False
        self.kick = asyncio.Event()
        self.closing = False
        #: set by :meth:`stop_retrying` (a shutdown): retries give up, waits are cut short
        self.stopped = asyncio.Event()
        #: transactions running, and batches taken off the queue and not settled
        self.active = 0
        self.checkpoints: set[asyncio.Task[bool]] = set()
        #: the group-commit writer's task, while the ledger is open
        self.writer: asyncio.Task[None] | None = None
        #: rows this instance claimed and has not settled: in flight in a live delivery
        self.live: set[int] = set()
        #: lease name -> how many holds this instance has on it (leases are reentrant)
        self.holds: dict[str, int] = {}
        #: an SQLite file's leases: OS locks beside it (None: leases are rows, judged by the
        #: database server's clock)
        self.locks: FileLocks | None = None
        self.stats = LedgerStats()
        #: whether the database answers (kept by the retries of the delivery path)
        self.health = LedgerHealth(clock)
        self.retry_policy = RetryPolicy()
        #: the SQLite file and its (st_dev, st_ino) when opened (the watchdog compares them)
        self.path: Path | None = None
        self.file_id: tuple[int, int] | None = None
        #: the id stored in the database (and in its marker file)
        self.ledger_id: str | None = None
        #: the schema as found when the ledger was opened and created or upgraded it (None:
        #: it was current)
        self.upgraded_from: SchemaState | None = None

    @property
    def busy(self) -> bool:
        """True while a transaction runs or state changes wait for one (tests use it to settle)."""
        return self.active > 0 or bool(self.queue)

    @asynccontextmanager
    async def tx(self, *, exclusive: bool = True) -> AsyncIterator[AsyncConnection]:
        """One transaction, committed on leaving the block (rolled back on an exception)."""
        # One transaction at a time per process: SQLite serialises writers anyway, and the lock
        # lets an in-memory database share its single connection. The writer's batches on a
        # server database (``exclusive=False``) run beside it: they change only rows their
        # callers have claimed or are claiming by id, which row locks keep apart.
        self.active += 1
        try:
            if exclusive or self.writers == 1:
                async with self.lock, self.engine.begin() as conn:
                    yield conn
            else:
                async with self.engine.begin() as conn:
                    yield conn
            self.stats.transactions += 1
        finally:
            self.active -= 1

    async def retrying(self, call: Callable[[], Awaitable[_R]]) -> _R:
        """Run the one-transaction ``call`` until the database answers (see
        :func:`digest_core.delivery.health.retrying`); give up once closing or stopped."""
        return await retrying(
            call,
            health=self.health,
            clock=self.clock,
            policy=self.retry_policy,
            give_up=lambda: self.closing or self.stopped.is_set(),
            wake=self.stopped,
        )

    def lose(self, error: LedgerLost) -> None:
        """The database was deleted or replaced: fail every waiting and future state change
        and ledger retry with ``error``, so nothing more is sent (a claim comes first)."""
        self.health.lose(error)
        queued, self.queue = self.queue, []
        self.pressing = False
        for op in queued:
            op.fail(error)
        settle_sends(self.take_sends())
        self.kick.set()

    def urge(self, sends: asyncio.Future[None]) -> None:
        """A waiter of the shared ops settled by ``sends``: if they are still queued, their
        batch is written without lingering."""
        if sends is self.queued_sends:
            self.pressing = True
            self.kick.set()

    def take_sends(self) -> asyncio.Future[None] | None:
        """The future of the shared ops queued so far (see :class:`Op`); the next ones get
        a new one."""
        sends, self.queued_sends = self.queued_sends, None
        return sends

    def stop_retrying(self) -> None:
        """Stop waiting out database trouble (a shutdown whose grace is over): every retried
        transaction that fails from now on, and every one waiting for its next attempt, raises
        its error at once, so the process can stop while the database does not answer. What
        was not recorded is left as a crash leaves it (rows in flight are sent again on the
        next start). Transactions that succeed are not affected."""
        self.stopped.set()

    @property
    def retries_stopped(self) -> bool:
        """True once :meth:`stop_retrying` was called."""
        return self.stopped.is_set()
