"""Starting the platforms of `run`: one its server keeps out (unreachable) is retried meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable

from digest_core.clock import Clock
from digest_core.errors import TransientError
from digest_core.port import Adapter, Port

log = logging.getLogger(__name__)

#: the first retry of a platform that could not be reached comes after about this many seconds
RETRY_BASE_SECONDS = 2.0
#: and the tries never get further apart than this
RETRY_CAP_SECONDS = 60.0


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

    async def start(self, adapter: Adapter) -> bool:
        """Start ``adapter`` now: True if it started, False if it is retried in the background
        (an adapter already started, or already being retried, is left as it is).

        Raises:
            ConfigError: the platform refused this configuration (a revoked token).
        """
        if adapter in self.started or adapter.name in self.waiting:
            return adapter in self.started  # started, or its retries are under way
        try:
            await adapter.start(self._port)
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
                await adapter.start(self._port)
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
