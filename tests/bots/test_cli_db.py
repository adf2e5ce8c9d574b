"""`digest-bot db`: upgrade, backup, status, prune, as a user runs them (real subprocesses)."""

from __future__ import annotations

import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from digest_core.clock import SystemClock
from digest_core.delivery import SCHEMA_VERSION, Ledger
from digest_core.platform import Target, TargetKind
from tests import forkserver
from tests.bots.test_cli import ROOT, cli_env
from tests.delivery.test_migrations import old_ledger
from tests.pg import PgServer
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "bots.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**cli_env(), **env},
        timeout=60,
    )


def workdir_with(tmp_path: Path, extra_config: str = "") -> Path:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    (tmp_path / "config").mkdir()
    text = (ROOT / "config" / "digest-bot.toml").read_text(encoding="utf-8")
    (tmp_path / "config" / "digest-bot.toml").write_text(text + extra_config, encoding="utf-8")
    return tmp_path


def test_backup_copies_the_ledger_while_another_connection_writes_and_restores(
    tmp_path: Path,
) -> None:
    work = workdir_with(tmp_path)
    assert cli(work, "post", "--date", "2026-11-26").returncode == 0
    db = work / "var" / "digest-bot.db"
    writer = sqlite3.connect(db, isolation_level=None)  # the bot, in the middle of a write
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM parts")
    try:
        done = cli(work, "db", "backup", "backup.db")
    finally:
        writer.execute("COMMIT")
        writer.close()
    assert done.returncode == 0, done.stderr
    assert "backed up var/digest-bot.db to backup.db" in done.stdout
    assert "remove var/digest-bot.db-wal" in done.stdout
    with sqlite3.connect(work / "backup.db") as copy:  # the snapshot before the delete
        assert copy.execute("SELECT count(*) FROM parts").fetchone()[0] == 1
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    again = cli(work, "db", "backup", "backup.db")
    assert again.returncode == 1
    assert again.stderr.strip() == (
        "digest-bot: backup.db exists: name a new file for the backup, or remove it"
    )
    # restore as the backup's message says
    for name in ("digest-bot.db", "digest-bot.db-wal", "digest-bot.db-shm"):
        (work / "var" / name).unlink(missing_ok=True)
    shutil.copy(work / "backup.db", db)
    status = cli(work, "status")
    assert status.returncode == 0, status.stderr
    assert "stdout: 最近 / last 2026-11-26" in status.stdout


def test_without_auto_upgrade_an_old_ledger_waits_for_db_upgrade(tmp_path: Path) -> None:
    work = workdir_with(tmp_path, "\n[ledger]\nauto_upgrade = false\n")
    (work / "var").mkdir()
    old_ledger(work / "var" / "digest-bot.db", 4)
    refused = cli(work, "status")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "digest-bot: ledger var/digest-bot.db is at schema version 4 (revision 0004), from "
        f"before Alembic; this release needs version {SCHEMA_VERSION}: back it up and run "
        "`digest-bot db upgrade` (or set [ledger] auto_upgrade = true)"
    ]
    before = cli(work, "db", "status")
    assert before.returncode == 1 and "run `digest-bot db upgrade`" in before.stdout
    upgraded = cli(work, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    upgrade_line = (
        f"schema version 4 (revision 0004), from before Alembic -> schema version {SCHEMA_VERSION}"
    )
    assert upgrade_line in upgraded.stdout
    assert cli(work, "db", "status").stdout.splitlines()[-1] == "up to date"
    assert cli(work, "status").returncode == 0


async def test_backup_of_a_postgresql_ledger_prints_a_pg_dump_that_works(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    url = pg_url.replace("postgres@", "postgres:hunter2@")  # trust auth: any password
    async with Ledger.open(url, clock=SystemClock()) as ledger:
        assert await ledger.subscribe("fake", "42")
    work = workdir_with(tmp_path)
    done = cli(work, "db", "backup", str(tmp_path / "l.dump"), DIGEST_BOT_DATABASE_URL=url)
    assert done.returncode == 0, done.stderr
    assert "hunter2" not in done.stdout + done.stderr
    assert "~/.pgpass or PGPASSWORD" in done.stdout
    [dump] = [line for line in done.stdout.splitlines() if line.startswith("pg_dump ")]
    [restore] = [line for line in done.stdout.splitlines() if line.startswith("# pg_restore ")]
    argv = shlex.split(dump)
    subprocess.run([str(pg_server.bin_dir / "pg_dump"), *argv[1:]], check=True)  # noqa: ASYNC221
    # restored into another database, it is the same ledger
    other = pg_server.create_database()
    argv = [
        a if not a.startswith("--dbname=") else f"--dbname={other}"
        for a in shlex.split(restore)[1:]
    ]
    subprocess.run([str(pg_server.bin_dir / "pg_restore"), *argv[1:]], check=True)  # noqa: ASYNC221
    async with Ledger.open(pg_server.url(other), clock=SystemClock()) as copy:
        assert await copy.subscribers("fake") == [Target("fake", "42", TargetKind.PRIVATE)]
