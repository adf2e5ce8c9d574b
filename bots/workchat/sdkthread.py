"""An SDK's receiving loop in a thread of its own, and the way back to the bot's event loop.

The official receiving clients of Feishu (lark-oapi's ``ws.Client``) and DingTalk
(dingtalk-stream's ``DingTalkStreamClient``) are not made to share an event loop: lark-oapi
1.7.5 binds a module-level loop at import and drives it with ``run_until_complete``
(larksuite/oapi-sdk-python issues #119, #133), and both fetch their connection's address
with blocking ``requests.post`` calls without a timeout, inside their coroutines. Each runs
here on its own loop in its own thread, so nothing it does can stall the bot's loop; what it
receives is handed to the bot's loop (:class:`MainLoop`), where every command runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ClassVar, TypeVar

from digest_core.port import ConfigError, TransientError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: how long the first connection may take
CONNECT_SECONDS = 30.0
#: how many times a stop cancels what the SDK still runs (a task may catch one cancellation)
CANCEL_ROUNDS = 5


class MainLoop:
    """The bot's event loop as seen from an SDK's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def submit(self, coro: Coroutine[Any, Any, object], *, what: str) -> None:
        """Run ``coro`` on the bot's loop without waiting for it (its failure is logged)."""

        def done(future: concurrent.futures.Future[object]) -> None:
            if not future.cancelled() and future.exception() is not None:
                log.error("%s failed", what, exc_info=future.exception())

        asyncio.run_coroutine_threadsafe(coro, self.loop).add_done_callback(done)

    def call(self, coro: Coroutine[Any, Any, T], *, timeout: float) -> T:
        """Run ``coro`` on the bot's loop and wait for its result (from another thread).

        Raises:
            TimeoutError: it did not finish within ``timeout`` seconds (it goes on running).
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no result within {timeout:g} s") from None


class SdkThread:
    """A thread running its own event loop for one SDK client.

    ``setup`` runs first on the thread's loop (connect; its exception is :meth:`start`'s);
    then the loop runs until :meth:`stop`, which runs ``teardown`` there (disconnect) and
    cancels whatever the SDK left running.
    """

    def __init__(
        self,
        name: str,
        *,
        setup: Callable[[asyncio.AbstractEventLoop], Awaitable[None]],
        teardown: Callable[[], Awaitable[None]],
    ) -> None:
        self.name = name
        self._setup, self._teardown = setup, teardown
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def start(self, *, within: float) -> None:
        """Start the thread and wait until ``setup`` is done.

        Raises:
            whatever ``setup`` raised (the thread has ended then);
            TimeoutError: ``setup`` took longer than ``within`` seconds (it is stopped).
        """
        self._ready = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._ready), within)
        except TimeoutError:
            await self.stop(within=2.0)
            raise

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            try:
                loop.run_until_complete(self._setup(loop))
            except BaseException as exc:
                if not self._ready.done():
                    self._ready.set_exception(exc)
                return
            if not self._ready.done():
                self._ready.set_result(None)
            loop.run_forever()
            loop.run_until_complete(self._end())
        finally:
            self._loop = None
            loop.close()

    async def _end(self) -> None:
        """Cancel what the SDK runs (its receive and ping loops, which would reconnect), then
        ``teardown`` (close the connection)."""
        pending = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
        for _ in range(CANCEL_ROUNDS):  # dingtalk-stream's loop sleeps 10 s on a first cancel
            if not pending:
                break
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.2)
        try:
            await asyncio.wait_for(self._teardown(), 2.0)
        except Exception as exc:  # a stop must finish
            log.info("%s: disconnecting: %s", self.name, exc)

    async def stop(self, *, within: float = 5.0) -> None:
        """End the loop (``teardown`` first) and wait up to ``within`` s for the thread."""
        loop, thread = self._loop, self._thread
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            await asyncio.to_thread(thread.join, within)
            if thread.is_alive():
                log.warning("%s: the SDK's thread did not end within %g s", self.name, within)
        self._thread = None


class SdkConnection:
    """An SDK's long-lived connection on an :class:`SdkThread` of its own (Feishu's long
    connection, DingTalk's stream): a platform's sets it up (``_setup``, on the thread's loop,
    connected once it returns) and tears it down (``_teardown``); its ``_client`` is the
    SDK's client once set up."""

    #: the platform, and what its errors call the connection ("the stream")
    platform: ClassVar[str]
    what: ClassVar[str]

    def __init__(self, thread: str) -> None:
        self._client: Any = None
        self._thread = SdkThread(thread, setup=self._setup, teardown=self._teardown)

    async def start(self, main: asyncio.AbstractEventLoop) -> None:
        """Connect (the first time here; later reconnections are the SDK's); what it
        receives goes to ``main``.

        Raises:
            ConfigError: the platform refused the app's credentials.
            TransientError: the platform could not be reached.
        """
        self._main = MainLoop(main)
        try:
            await self._thread.start(within=CONNECT_SECONDS)
        except ConfigError:
            raise
        except Exception as exc:
            raise TransientError(
                f"{self.what} could not be opened: {type(exc).__name__}: {exc}",
                platform=self.platform,
            ) from None

    async def _setup(self, loop: asyncio.AbstractEventLoop) -> None:
        raise NotImplementedError

    async def _teardown(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        await self._thread.stop()
        self._client = None
