"""The archive's persistent search index: kept in a file (or in PostgreSQL) across restarts, brought
up to date per file, and finding exactly what a scan of the files finds."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from digest_core.archive import Archive, index_for
from digest_core.archive.fulltext import FEW_TERMS, SqliteFullText
from digest_core.archive.pgtrgm import PgFullText
from digest_core.loading import load_issue
from digest_core.models import Section
from digest_core.testing import build_index

DATA = Path(__file__).parent / "data"
D2, D3, D4, D5, D6 = (dt.date(2026, 3, d) for d in range(2, 7))
BROKEN = "AI 技术日报\n重点\n只有标题\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "archive"
    folder.mkdir()
    for path in DATA.iterdir():
        if path.name.startswith("2026-"):
            shutil.copy(path, folder / path.name)
    return folder


def rewrite(path: Path, text: str) -> None:
    """Rewrite ``path`` in place with its mtime moved forward (seen on coarse clocks too)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def every_word(root: Path) -> list[str]:
    """Substrings of one to four characters from every piece of every issue, and a few misses."""
    words = {"量子纠缠", "推理训练", "zq", "丁", "甲乙丙", "ALL REDUCE", "x", "e", "E", "@everyone"}
    for path in sorted(root.iterdir()):
        issue = load_issue(path)
        for _, item in issue.items():
            for piece in item.text_pieces()[:2]:
                for size in (1, 2, 3, 4):
                    words.update(piece[i : i + size] for i in range(0, len(piece) - size, 7))
    return sorted(w for w in words if w.strip())


@pytest.mark.slow  # over 0.25 s: left out of make check
def test_every_word_is_found_as_a_scan_finds_it(root: Path, tmp_path: Path) -> None:
    indexed = Archive(root, index=tmp_path / "index.sqlite")
    scanned = Archive(root, index=False)
    words = every_word(root)
    assert len(words) > 300
    build_index(indexed)
    with sqlite3.connect(tmp_path / "index.sqlite") as db:
        starting = {
            w: db.execute("SELECT count(*) FROM grams_terms WHERE substr(term, 1, 1) = ?", (w,))
            for w in words
            if len(w) == 1
        }
        common = [w for w, cursor in starting.items() if cursor.fetchone()[0] > FEW_TERMS]
    assert "e" in common  # so both ways of answering a short word are compared
    for word in words:
        assert indexed.search(word, limit=500) == scanned.search(word, limit=500), word
        assert indexed.search(word, limit=3) == scanned.search(word, limit=3), word
        for day in (D2, D6):
            assert indexed.hits_on(day, word) == scanned.hits_on(day, word), (word, day)


def test_a_restart_reads_nothing_and_a_changed_file_is_read_alone(
    root: Path, tmp_path: Path
) -> None:
    path = tmp_path / "state" / "index.sqlite"
    first = Archive(root, index=path)
    assert build_index(first) == 5
    first.close()
    again = Archive(root, index=path)
    assert build_index(again) == 0  # a restart: every file is as it was indexed
    assert [h.date for h in again.search("稀疏")] == [D2, D2]
    rewrite(root / "2026-03-04.txt", (root / "2026-03-04.txt").read_text("utf-8").replace(
        "推理服务：批处理越大", "斑马鱼服务：批处理越大"))  # fmt: skip
    again.close()
    third = Archive(root, index=path)
    assert build_index(third) == 1
    assert [(h.date, h.section) for h in third.search("斑马鱼")] == [(D4, Section.HEADLINE)]
    os.utime(root / "2026-03-05.json")  # touched, not changed: the key moves, the rows stay
    third.refresh(full=True)
    assert build_index(third) == 1
    assert third.search("斑马鱼") == Archive(root, index=False).search("斑马鱼")


def test_a_new_issue_is_searchable_at_once_and_a_removed_one_is_gone(
    root: Path, tmp_path: Path
) -> None:
    archive = Archive(root, index=tmp_path / "index.sqlite", restat_seconds=0)
    assert build_index(archive) == 5
    text = (
        (root / "2026-03-04.txt").read_text("utf-8").replace("推理服务：批处理越大", "斑马鱼：越大")
    )
    (root / "2026-03-07.txt").write_text(text, encoding="utf-8")
    assert [h.date for h in archive.search("斑马鱼")] == [dt.date(2026, 3, 7)]
    assert [h.date for h in archive.search("斑马")] == [dt.date(2026, 3, 7)]
    (root / "2026-03-07.txt").unlink()
    assert archive.search("斑马鱼") == []
    assert archive.search("斑马") == []
    assert build_index(Archive(root, index=tmp_path / "index.sqlite")) == 0


def test_the_last_good_version_is_kept_across_a_restart(root: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    first = Archive(root, index=path)
    build_index(first)
    good = first.on(D2)
    first.close()
    rewrite(root / "2026-03-02.txt", BROKEN)  # broken while the bot was down
    again = Archive(root, index=path)
    build_index(again)
    assert again.on(D2) == good  # the same revision, from the index
    assert [h.date for h in again.search("稀疏")] == [D2, D2]
    assert any("broken, serving the last good version" in e.describe() for e in again.list())


def test_an_index_of_another_folder_or_an_unreadable_one_is_made_afresh(
    root: Path, tmp_path: Path
) -> None:
    path = tmp_path / "index.sqlite"
    build_index(Archive(root, index=path))
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(root / "2026-03-04.txt", other / "2026-03-04.txt")
    archive = Archive(other, index=path)
    assert build_index(archive) == 1
    assert [h.date for h in archive.search("稀疏")] == []
    archive.close()
    path.write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    archive = Archive(root, index=path)
    assert build_index(archive) == 5
    assert [h.date for h in archive.search("稀疏")] == [D2, D2]


def test_a_kept_index_is_read_as_it_is_and_never_changed(root: Path, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    assert SqliteFullText.kept(path, root=root) is None  # none yet, and none is made
    assert not path.exists()
    keeper = Archive(root, index=path)
    assert build_index(keeper) == 5
    keeper.close()
    before = path.read_bytes()
    kept = SqliteFullText.kept(path, root=root)
    assert kept is not None and kept.read_only
    reader = Archive(root, index=kept)
    # every file as indexed: the search reads the index alone (nothing stale to scan)
    assert [h.date for h in reader.search("稀疏")] == [D2, D2]
    assert reader._search._stale == set()
    assert build_index(reader) == 0
    with pytest.raises(PermissionError, match="only to read"):
        kept.remove([D2])
    # a file changed since it was indexed is scanned, not written into the index
    rewrite(root / "2026-03-04.txt", (root / "2026-03-04.txt").read_text("utf-8").replace(
        "推理服务：批处理越大", "斑马鱼服务：批处理越大"))  # fmt: skip
    reader.refresh(full=True)
    assert [(h.date, h.section) for h in reader.search("斑马鱼")] == [(D4, Section.HEADLINE)]
    assert reader._search._stale == {D4}
    reader.close()
    assert path.read_bytes() == before
    # of another folder, another version, or not an index: not used, and left as it is
    other = tmp_path / "other"
    other.mkdir()
    assert SqliteFullText.kept(path, root=other) is None
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    assert SqliteFullText.kept(path, root=root) is None
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    assert SqliteFullText.kept(junk, root=root) is None
    assert junk.read_bytes() == b"not a database" * 100


def test_the_index_file_sits_beside_an_sqlite_ledger(tmp_path: Path) -> None:
    db = tmp_path / "var" / "digest-bot.db"
    assert (
        index_for(f"sqlite+aiosqlite:///{db}", tmp_path)
        == tmp_path / "var" / "digest-bot.search.sqlite"
    )
    assert index_for("sqlite+aiosqlite:///:memory:", tmp_path) is True
    assert isinstance(index_for("postgresql+asyncpg://u@h/db", tmp_path), PgFullText)


def test_an_index_file_holds_no_copy_of_plain_chinese_text(root: Path, tmp_path: Path) -> None:
    # a piece that is its own casefolding is stored once (the indexed text)
    path = tmp_path / "index.sqlite"
    build_index(Archive(root, index=path))
    store = SqliteFullText(path, root=root)
    try:
        rows = list(store.candidates("稀疏"))
        assert rows and all(r.text for r in rows)
    finally:
        store.close()


def test_search_on_postgresql_finds_what_a_scan_finds(root: Path, pg_url: str) -> None:
    index = PgFullText(pg_url, root=root)
    try:
        indexed, scanned = Archive(root, index=index), Archive(root, index=False)
        assert build_index(indexed) == 5
        for word in every_word(root)[::5]:
            assert indexed.search(word, limit=500) == scanned.search(word, limit=500), word
        assert indexed.hits_on(D2, "稀疏") == scanned.hits_on(D2, "稀疏")
    finally:
        index.close()
    again = PgFullText(pg_url, root=root)
    try:
        archive = Archive(root, index=again)
        assert build_index(archive) == 0  # a restart reads nothing
        rewrite(root / "2026-03-02.txt", BROKEN)
        archive.refresh(full=True)
        build_index(archive)
        assert [h.date for h in archive.search("稀疏")] == [D2, D2]  # the last good version
        assert archive.on(D2).date == D2
    finally:
        again.close()


@pytest.mark.parametrize("bound", [None, D5, D2])
def test_before_the_first_listing_the_newest_issue_is_found_alone(
    root: Path, bound: dt.date | None
) -> None:
    # a bot just started lists ten years of files in a thread; the first /today is answered
    # from the newest exactly named files meanwhile, as the listing would have answered it
    shutil.copy(root / "2026-03-04.txt", root / "2026-03-06.txt")  # the text wins over .yaml
    (root / "2026-03-07-draft.txt").write_text(BROKEN, encoding="utf-8")  # never served
    expected = Archive(root, index=False).latest(on_or_before=bound)
    archive = Archive(root, index=False)
    with archive._refreshing:  # as while another thread lists the folder
        early = archive.latest(on_or_before=bound)
        assert archive._dir_key is None  # answered without a listing
    assert early == expected
    assert archive.latest(on_or_before=bound) == expected


def test_before_the_first_listing_a_day_and_its_neighbours_are_found_alone(root: Path) -> None:
    # the first /today's navigation: the issue of a day and the dates around it, answered
    # from the files' names meanwhile, as the listing answers them once it is done
    shutil.copy(root / "2026-03-04.txt", root / "2026-03-04.json")  # a second file of D4
    (root / "2026-03-07-draft.txt").write_text(BROKEN, encoding="utf-8")  # never served
    listed = Archive(root, index=False)
    expected = [listed.on(d) for d in (D3, D4)]
    around = [tuple(map(list, listed.entry_dates_around(d))) for d in (D2, D4, D6)]
    archive = Archive(root, index=False)
    with archive._refreshing:  # as while another thread lists the folder
        assert [archive.on(d) for d in (D3, D4)] == expected
        assert [tuple(map(list, archive.entry_dates_around(d))) for d in (D2, D4, D6)] == around
        assert archive._dir_key is None  # answered without a listing
    assert around[1] == ([D3, D2], [D5, D6])


def test_before_the_first_listing_a_broken_newest_file_waits_for_the_listing(root: Path) -> None:
    rewrite(root / "2026-03-06.yaml", "date: [")
    archive = Archive(root, index=False)
    archive._refreshing.acquire()
    try:
        assert archive._before_listing(None) is None  # the listing's to answer
    finally:
        archive._refreshing.release()
    assert archive.latest().date == D5


def test_issues_are_what_dates_and_on_give_with_the_folder_looked_at_once(root: Path) -> None:
    rewrite(root / "2026-03-03.txt", BROKEN)  # broken, never good: left out
    archive = Archive(root, index=False)
    assert archive.issues() == [archive.on(d) for d in archive.dates()]
    assert [i.date for i in archive.issues()] == [D2, D4, D5, D6]
