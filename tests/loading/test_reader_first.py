"""Readers first: the search index's background work steps aside while a reader is served
(digest_core.archive.priority), and what a restart reads of the index is its small table."""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from digest_core.archive import Archive
from digest_core.archive import priority as priority_module
from digest_core.archive.priority import ReaderFirst
from digest_core.commands import Request, Status
from digest_core.commands.dispatch import Commands
from digest_core.testing import ManualClock, build_index

DATA = Path(__file__).parent / "data"


def _waiting(gate: ReaderFirst) -> int:
    """Threads waiting in the gate's condition (what a step that steps aside does)."""
    return len(gate._idle._cond._waiters)  # type: ignore[attr-defined]


def _until(predicate: object, timeout: float = 10.0) -> None:
    """Wait for ``predicate()`` (a condition on another thread's state), failing after
    ``timeout`` seconds."""
    done = threading.Event()
    for _ in range(int(timeout / 0.005)):
        if predicate():  # type: ignore[operator]
            return
        done.wait(0.005)
    raise AssertionError("the condition never held")


def test_background_work_waits_while_a_reader_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority_module, "MAX_WAIT", 30.0)
    gate = ReaderFirst()
    stepped = threading.Event()

    def background() -> None:
        with gate.background():
            gate.step()
        stepped.set()

    with gate.serving():
        assert gate.readers == 1
        worker = threading.Thread(target=background)
        worker.start()
        _until(lambda: _waiting(gate) == 1)  # the step is waiting for the reader
        assert not stepped.is_set()
    worker.join(10)
    assert stepped.is_set() and gate.readers == 0


def test_a_step_waits_at_most_max_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A steady stream of readers slows background work but never stops it."""
    monkeypatch.setattr(priority_module, "MAX_WAIT", 0.01)
    gate = ReaderFirst()
    with gate.serving(), gate.background():
        for _ in range(3):
            gate.step()  # returns after MAX_WAIT although the reader is still served
        assert gate.readers == 1


def test_steps_outside_background_work_never_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's own call that brings a few files into the index (or a CLI building it) is not
    background work: its steps return at once even while readers (itself) are served."""
    monkeypatch.setattr(priority_module, "MAX_WAIT", 30.0)
    gate = ReaderFirst()
    with gate.serving(), gate.serving():
        assert gate.readers == 2
        gate.step()
        assert _waiting(gate) == 0
    assert gate.readers == 0


async def test_a_command_is_a_reader_served_while_it_reads_the_archive(tmp_path: Path) -> None:
    """Every command (and what it runs in worker threads) counts as a reader being served, so
    the index's background work steps aside for all of it, whatever it reads."""
    folder = tmp_path / "archive"
    shutil.copytree(DATA, folder, ignore=lambda _d, names: [n for n in names if "2026-" not in n])
    archive = Archive(folder, index=False)
    latest = archive.latest().date
    clock = ManualClock(dt.datetime.combine(latest, dt.time(12), tzinfo=dt.UTC))
    commands = Commands(archive, clock, dt.UTC)
    seen: list[int] = []
    original = archive._issue

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(archive.priority.readers)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    archive._issue = spy  # type: ignore[method-assign]
    for command in ("today", "headline", "classic"):
        reply = await commands.handle(Request(command))
        assert reply.status is Status.OK, (command, reply)
    assert seen and all(n >= 1 for n in seen)
    assert archive.priority.readers == 0


def test_an_index_of_the_older_schema_is_made_afresh(tmp_path: Path) -> None:
    """Schema 3 keeps the issues' blobs out of the table a restart reads."""
    folder = tmp_path / "archive"
    shutil.copytree(DATA, folder, ignore=lambda _d, names: [n for n in names if "2026-" not in n])
    path = tmp_path / "index.sqlite"
    archive = Archive(folder, index=path)
    assert build_index(archive) > 0
    word = archive.latest().headline.title[:2]
    archive.close()
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(files)")]
        assert "issue" not in columns
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    again = Archive(folder, index=path)
    assert build_index(again) > 0  # every file read again: the old index was not trusted
    assert again.search(word)
    assert again.on(dt.date.fromisoformat(next(iter(sorted(folder.iterdir()))).name[:10]))
    again.close()


def _archive(tmp_path: Path) -> tuple[Path, list[dt.date]]:
    folder = tmp_path / "archive"
    shutil.copytree(DATA, folder, ignore=lambda _d, names: [n for n in names if "2026-" not in n])
    dates = sorted(dt.date.fromisoformat(p.name[:10]) for p in folder.iterdir())
    return folder, dates


def test_while_the_folder_is_first_listed_a_reader_is_served_by_name(tmp_path: Path) -> None:
    """A bot just started lists ten years of files in the background; meanwhile /today, the
    newest issue and the neighbours of a day are found by their names alone (the listing's
    lock is held here as the background thread holds it)."""
    folder, dates = _archive(tmp_path)
    archive = Archive(folder, index=False)
    day = dates[2]
    with archive._refreshing:  # the first listing, under way in another thread
        assert archive.latest(on_or_before=day).date == day  # the day's own file
        assert archive.latest(on_or_before=day + dt.timedelta(days=10)).date == dates[-1]
        assert archive.latest().date == dates[-1]
        older, newer = archive.entry_dates_around(day)
        assert (next(older), next(newer)) == (dates[1], dates[3])
        assert archive._dir_key is None  # nothing above waited for the listing
    assert archive.latest(on_or_before=day).date == day  # the same once it is listed


def test_a_broken_file_of_the_day_is_left_to_the_listing(tmp_path: Path) -> None:
    """The day's file looked up by name is served only when it is a good issue; otherwise the
    listing decides (here: the newest good issue before it)."""
    folder, dates = _archive(tmp_path)
    day = dates[2]
    broken = next(p for p in folder.iterdir() if p.name.startswith(day.isoformat()))
    broken.write_text("AI 技术日报\n重点\n只有标题\n", encoding="utf-8")
    archive = Archive(folder, index=False)
    found: list[dt.date] = []
    with archive._refreshing:
        worker = threading.Thread(
            target=lambda: found.append(archive.latest(on_or_before=day).date)
        )
        worker.start()
        _until(lambda: bool(archive._loaded))  # the day's file was read by name: broken
        assert not found  # and the reader now waits for the listing
    worker.join(10)
    assert found == [dates[1]]
