"""Run from another folder, the bot says loudly which default ledger and archive it uses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

ROOT = Path(__file__).resolve().parents[2]


def run_cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    return forkserver.run(
        [sys.executable, "-m", "bots.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip


def test_no_config_file_warns_naming_the_default_ledger_and_the_fix(tmp_path: Path) -> None:
    out = run_cli(tmp_path, "status")
    # exactly one such warning (other warnings, e.g. a slow ledger under load, may come too)
    [warning] = [line for line in out.stderr.splitlines() if "no config file" in line]
    assert "WARNING" in warning
    assert f"no config file config/digest-bot.toml in {tmp_path}" in warning
    assert str(tmp_path / "var" / "digest-bot.db") in warning
    assert "--config" in warning and "DIGEST_BOT_DATABASE_URL" in warning


def test_no_warning_with_a_config_file_or_paths_from_the_environment(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"  # the repository's config file, the tests' sample issues
    (checkout / "config").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "digest-bot.toml", checkout / "config")
    shutil.copytree(SAMPLE_ARCHIVE, checkout / "archive")
    from_repo = run_cli(checkout, "archive", "list")
    assert from_repo.returncode == 0 and "WARNING" not in from_repo.stderr
    env = {
        "DIGEST_BOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'l.db'}",
        "DIGEST_BOT_ARCHIVE_DIR": str(SAMPLE_ARCHIVE),
    }
    from_env = run_cli(tmp_path, "archive", "list", **env)
    assert from_env.returncode == 0 and "WARNING" not in from_env.stderr
    # only the archive from the environment: the ledger default is still named
    partial = run_cli(tmp_path, "archive", "list", DIGEST_BOT_ARCHIVE_DIR=str(SAMPLE_ARCHIVE))
    assert "DIGEST_BOT_DATABASE_URL" in partial.stderr
    assert "DIGEST_BOT_ARCHIVE_DIR" not in partial.stderr
