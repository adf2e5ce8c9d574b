"""The checkout's bytecode, compiled once at the start of a test run.

Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's shells set it), no interpreter writes
``__pycache__``: every xdist worker compiled the bot's modules and pytest rewrote the asserts of
every test module again (about 4 s of each worker's collection), and every process a test
exec'd compiled the bot from source. :func:`precompile` (run by the controller, before any
worker starts) writes what they read: the modules' ``.pyc`` (``compileall``, which only
rewrites the stale ones) and pytest's cache of rewritten test modules, under the same names
pytest uses itself. ``__pycache__`` folders are ignored by git. In a fresh clone the rewriting
took 3.5 s of one core while the workers waited to start; it is shared out over every core
(forked processes, which inherit the configuration).
"""

from __future__ import annotations

import compileall
import contextlib
import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the folders of the bot's own modules, and of the tests' helpers
PACKAGES = ("digest_core", "bots", "tests", "benchmarks")


def precompile(config: pytest.Config) -> None:
    """Compile the checkout's modules and pytest's rewritten test modules, where stale."""
    for name in PACKAGES:
        if (ROOT / name).is_dir():
            compileall.compile_dir(ROOT / name, quiet=2, workers=0)
    # pytest's own cache of test modules with their asserts rewritten (private, so: best
    # effort; a pytest that changed it only rewrites them in each worker again)
    with contextlib.suppress(ImportError, AttributeError, KeyError):
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        tests = [
            source
            for source in sorted(ROOT.glob("tests/**/*.py"))
            if source.name.startswith("test_") or source.name == "conftest.py"
        ]
        # and the installed pytest plugins this process rewrote (pytest-asyncio, xdist,
        # pytest-timeout, Hypothesis' plugin: 114 modules, about a second of every worker's
        # start), which nobody caches where bytecode is not written
        hook = next(
            (h for h in sys.meta_path if isinstance(h, rewrite.AssertionRewritingHook)), None
        )
        plugins = sorted(set(getattr(hook, "_rewritten_names", {}).values()) - set(tests))
        stale = [
            source
            for source in [*tests, *plugins]
            if rewrite._read_pyc(source, _rewritten(source), state.trace) is None
        ]
        cores = min(os.cpu_count() or 1, len(stale) // 20)
        if cores > 1 and "fork" in multiprocessing.get_all_start_methods():
            global _config
            _config = config
            try:
                context = multiprocessing.get_context("fork")
                with ProcessPoolExecutor(cores, mp_context=context) as pool:
                    list(pool.map(_rewrite, [stale[i::cores] for i in range(cores)]))
            finally:
                _config = None
        else:
            _rewrite(stale, config)


#: the run's configuration, for the forked processes of :func:`precompile`
_config: pytest.Config | None = None


def _rewritten(source: Path) -> Path:
    from _pytest.assertion import rewrite

    return rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)


def _rewrite(sources: Sequence[Path], config: pytest.Config | None = None) -> None:
    """Rewrite the asserts of ``sources`` and write pytest's cached bytecode of each."""
    from _pytest.assertion import rewrite

    config = config or _config
    assert config is not None
    state = config.stash[rewrite.assertstate_key]
    for source in sources:
        source_hash, code = rewrite._rewrite_test(source, config)
        pyc = _rewritten(source)
        rewrite.try_makedirs(pyc.parent)
        rewrite._write_pyc(state, code, source_hash, pyc)
