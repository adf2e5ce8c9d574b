"""An asyncio double served from a thread of the test process, for tests whose bot is a real
subprocess (``digest-bot run``) that they kill: the double outlives the process, and the test
reads the double's state directly, on the double's own loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

D = TypeVar("D", bound=AbstractAsyncContextManager[Any])
R = TypeVar("R")

#: seconds a call into the double's loop may take
CALL_SECONDS = 10.0


class Served(Generic[D]):
    """A double entered on its own loop in a thread; :meth:`call` and :meth:`run` reach it."""

    def __init__(self, double: D, loop: asyncio.AbstractEventLoop) -> None:
        self.double = double
        self._loop = loop

    def call(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` run on the double's loop (a consistent read of its state)."""

        async def run() -> R:
            return fn(*args)

        return self.run(run())

    def run(self, coro: Coroutine[Any, Any, R], timeout: float = CALL_SECONDS) -> R:
        """Run ``coro`` on the double's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)


@contextlib.contextmanager
def served(double: D, name: str = "double") -> Iterator[Served[D]]:
    """Enter ``double`` on a new event loop in a daemon thread; exit it (and stop the loop)
    when the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    handle = Served(double, loop)
    try:
        handle.run(double.__aenter__())
        try:
            yield handle
        finally:
            handle.run(double.__aexit__(None, None, None))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
