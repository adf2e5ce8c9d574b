"""tests/xdist_groups.py: the tests of one ``xdist_group`` run on one worker, as
``--dist loadgroup`` promises, on the pytest and pytest-xdist this project locks."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, os
from pathlib import Path

import pytest

OUT = Path(__file__).parent / "workers"


def _record(name):
    OUT.mkdir(exist_ok=True)
    (OUT / name).write_text(os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    _record(f"grouped-{n}")


@pytest.mark.parametrize("n", range(6))
def test_free(n):
    _record(f"free-{n}")
"""


def _workers(tmp_path: Path, *plugin: str) -> dict[str, str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    # only xdist and the plugin under test: the other plugins' start-up cost seconds a worker
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *plugin,
            "-n",
            "2",
            "--dist",
            "loadgroup",
            str(tmp_path / "test_probe.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {p.name: p.read_text() for p in (tmp_path / "workers").iterdir()}


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    seen = _workers(tmp_path, "-p", "xdist", "-p", "tests.xdist_groups")
    grouped = {w for name, w in seen.items() if name.startswith("grouped-")}
    assert len([n for n in seen if n.startswith("grouped-")]) == 6
    assert len(grouped) == 1, seen
    assert len([n for n in seen if n.startswith("free-")]) == 6
    print(json.dumps(seen))
