"""Fixtures shared by every test folder: the throwaway PostgreSQL server (see tests/pg.py)."""

import logging
from collections.abc import Iterator

import pytest

from bots import logs
from tests import bytecode, quick, ramdisk, tls, workers, xdist_groups  # noqa: F401 - quick: make check's Hypothesis profile
from tests.pg import pg_server, pg_url

__all__ = ["no_settle_wait", "pg_server", "pg_url", "undo_logging_setup"]

#: the setting that makes a scheduled post wait for a file saved moments ago
SETTLE_ENV = "DIGEST_BOT_SCHEDULE__SETTLE_SECONDS"


def pytest_configure(config: pytest.Config) -> None:
    """The controller (not an xdist worker) puts the run's temporary files in RAM
    (tests/ramdisk.py) and compiles the checkout's bytecode for all of them
    (tests/bytecode.py) and lets HTTP clients read the system's CA folder lazily
    (tests/tls.py). Every process honours ``xdist_group`` (tests/xdist_groups.py). A worker
    collects garbage less often and ends without finalizing (tests/workers.py)."""
    config.pluginmanager.register(xdist_groups, "digest-bot-xdist-groups")
    if hasattr(config, "workerinput"):
        workers.tune(config)
        config.pluginmanager.register(workers, "digest-bot-workers")
    else:
        ramdisk.use_ram_for_temporary_files()
        tls.use_system_ca_folder()
        bytecode.precompile(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on a real PostgreSQL server (``pg_url``/``pg_server``, or the ``postgresql``
    side of ``ledger_url``) is ``slow``: ``make check`` (``-m "not slow"``) leaves it out, so
    the inner loop starts no server."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        on_server = "pg_url" in names or "pg_server" in names
        if callspec is not None and "postgresql" in callspec.params.values():
            on_server = True
        if on_server:
            item.add_marker(pytest.mark.slow)
    _long_tests_first(items)


def _long_tests_first(items: list[pytest.Item]) -> None:
    """The ``slow`` tests (real processes, servers, a browser) run first, then the property
    tests (Hypothesis: 2-13 s each), then the rest, each kind in collection order: xdist
    hands tests out in this order, so the long ones start while the short ones are left to
    even out the workers' ends (in collection order a browser module was often the last,
    alone on one worker; with whole modules first, the rendering modules' property tests
    kept one worker busy 7 s after the others had finished)."""

    def kind(item: pytest.Item) -> int:
        if item.get_closest_marker("slow") is not None:
            return 0
        return 1 if getattr(getattr(item, "obj", None), "is_hypothesis_test", False) else 2

    items.sort(key=kind)  # (a stable sort)


@pytest.fixture(autouse=True)
def no_settle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests write their issue files moments before they post them: without this, every
    scheduled post would first wait ``[schedule] settle_seconds`` (10 s) for the file to
    settle, and a test on a clock that only moves when told would wait forever. The tests of
    the settle (tests/bots/telegram/test_half_saved.py) take it off again."""
    monkeypatch.setenv(SETTLE_ENV, "0")


@pytest.fixture(autouse=True)
def undo_logging_setup() -> Iterator[None]:
    """Undo what a test's in-process ``digest-bot`` (``bots.cli.main``) set up for logging.

    :func:`bots.logs.setup_logging` puts a root handler on the ``sys.stderr`` of the moment,
    which in a test is pytest's capture: closed after the test, so every later record of the
    worker (an aiosqlite thread's, a library's) printed "--- Logging error ---" with an
    "I/O operation on closed file" traceback, and at the set-up's level. The handler goes,
    and the root's and the libraries' levels come back.
    """
    root = logging.getLogger()
    level = root.level
    names = logs.LIBRARY_LOGGERS + logs.QUIET_LOGGERS
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    for handler in [h for h in root.handlers if isinstance(h, logs._Handler)]:
        root.removeHandler(handler)
    root.setLevel(level)
    for name, was in levels.items():
        logging.getLogger(name).setLevel(was)
