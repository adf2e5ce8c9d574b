"""A ledger deleted or replaced under the running bot, refused at the next start, and ledgers
that cannot be opened (corrupt, truncated, unwritable): one clear line each."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from digest_core.clock import SystemClock
from digest_core.delivery import DeliveryEngine, Ledger
from digest_core.delivery.watchdog import LedgerWatchdog
from digest_core.errors import LedgerError, LedgerLost
from digest_core.platform import PlatformLimits, Rate
from digest_core.testing import FakePlatform, make_issue, make_messages, make_targets
from tests import forkserver
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

ROOT = Path(__file__).resolve().parents[2]


def url_of(db: Path) -> str:
    return f"sqlite+aiosqlite:///{db}"


async def make_ledger(db: Path) -> str:
    """A ledger at ``db`` with a delivery recorded; returns its id."""
    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:
        platform = FakePlatform(SystemClock(), limits=PlatformLimits(Rate(1000.0, 100), {}))
        engine = DeliveryEngine(ledger, clock=SystemClock())
        await engine.deliver(make_issue().ref, platform, make_messages(2), make_targets(50))
        assert ledger.ledger_id is not None
        return ledger.ledger_id


def backup(db: Path, to: Path) -> None:
    with sqlite3.connect(db) as src, sqlite3.connect(to) as dst:
        src.backup(dst)


# ---------------------------------------------------------------- while running (in process)


async def test_deleting_the_file_stops_the_delivery_at_once(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    clock = SystemClock()
    platform = FakePlatform(clock, limits=PlatformLimits(Rate(1000.0, 100), {}), latency=0.01)
    heard: list[LedgerLost] = []

    async def on_lost(error: LedgerLost) -> None:
        heard.append(error)

    async with Ledger.open(url_of(db), clock=clock) as ledger:
        engine = DeliveryEngine(ledger, clock=clock, max_in_flight=4)
        watchdog = LedgerWatchdog(ledger, clock=clock, shown="", on_lost=on_lost)
        assert await watchdog.check() is None  # the same file: nothing to say
        post = asyncio.create_task(
            engine.deliver(make_issue().ref, platform, make_messages(3), make_targets(100))
        )
        for _ in range(6000):
            if len(platform.sent) >= 30:
                break
            await asyncio.sleep(0.005)
        os.remove(db)
        lost = await watchdog.check()
        at_loss = len(platform.sent)
        assert isinstance(lost, LedgerLost) and heard == [lost]
        with pytest.raises(LedgerLost):
            await post
        # only sends already under way finished; nothing new was claimed, so nothing sent
        assert len(platform.sent) - at_loss <= engine.max_in_flight
        assert str(db) in str(lost) and "deleted" in str(lost) and "backup" in str(lost)
        with pytest.raises(LedgerLost):
            await ledger.claim(1)
        assert await watchdog.check() is lost and heard == [lost]  # said once
    # the dead log it left is set aside, so a backup copied to the path is not spoiled
    assert not (tmp_path / "l.db-wal").exists()


async def test_a_file_replaced_by_another_is_noticed(tmp_path: Path) -> None:
    db, other = tmp_path / "l.db", tmp_path / "other.db"
    await make_ledger(other)
    heard: list[LedgerLost] = []

    async def on_lost(error: LedgerLost) -> None:
        heard.append(error)

    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:
        watchdog = LedgerWatchdog(ledger, clock=SystemClock(), shown="", on_lost=on_lost)
        os.replace(other, db)
        lost = await watchdog.check()
    assert lost is not None and "replaced" in str(lost) and heard == [lost]


async def test_a_connection_opened_after_the_file_was_deleted_does_not_create_it_again(
    tmp_path: Path,
) -> None:
    """Once the ledger is open, a new connection of its pool (one more at once, or one
    opened again) to a deleted file fails instead of leaving a new, empty database there:
    the next start says the ledger is missing, and nothing sits where the backup goes."""
    db = tmp_path / "l.db"
    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:
        engine = ledger._state.engine
        await engine.dispose()  # the pool's connections go: the next one is opened anew
        db.unlink()
        with pytest.raises(DBAPIError, match="unable to open database file"):
            async with engine.connect() as conn:
                await conn.exec_driver_sql("SELECT 1")
        assert not db.exists()
        heard: list[LedgerLost] = []

        async def on_lost(error: LedgerLost) -> None:
            heard.append(error)

        watchdog = LedgerWatchdog(ledger, clock=SystemClock(), shown="", on_lost=on_lost)
        assert "deleted" in str(await watchdog.check()) and len(heard) == 1
    assert not db.exists()
    # while a ledger that does not exist yet is created by the first open, as ever
    async with Ledger.open(url_of(tmp_path / "new.db"), clock=SystemClock()):
        pass
    assert (tmp_path / "new.db").exists()


# ---------------------------------------------------------------- at start


async def test_a_start_on_a_missing_new_or_other_ledger_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    first = await make_ledger(db)
    assert (tmp_path / "l.db.marker").read_text().startswith(first)
    backup(db, tmp_path / "backup.db")
    db.unlink()

    with pytest.raises(LedgerError) as missing:
        async with Ledger.open(url_of(db), clock=SystemClock()):
            pass
    message = str(missing.value)
    assert "\n" not in message and "missing" in message
    assert str(db) in message and "l.db.marker" in message and "database_url" in message
    assert "copy your backup" in message and "--new-ledger" in message
    assert not db.exists()  # refusing created nothing

    db.touch()  # a new, empty database where the ledger was
    with pytest.raises(LedgerError, match="new, empty database"):
        async with Ledger.open(url_of(db), clock=SystemClock()):
            pass
    db.unlink()
    await make_ledger(tmp_path / "other.db")
    shutil.copy(tmp_path / "other.db", db)
    with pytest.raises(LedgerError, match="another ledger"):
        async with Ledger.open(url_of(db), clock=SystemClock()):
            pass

    shutil.copy(tmp_path / "backup.db", db)  # the restore the message asks for
    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:
        assert ledger.ledger_id == first
        assert len(await ledger.records()) == 100  # the history is back

    db.unlink()
    async with Ledger.open(url_of(db), clock=SystemClock(), new_ledger=True) as ledger:
        fresh = ledger.ledger_id
        assert fresh is not None and fresh != first
    assert (tmp_path / "l.db.marker").read_text().startswith(fresh)
    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:  # accepted from now on
        assert ledger.ledger_id == fresh


async def test_a_ledger_from_before_markers_gets_one(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    first = await make_ledger(db)
    (tmp_path / "l.db.marker").unlink()
    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:
        assert ledger.ledger_id == first
    assert (tmp_path / "l.db.marker").read_text().startswith(first)


# ---------------------------------------------------------------- files that cannot be opened


def corrupt(tmp_path: Path) -> Path:
    db = tmp_path / "l.db"
    db.write_bytes(os.urandom(16384))
    return db


def truncated(tmp_path: Path) -> Path:
    db = tmp_path / "l.db"
    asyncio.run(make_ledger(db))
    with db.open("r+b") as fh:
        fh.truncate(db.stat().st_size // 2)
    return db


def parent_is_a_file(tmp_path: Path) -> Path:
    (tmp_path / "var").write_text("not a folder")
    return tmp_path / "var" / "l.db"


def wal_is_a_folder(tmp_path: Path) -> Path:
    # an existing ledger whose log cannot be created: root cannot write it either
    db = tmp_path / "l.db"
    asyncio.run(make_ledger(db))
    (tmp_path / "l.db-wal").mkdir()
    return db


def database_is_a_folder(tmp_path: Path) -> Path:
    (tmp_path / "l.db").mkdir()
    return tmp_path / "l.db"


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (corrupt, "damaged"),
        (truncated, "damaged"),
        (parent_is_a_file, "is a file, not a folder"),
        (wal_is_a_folder, "cannot be opened for writing"),
        (database_is_a_folder, "is a folder, not a file"),
    ],
)
def test_a_ledger_that_cannot_be_opened_is_one_line(tmp_path: Path, fault, words: str) -> None:  # type: ignore[no-untyped-def]
    db = fault(tmp_path)

    async def open_it() -> None:
        async with Ledger.open(url_of(db), clock=SystemClock()):
            pass

    with pytest.raises(LedgerError) as caught:
        asyncio.run(open_it())
    message = str(caught.value)
    assert "\n" not in message and words in message
    assert str(db) in message and "(database_url)" in message
    assert "backup" in message or "writable" in message  # and the fix


@pytest.mark.skipif(shutil.which("chattr") is None, reason="no chattr here")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_immutable_ledger_is_refused_even_for_root(tmp_path: Path, what: str) -> None:
    folder = tmp_path / "var"
    folder.mkdir()
    db = folder / "l.db"
    asyncio.run(make_ledger(db))
    locked = db if what == "file" else folder
    if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode:
        pytest.skip("chattr +i is not allowed here")

    async def open_it() -> None:
        async with Ledger.open(url_of(db), clock=SystemClock()):
            pass

    try:
        with pytest.raises(LedgerError, match="read-only") as caught:
            asyncio.run(open_it())
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert str(db) in str(caught.value) and "writable" in str(caught.value)


@pytest.mark.skipif(shutil.which("chattr") is None, reason="no chattr here")
def test_an_unwritable_lock_folder_is_refused_at_open(tmp_path: Path) -> None:
    """The leases of an SQLite ledger are lock files in ``<db>.locks``: a folder where none
    can be made is found at open, in one line naming it, not as a leader that cannot lead."""
    folder = tmp_path / "var"
    folder.mkdir()
    db = folder / "l.db"
    asyncio.run(make_ledger(db))
    locks = folder / "l.db.locks"
    assert locks.is_dir()
    if subprocess.run(["chattr", "+i", str(locks)], capture_output=True).returncode:
        pytest.skip("chattr +i is not allowed here")

    async def open_it() -> None:
        async with Ledger.open(url_of(db), clock=SystemClock()):
            pass

    try:
        with pytest.raises(LedgerError) as caught:
            asyncio.run(open_it())
    finally:
        subprocess.run(["chattr", "-i", str(locks)], check=True)
    message = str(caught.value)
    assert "\n" not in message and str(locks) in message and "writable" in message


# ---------------------------------------------------------------- the command, for real


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    out["PYTHONPATH"] = str(ROOT)
    out.update(extra)
    return out


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "digest-bot.toml", tmp_path / "config" / "digest-bot.toml")
    return tmp_path


def start_bot(workdir: Path, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    out, err = workdir / "out.txt", workdir / "err.txt"
    with out.open("w") as out_file, err.open("w") as err_file:
        proc = forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run", *args],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out_file,
            stderr=err_file,
            text=True,
            env=env(DIGEST_BOT_DELIVERY__LEDGER_CHECK_SECONDS="0.2"),
        )
    deadline = time.monotonic() + 60
    while "digest-bot running on" not in err.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, err.read_text()
        time.sleep(0.05)
    return proc, out, err


def test_digest_bot_run_exits_when_its_ledger_is_deleted_and_refuses_to_restart(
    workdir: Path,
) -> None:
    db = workdir / "var" / "digest-bot.db"
    proc, out, err = start_bot(workdir)
    db.unlink()
    assert proc.wait(timeout=60) == 1
    last = err.read_text().strip().splitlines()[-1]
    assert last.startswith("digest-bot: ledger var/digest-bot.db (database_url) was deleted")
    assert "copy your backup to var/digest-bot.db" in last
    assert "⚠ alert" in out.read_text() and "was deleted" in out.read_text()  # the admins
    assert "Traceback" not in err.read_text()

    refused = forkserver.run(
        [sys.executable, "-m", "bots.cli", "run"],
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]  # one line
    assert "var/digest-bot.db (database_url) is missing" in refused.stderr
    assert "digest-bot run --new-ledger" in refused.stderr
    assert not db.exists()

    proc, _, err = start_bot(workdir, "--new-ledger")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, err.read_text()
    assert db.exists()


def test_digest_bot_run_exits_when_its_ledger_is_replaced(workdir: Path) -> None:
    db = workdir / "var" / "digest-bot.db"
    proc, _, err = start_bot(workdir)
    other = workdir / "other.db"
    sqlite3.connect(other).close()
    os.replace(other, db)
    assert proc.wait(timeout=60) == 1
    assert "was replaced while the bot ran" in err.read_text().strip().splitlines()[-1]


def test_digest_bot_status_on_a_corrupt_ledger_is_one_line(workdir: Path) -> None:
    (workdir / "var").mkdir()
    (workdir / "var" / "digest-bot.db").write_bytes(b"SQLite format 2\x00" + os.urandom(8000))
    out = forkserver.run(
        [sys.executable, "-m", "bots.cli", "status"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("digest-bot: ledger var/digest-bot.db (database_url) is damaged")


async def test_a_restored_backup_from_before_ledger_ids_is_accepted(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    first = await make_ledger(db)
    backup(db, tmp_path / "old.db")
    with sqlite3.connect(tmp_path / "old.db") as old:  # as a backup of version 2 is
        old.execute("DROP TABLE ledger_identity")
        old.execute("DROP TABLE alembic_version")  # from before Alembic, too
        old.execute("UPDATE schema_version SET version = 2")
    db.unlink()
    shutil.copy(tmp_path / "old.db", db)
    async with Ledger.open(url_of(db), clock=SystemClock()) as ledger:
        assert ledger.ledger_id == first  # it takes the marker's id
        assert len(await ledger.records()) == 100
