"""Starting and stopping the platforms of `run`: each adapter an async context manager
(:class:`Running`), one its server keeps out (unreachable) retried meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from types import TracebackType

from digest_core.clock import Clock
from digest_core.errors import TransientError
from digest_core.port import Adapter, Port

log = logging.getLogger(__name__)

#: the first retry of a platform that could not be reached comes after about this many seconds
RETRY_BASE_SECONDS = 2.0
#: and the tries never get further apart than this, so a platform is started within this long
#: of its server coming back (one getMe or login per 7.5-15 s while it is down costs nothing)
RETRY_CAP_SECONDS = 15.0


#: however little of the shutdown budget is left, an adapter gets this long to stop
MIN_STOP_SECONDS = 0.5


def unlimited() -> float:
    """No limit on how long a stop may take (outside a shutdown budget)."""
    return math.inf


class Running(contextlib.AbstractAsyncContextManager[Adapter]):
    """An adapter as an async context manager: started through ``port`` on entering (raising
    what :meth:`Adapter.start` raises, nothing to stop then), stopped on leaving, whatever
    ended the block, within ``within()`` seconds (read then: what is left of a shutdown
    budget; at least :data:`MIN_STOP_SECONDS`). A stop that fails or takes longer is logged
    and left: leaving never raises for it. (A class, not a generator: one never left is
    garbage, not a stop run later by the loop's finalizer.)"""

    def __init__(
        self,
        adapter: Adapter,
        port: Port,
        *,
        receive: bool = True,
        within: Callable[[], float] = unlimited,
    ) -> None:
        self.adapter = adapter
        self._port = port
        self._receive = receive
        self._within = within

    async def __aenter__(self) -> Adapter:
        await self.adapter.start(self._port, receive=self._receive)
        return self.adapter

    async def __aexit__(self, *exc: object) -> None:
        adapter = self.adapter
        try:
            await asyncio.wait_for(adapter.stop(), timeout=max(self._within(), MIN_STOP_SECONDS))
        except TimeoutError:
            log.warning("%s did not stop within the shutdown budget; left to close", adapter.name)
        except Exception:
            log.exception("stopping %s failed", adapter.name)


@contextlib.asynccontextmanager
async def all_running(
    adapters: Iterable[Adapter], port: Port, *, receive: bool = True
) -> AsyncIterator[None]:
    """Every one of ``adapters`` started in turn (:class:`Running`) for the block, the started
    ones stopped on leaving, the last first (the CLI's one-shot commands: ``receive=False``).

    Raises:
        Exception: what a start raises (the adapters started before it are stopped).
    """
    async with contextlib.AsyncExitStack() as stack:
        for adapter in adapters:
            await stack.enter_async_context(Running(adapter, port, receive=receive))
        yield


class PlatformStarts:
    """Starts adapters for ``run``; a restart during an outage still leaves a running bot.

    :meth:`start` starts one now. If its server cannot be reached (``TransientError``), the
    adapter is tried again in the background with capped exponential backoff (equal jitter:
    each wait is between half and all of ``min(cap, base * 2**(n-1))``) until it starts;
    meanwhile :attr:`waiting` says why it is not started (``/readyz``, ``/status``), and once
    it starts it is appended to ``started`` and ``on_started`` runs (the runtime runs the
    catch-up: what it missed is posted then). A refusal that no retry can mend (a revoked or
    invalid token: ``ConfigError``), or an unexpected error, ends the retries and goes to
    ``on_fatal`` (the runtime stops and exits non-zero).

    Used as an async context manager, leaving it cancels the retries (:meth:`stop`) and
    stops the started adapters, the last started first, each within ``stop_within()``
    seconds (:class:`Running`). :meth:`retrying` is the span of the retries alone (``run``
    leaves it before the shutdown's graces: no platform starts during them).
    """

    def __init__(
        self,
        port: Port,
        started: list[Adapter],
        *,
        clock: Clock,
        on_started: Callable[[Adapter], Awaitable[None]],
        on_fatal: Callable[[Exception], None],
        base: float = RETRY_BASE_SECONDS,
        cap: float = RETRY_CAP_SECONDS,
        rng: random.Random | None = None,
        stop_within: Callable[[], float] = unlimited,
    ) -> None:
        self._port = port
        self.started = started
        self._clock = clock
        self._on_started = on_started
        self._on_fatal = on_fatal
        self._base = base
        self._cap = cap
        self._rng = rng or random.Random()
        #: platform name -> why it is not started yet (and when it is tried next)
        self.waiting: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop_within = stop_within
        #: the started adapters' contexts (:class:`Running`), left in reverse on exit
        self._running = contextlib.AsyncExitStack()

    async def __aenter__(self) -> PlatformStarts:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.stop()
        await self._running.aclose()

    @contextlib.asynccontextmanager
    async def retrying(self) -> AsyncIterator[PlatformStarts]:
        """While entered, a platform that could not be reached is retried in the background;
        leaving it cancels the retries still waiting (:meth:`stop`), the started adapters
        stay started."""
        try:
            yield self
        finally:
            await self.stop()

    async def _enter(self, adapter: Adapter) -> None:
        await self._running.enter_async_context(
            Running(adapter, self._port, within=self._stop_within)
        )

    async def start(self, adapter: Adapter) -> bool:
        """Start ``adapter`` now: True if it started, False if it is retried in the background
        (an adapter already started, or already being retried, is left as it is).

        Raises:
            ConfigError: the platform refused this configuration (a revoked token).
        """
        if adapter in self.started or adapter.name in self.waiting:
            return adapter in self.started  # started, or its retries are under way
        try:
            await self._enter(adapter)
        except TransientError as exc:
            self.waiting[adapter.name] = str(exc)
            log.warning(
                "%s; running without %s (not ready) and trying again in the background, "
                "at most every %.0f s",
                exc,
                adapter.name,
                self._cap,
            )
            task = asyncio.create_task(self._retry(adapter, exc), name=f"start-{adapter.name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return False
        self.started.append(adapter)
        return True

    async def start_all(self, adapters: Iterable[Adapter]) -> None:
        """:meth:`start` each of ``adapters`` in turn.

        Raises:
            ConfigError: as :meth:`start` (the adapters after it are not started).
        """
        for adapter in adapters:
            await self.start(adapter)

    async def _retry(self, adapter: Adapter, error: Exception) -> None:
        name = adapter.name
        attempt = 0
        while True:
            attempt += 1
            ceiling = min(self._cap, self._base * 2.0 ** (attempt - 1))
            wait = ceiling * self._rng.uniform(0.5, 1.0)
            self.waiting[name] = f"{error} (tried {attempt} time(s); next try in {wait:.0f} s)"
            await self._clock.sleep(wait)
            try:
                await self._enter(adapter)
            except asyncio.CancelledError:  # a shutdown mid-start: close what it opened
                with contextlib.suppress(Exception):
                    await adapter.stop()
                raise
            except TransientError as exc:
                error = exc
                log.info("%s still not reachable (try %d): %s", name, attempt + 1, exc)
                continue
            except Exception as exc:  # a refused token, or a bug: no retry mends it
                self.waiting[name] = f"refused: {exc}"
                log.error("%s cannot start: %s; stopping", name, exc)
                self._on_fatal(exc)
                return
            break
        del self.waiting[name]
        self.started.append(adapter)
        log.info("%s is reachable again: started after %d retries", name, attempt)
        try:
            await self._on_started(adapter)
        except Exception:
            log.exception("after starting %s", name)

    async def stop(self) -> None:
        """Cancel the retries still waiting (on shutdown) and wait for them to unwind."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
