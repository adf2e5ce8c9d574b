"""The archive folder: finding, listing and searching issues; broken files skipped and reported."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from digest_core.archive import Archive, SearchHit
from digest_core.archive.scan import FOLDED_FROM_BEYOND_ASCII
from digest_core.errors import IssueNotFound
from digest_core.loading import dump_json, load_issue
from digest_core.models import Section
from digest_core.testing import build_index

DATA = Path(__file__).parent / "data"
D2, D3, D4, D5, D6 = (dt.date(2026, 3, d) for d in range(2, 7))
BROKEN = "AI 技术日报\n重点\n只有标题\n"  # line 3: a headline without a body


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An archive folder holding copies of every fixture issue."""
    for path in DATA.iterdir():
        if path.name.startswith("2026-"):
            shutil.copy(path, tmp_path / path.name)
    return tmp_path


def touch_later(path: Path, text: str) -> None:
    """Rewrite ``path`` and move its mtime forward, so a change is seen even on coarse clocks."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def test_entries_are_dated_files_in_date_order(root: Path) -> None:
    (root / "README.md").write_text("not an issue", encoding="utf-8")
    (root / ".2026-03-09.txt.swp").write_text("editor junk", encoding="utf-8")
    entries = Archive(root).entries()
    assert [d for d, _ in entries] == [D2, D3, D4, D5, D6]
    assert [p.name for _, p in entries][-2:] == ["2026-03-05.json", "2026-03-06.yaml"]


def test_entry_dates_around_a_day_are_the_listing_read_outwards(root: Path) -> None:
    archive = Archive(root, index=False)
    older, newer = archive.entry_dates_around(D4)
    assert (list(older), list(newer)) == ([D3, D2], [D5, D6])
    older, newer = archive.entry_dates_around(dt.date(2026, 3, 1))  # before the first
    assert (list(older), list(newer)) == ([], [D2, D3, D4, D5, D6])
    (root / "2026-03-04.json").write_text("{}", encoding="utf-8")  # a second file of D4
    (root / "2026-03-07.txt").mkdir()  # not a file: listed as a problem, never a date
    older, newer = archive.entry_dates_around(D3)
    assert (list(older), list(newer)) == ([D2], [D4, D4, D5, D6])  # as entries() lists them
    assert [d for d, _ in archive.entries()] == [D2, D3, D4, D4, D5, D6]


def test_on_and_latest(root: Path) -> None:
    archive = Archive(root)
    assert archive.on(D3).masthead == "AI Tech Daily"
    assert archive.latest().date == D6
    assert archive.latest(on_or_before=D4).date == D4
    assert archive.dates() == [D2, D3, D4, D5, D6]
    assert archive.problems == []


def test_on_a_missing_date_names_the_nearest_issues(root: Path) -> None:
    (root / "2026-03-04.txt").unlink()
    archive = Archive(root)
    with pytest.raises(IssueNotFound) as exc:
        archive.on(D4)
    assert str(exc.value) == (
        "没有 2026-03-04 的日报；最近的是 2026-03-03 和 2026-03-05。\n"
        "No issue for 2026-03-04; the nearest are 2026-03-03 and 2026-03-05."
    )
    assert exc.value.date == D4
    with pytest.raises(IssueNotFound) as exc:
        archive.on(dt.date(2026, 4, 1))
    assert str(exc.value) == (
        "没有 2026-04-01 的日报；最近的是 2026-03-06。\n"
        "No issue for 2026-04-01; the nearest is 2026-03-06."
    )
    with pytest.raises(IssueNotFound) as exc:
        archive.on(dt.date(2025, 1, 1))
    assert str(exc.value).endswith("No issue for 2025-01-01; the nearest is 2026-03-02.")


def test_empty_archive(tmp_path: Path) -> None:
    archive = Archive(tmp_path)
    with pytest.raises(IssueNotFound) as exc:
        archive.on(D2)
    assert str(exc.value) == "还没有任何一期日报。\nThere is no issue yet."
    assert exc.value.date == D2
    with pytest.raises(IssueNotFound) as exc:
        archive.latest()
    assert str(exc.value) == "还没有任何一期日报。\nThere is no issue yet."
    with pytest.raises(IssueNotFound) as exc:
        archive.latest(on_or_before=D2)
    assert str(exc.value) == "还没有任何一期日报。\nThere is no issue yet."
    assert archive.search("anything") == []


def test_latest_before_the_first_issue(root: Path) -> None:
    with pytest.raises(IssueNotFound) as exc:
        Archive(root).latest(on_or_before=dt.date(2026, 3, 1))
    assert str(exc.value) == (
        "2026-03-01 及之前还没有日报；最早的一期是 2026-03-02。\n"
        "There is no issue on or before 2026-03-01; the earliest is 2026-03-02."
    )
    assert exc.value.date == dt.date(2026, 3, 1)


def test_broken_file_is_skipped_and_reported(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = root / "2026-03-07.txt"
    path.write_text(BROKEN, encoding="utf-8")
    archive = Archive(root)
    with caplog.at_level(logging.WARNING, logger="digest_core.archive"):
        assert archive.latest().date == D6  # the broken newest issue is skipped
        archive.list()
        archive.search("模型")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]  # reported once, not per call
    [problem] = archive.problems
    assert (problem.path, problem.line) == (str(path), 3)
    assert problem.detail == 'headline "只有标题" has a title but no body'
    entry = archive.list()[-1]
    assert (entry.date, entry.loaded, entry.stale, entry.issue) == (
        dt.date(2026, 3, 7),
        False,
        False,
        None,
    )
    with pytest.raises(IssueNotFound) as exc:
        archive.on(dt.date(2026, 3, 7))
    # what a reader sees: no path, no editor's detail; the detail stays in the cause and the log
    assert str(exc.value) == (
        "2026-03-07 的日报暂时无法提供；最近的是 2026-03-06。\n"
        "The issue of 2026-03-07 is not available right now; the nearest is 2026-03-06."
    )
    assert exc.value.date == dt.date(2026, 3, 7)
    assert exc.value.__cause__ is problem


def test_a_file_that_breaks_keeps_serving_its_last_good_version(root: Path) -> None:
    archive = Archive(root)
    path = root / "2026-03-02.txt"
    good = archive.on(D2)
    touch_later(path, BROKEN)
    assert archive.on(D2) is good
    assert archive.latest(on_or_before=D2) is good
    [problem] = archive.problems
    assert (problem.path, problem.line) == (str(path), 3)
    entry = next(e for e in archive.list() if e.date == D2)
    assert entry.stale and not entry.loaded and entry.issue is good
    # fixed again: the new text is served and the problem is gone
    touch_later(
        path, (DATA / "2026-03-02.txt").read_text(encoding="utf-8").replace("块稀疏", "分块稀疏")
    )
    fixed = archive.on(D2)
    assert fixed.headline.title.startswith("分块稀疏")
    assert fixed.revision != good.revision
    assert archive.problems == []


def test_loaded_issues_are_cached_until_the_file_changes(root: Path) -> None:
    archive = Archive(root)
    first = archive.on(D3)
    assert archive.on(D3) is first  # not parsed again
    assert next(e.issue for e in archive.list() if e.date == D3) is first
    path = root / "2026-03-03.txt"
    touch_later(path, path.read_text(encoding="utf-8").replace("AI Tech Daily", "AI Daily"))
    second = archive.on(D3)
    assert second is not first and second.masthead == "AI Daily"


def test_two_files_for_one_date_text_wins_and_the_other_is_reported(root: Path) -> None:
    other = root / "2026-03-02.json"
    other.write_text(
        dump_json(load_issue(DATA / "2026-03-05.json").model_copy(update={"date": D2}))
    )
    archive = Archive(root)
    assert archive.on(D2).headline.title.startswith("块稀疏注意力")
    [problem] = archive.problems
    assert str(problem) == f"{other}: ignored: 2026-03-02.txt has the same date and is used instead"
    statuses = [(e.path.name, e.loaded) for e in archive.list() if e.date == D2]
    assert statuses == [("2026-03-02.txt", True), ("2026-03-02.json", False)]


def test_misnamed_files_are_reported(root: Path) -> None:
    (root / "draft.txt").write_text("AI 技术日报\n", encoding="utf-8")
    (root / "2026-02-30.txt").write_text("AI 技术日报\n", encoding="utf-8")
    problems = {Path(p.path).name: p.detail for p in Archive(root).problems}
    assert problems == {
        "2026-02-30.txt": "the file name's date 2026-02-30 is not a calendar day: "
        "day is out of range for month",
        "draft.txt": "not named after its date: name issue files YYYY-MM-DD.txt",
    }


def test_search_in_chinese_newest_first(root: Path) -> None:
    hits = Archive(root).search("稀疏")
    assert [(h.date, h.section, h.index) for h in hits] == [
        (D2, None, 0),
        (D2, Section.HEADLINE, 1),
    ]
    assert hits[1].title.startswith("块稀疏注意力")
    assert hits[0].text.startswith("稀疏注意力的收益")  # the lede


def test_search_finds_briefs_questions_and_ignores_case(root: Path) -> None:
    archive = Archive(root)
    [hit] = archive.search("损失缩放还有必要")
    assert (hit.date, hit.section, hit.index) == (D2, Section.CLASSIC, 1)
    assert hit.text == "如果梯度本身不会下溢，损失缩放还有必要吗？"
    brief = archive.search("@EVERYONE")
    assert [(h.date, h.section, h.index) for h in brief] == [(D2, Section.BRIEFS, 3)]
    speculative = archive.search("ACCEPTANCE RATE")
    assert speculative == [
        SearchHit(
            D3,
            Section.HEADLINE,
            1,
            "Speculative decoding: acceptance rate is the number to watch",
            "Speculative decoding: acceptance rate is the number to watch",
        )
    ]


def test_search_limit_and_bad_arguments(root: Path) -> None:
    archive = Archive(root)
    everything = archive.search("：")
    assert len(everything) > 3
    assert archive.search("：", limit=3) == everything[:3]
    with pytest.raises(ValueError):
        archive.search("  ")
    with pytest.raises(ValueError):
        archive.search("x", limit=0)


def test_search_and_listing_survive_broken_and_unreadable_files(root: Path) -> None:
    (root / "2026-03-08.txt").write_bytes(b"AI\n\xff\xfe\n")
    (root / "2026-03-09.yaml").write_text("date: [\n", encoding="utf-8")
    archive = Archive(root)
    assert next(h.date for h in archive.search("模型")) == D6
    lines = {Path(p.path).name: p.line for p in archive.problems}
    assert lines == {"2026-03-08.txt": 2, "2026-03-09.yaml": 2}
    assert len(archive.list()) == 7


def test_missing_folder_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "nowhere")
    assert archive.entries() == []
    [problem] = archive.problems
    assert problem.detail == "cannot list the archive folder: No such file or directory"


def test_entries_and_hits_describe_themselves_in_one_line(root: Path) -> None:
    (root / "2026-03-02.yaml").write_text("date: 2026-03-02\n", encoding="utf-8")
    (root / "2026-03-07.txt").write_text(BROKEN, encoding="utf-8")
    archive = Archive(root)
    lines = [e.describe() for e in archive.list()]
    revision = archive.on(D2).revision
    assert lines[0] == f"2026-03-02  2026-03-02.txt  loaded, revision {revision}"
    assert lines[1] == "2026-03-02  2026-03-02.yaml  ignored, 2026-03-02.txt is used for this date"
    assert lines[-1] == "2026-03-07  2026-03-07.txt  broken"
    touch_later(root / "2026-03-02.txt", BROKEN)
    stale = archive.list()[0].describe()
    assert stale == (
        f"2026-03-02  2026-03-02.txt  broken, serving the last good version (revision {revision})"
    )
    hits = (
        archive.search("@everyone")
        + archive.search("损失缩放")
        + archive.search("稀疏注意力的收益")
    )
    assert [h.describe() for h in hits] == [
        "2026-03-02 · 简讯 3 · 社区提醒：公告频道里的 @everyone 不会再通知所有人",
        "2026-03-02 · 经典回顾 · 混合精度训练：用 FP16 计算，用 FP32 保存主权重",
        "2026-03-02 · 本期重点 · 稀疏注意力的收益取决于序列长度；"
        "简讯关注评测、编译器与数据管线。经典回顾重读混合精度训练。",
    ]


def hostile_files(root: Path) -> dict[str, str]:
    """Write files that once crashed or hung loading; their names, with what each is."""
    laughs = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    laughs += [f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]" for n in range(1, 9)]
    files = {
        "2026-03-07.json": "[" * 100_000,  # RecursionError in json
        "2026-03-08.yaml": "a: &a [*a]\n",  # a list holding itself
        "2026-03-09.yaml": "\n".join(laughs) + "\n",  # 10**9 strings once expanded
        "2026-03-10.yaml": "{" * 100_000,  # RecursionError in the YAML composer
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return files


@pytest.mark.slow  # over 0.25 s: left out of make check
def test_hostile_files_are_problems_not_crashes(root: Path) -> None:
    names = hostile_files(root)
    archive = Archive(root)
    assert archive.latest().date == D6
    assert [h.date for h in archive.search("稀疏")] == [D2, D2]
    assert archive.dates() == [D2, D3, D4, D5, D6]
    statuses = {e.path.name: e.describe().rsplit("  ", 1)[1] for e in archive.list()}
    assert {name: statuses[name] for name in names} == dict.fromkeys(names, "broken")
    details = {Path(p.path).name: (p.line, p.detail) for p in archive.problems}
    assert set(details) == set(names)
    assert details["2026-03-07.json"][1].startswith("nested too deeply")
    assert details["2026-03-10.yaml"][1].startswith("nested too deeply")
    assert details["2026-03-08.yaml"] == (
        1,
        "YAML anchors and aliases are not allowed in an issue file (found the anchor &a); "
        "write the value out in full",
    )
    assert "found the anchor &x0" in details["2026-03-09.yaml"][1]
    with pytest.raises(IssueNotFound) as exc:
        archive.on(dt.date(2026, 3, 8))
    assert str(exc.value).startswith("2026-03-08 的日报暂时无法提供；最近的是 2026-03-06。\n")


def test_an_unexpected_loader_error_is_logged_with_its_traceback_and_reported(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = load_issue
    calls: list[Path] = []

    def buggy(path: Path, *, date: dt.date | None = None) -> object:
        calls.append(path)
        if path.name == "2026-03-06.yaml":
            raise KeyError("a bug in the loader")
        return real(path, date=date)

    monkeypatch.setattr("digest_core.archive.folder.load_issue", buggy)
    archive = Archive(root)
    with caplog.at_level(logging.WARNING, logger="digest_core.archive"):
        assert archive.latest().date == D5  # the newest file is skipped, not fatal
        assert archive.search("稀疏")[0].date == D2
        assert [e.loaded for e in archive.list()] == [True, True, True, True, False]
    [record] = caplog.records  # once, not per call
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "2026-03-06.yaml" in record.getMessage()
    [problem] = archive.problems
    assert problem.detail == "could not be loaded (unexpected KeyError: 'a bug in the loader')"
    assert calls.count(root / "2026-03-06.yaml") == 1  # cached like any broken file
    with pytest.raises(IssueNotFound) as exc:
        archive.on(D6)
    assert "KeyError" not in str(exc.value) and str(root) not in str(exc.value)
    assert str(exc.value).endswith("the nearest is 2026-03-05.")


def test_reader_messages_never_show_paths_or_editor_detail(tmp_path: Path) -> None:
    # the only file is broken and never loaded: nothing to fall back to
    (tmp_path / "2026-03-07.txt").write_text(BROKEN, encoding="utf-8")
    archive = Archive(tmp_path)
    messages = []
    calls: list[Callable[[], object]] = [
        lambda: archive.on(dt.date(2026, 3, 7)),
        lambda: archive.on(dt.date(2026, 3, 8)),
        archive.latest,
        lambda: archive.latest(on_or_before=dt.date(2026, 3, 7)),
    ]
    for call in calls:
        with pytest.raises(IssueNotFound) as exc:
            call()
        messages.append(str(exc.value))
    assert messages == [
        "2026-03-07 的日报暂时无法提供。\nThe issue of 2026-03-07 is not available right now.",
        "还没有任何一期日报。\nThere is no issue yet.",
        "还没有任何一期日报。\nThere is no issue yet.",
        "还没有任何一期日报。\nThere is no issue yet.",
    ]
    for text in messages:
        assert str(tmp_path) not in text and "2026-03-07.txt" not in text
        assert "no body" not in text
    [problem] = archive.problems  # the editor still gets the full detail
    assert (
        str(problem)
        == f'{tmp_path / "2026-03-07.txt"}:3: headline "只有标题" has a title but no body'
    )


# ------------------------------------------------------------ the entry rule (trust)


def test_a_link_out_of_the_folder_is_never_served(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    secret = outside / "secrets.txt"
    # a file that would load as an issue: only where it is makes it unsafe
    secret.write_text(
        (DATA / "2026-03-04.txt").read_text(encoding="utf-8").replace("AI 技术日报", "TOPSECRET"),
        encoding="utf-8",
    )
    (root / "2026-03-07.txt").symlink_to(secret)
    (root / "2026-03-08.txt").symlink_to(outside)  # a folder outside
    (root / "2026-03-09.txt").symlink_to(root / "2026-03-04.txt")  # inside: fine
    (root / "2026-03-10.txt").symlink_to(root / "gone.txt")  # dangling
    archive = Archive(root)
    assert archive.dates() == [D2, D3, D4, D5, D6, dt.date(2026, 3, 9)]
    assert archive.latest().date == dt.date(2026, 3, 9)
    with pytest.raises(IssueNotFound):
        archive.on(dt.date(2026, 3, 7))
    assert all("TOPSECRET" not in h.text for h in archive.search("TOPSECRET"))
    details = {Path(p.path).name: p.detail for p in archive.problems}
    assert details == {
        "2026-03-07.txt": "a link that leads out of the folder: not followed",
        "2026-03-08.txt": "a link that leads out of the folder: not followed",
        "2026-03-10.txt": "a link to nothing",
    }
    assert not any("TOPSECRET" in str(p) for p in archive.problems)


def test_fifos_and_folders_are_skipped_reported_and_never_opened(root: Path) -> None:
    os.mkfifo(root / "2026-03-07.txt")  # opening it would block forever
    (root / "2026-03-08.json").mkdir()
    archive = Archive(root)
    assert archive.latest().date == D6
    assert archive.dates() == [D2, D3, D4, D5, D6]
    assert [h.date for h in archive.search("稀疏")] == [D2, D2]
    details = {Path(p.path).name: p.detail for p in archive.problems}
    assert details == {
        "2026-03-07.txt": "not a regular file (a FIFO): skipped, never opened",
        "2026-03-08.json": "not a regular file (a folder): skipped, never opened",
    }


def test_names_the_archive_would_misread_are_problems_not_issues(root: Path) -> None:
    text = (DATA / "2026-03-04.txt").read_text(encoding="utf-8")
    for name in ("2026-03-07.TXT", "2026-03-08.Txt", "٢٠٢٦-٠٣-٠٩.txt", "2026-03-10-fix.txt"):
        (root / name).write_text(text, encoding="utf-8")
    archive = Archive(root)
    assert archive.dates() == [D2, D3, D4, D5, D6]
    assert archive.latest().date == D6
    with pytest.raises(IssueNotFound):
        archive.on(dt.date(2026, 3, 9))
    details = {Path(p.path).name: p.detail for p in archive.problems}
    served_not = " (the archive does not serve it as it is named)"
    assert details == {
        "2026-03-07.TXT": "the suffix must be lowercase: rename it 2026-03-07.txt" + served_not,
        "2026-03-08.Txt": "the suffix must be lowercase: rename it 2026-03-08.txt" + served_not,
        "٢٠٢٦-٠٣-٠٩.txt": "the date in the name must be written with the digits 0-9: "
        "rename it 2026-03-09.txt" + served_not,
        "2026-03-10-fix.txt": "only a date may precede the suffix: rename it 2026-03-10.txt "
        "to publish it" + served_not,
    }


# ------------------------------------------------------------ the index follows the folder


def copy_as(date: dt.date, root: Path, source: str = "2026-03-04.txt", **swap: str) -> Path:
    text = (DATA / source).read_text(encoding="utf-8")
    for old, new in swap.items():
        text = text.replace(old, new)
    path = root / f"{date.isoformat()}{Path(source).suffix}"
    path.write_text(text, encoding="utf-8")
    return path


def test_search_sees_new_changed_and_removed_files(root: Path) -> None:
    archive = Archive(root, restat_seconds=0)  # stat every entry on every call
    assert archive.search("稀疏")  # the index is built
    assert archive.search("斑马鱼") == []
    d7 = dt.date(2026, 3, 7)
    path = copy_as(d7, root, **{"推理服务：批处理越大": "斑马鱼服务：批处理越大"})  # new
    assert [(h.date, h.section) for h in archive.search("斑马鱼")] == [(d7, Section.HEADLINE)]
    touch_later(path, path.read_text(encoding="utf-8").replace("斑马鱼", "海豚"))  # changed
    assert archive.search("斑马鱼") == []
    assert [h.date for h in archive.search("海豚")] == [d7]
    path.unlink()  # removed
    assert archive.search("海豚") == []
    assert archive.latest().date == D6


def test_a_changed_file_is_served_at_once_even_between_full_rescans(root: Path) -> None:
    archive = Archive(root, restat_seconds=3600)
    assert archive.latest().headline.title.startswith(archive.on(D6).headline.title)
    path = root / "2026-03-02.txt"
    before = archive.on(D2)
    touch_later(path, path.read_text(encoding="utf-8").replace("块稀疏", "分块稀疏"))
    assert archive.on(D2).headline.title.startswith("分块稀疏")
    assert archive.on(D2).revision != before.revision
    new = copy_as(dt.date(2026, 3, 7), root)  # a new file moves the folder's mtime
    assert archive.latest().date == dt.date(2026, 3, 7)
    new.unlink()
    assert archive.latest().date == D6


def test_a_broken_new_version_keeps_its_last_good_version_searchable(root: Path) -> None:
    archive = Archive(root, restat_seconds=0)
    assert [h.date for h in archive.search("稀疏")] == [D2, D2]
    touch_later(root / "2026-03-02.txt", BROKEN)
    assert [h.date for h in archive.search("稀疏")] == [D2, D2]  # the last good text
    assert archive.search("只有标题") == []


@pytest.mark.parametrize(
    "word",
    [
        "：",
        "稀疏",
        "稀疏注意力的收益",
        "acceptance",
        "ACCEPTANCE RATE",
        "@everyone",
        "模型",
        "推理训练",
        "x",
        "注意力",
    ],
)
def test_indexed_search_and_a_scan_find_the_same(root: Path, word: str) -> None:
    copy_as(dt.date(2026, 3, 7), root, "2026-03-05.json")
    indexed, scanned = Archive(root), Archive(root, index=False)
    assert indexed.search(word, limit=50) == scanned.search(word, limit=50)


def test_a_scan_finds_what_the_loader_made_of_a_tab(tmp_path: Path) -> None:
    # the raw-bytes shortcut of a scan must not miss a space that was a tab in the file
    copy_as(D4, tmp_path, **{"推理服务：批处理越大": "斑马\t鱼：批处理越大"})
    for archive in (Archive(tmp_path), Archive(tmp_path, index=False)):
        assert [h.date for h in archive.search("斑马 鱼")] == [D4]
        assert archive.search("斑马鱼") == []
        assert [h.date for h in archive.search("斑马\t鱼")] == [D4]  # a query's tab, too


def test_no_false_positives_from_character_pairs(tmp_path: Path) -> None:
    # the issue holds both pairs of 甲乙丙 (甲乙, 乙丙), never the three together
    copy_as(D4, tmp_path, **{"推理服务：批处理越大": "甲乙 与 乙丙：批处理越大"})
    archive = Archive(tmp_path)
    assert [h.date for h in archive.search("甲乙")] == [D4]
    assert [h.date for h in archive.search("乙丙")] == [D4]
    assert archive.search("甲乙丙") == []
    assert archive.search("丁") == []


def test_a_large_archive_is_searched_while_its_index_is_built(tmp_path: Path) -> None:
    first = dt.date(2025, 1, 1)
    for n in range(60):
        copy_as(first + dt.timedelta(days=n), tmp_path, "2026-03-02.txt")
    copy_as(first + dt.timedelta(days=60), tmp_path, "2026-03-02.txt", **{"块稀疏": "斑马鱼稀疏"})
    archive = Archive(tmp_path)
    # more files than are loaded inline: this search scans, the index builds in a thread
    during = archive.search("斑马鱼")
    build_index(archive)
    after = archive.search("斑马鱼")
    assert during == after
    assert [h.date for h in after] == [first + dt.timedelta(days=60)]
    assert len(archive.search("稀疏", limit=500)) == 61 * 2


# ------------------------------------------------------------ a scan's shortcut for Latin words


@pytest.mark.slow  # over 0.25 s: left out of make check
def test_the_table_of_ascii_made_by_casefolding_matches_this_python() -> None:
    # the scan rules a file out by the runs of a Latin word that only ASCII can produce;
    # that holds only while this table is complete and no character folds to nothing
    made: set[str] = set()
    for code in range(0x80, 0x110000):
        folded = chr(code).casefold()
        assert folded, f"U+{code:04X} folds to nothing"
        made.update(c for c in folded if c.isascii())
    assert made == FOLDED_FROM_BEYOND_ASCII
    assert all(chr(c).casefold() == chr(c).lower() for c in range(0x80))


@pytest.mark.parametrize(
    ("written", "word"),
    [
        ("Gro\u00dfe Modelle", "GROSSE"),  # ß → ss
        ("Gro\u1e9eE MODELLE", "grosse"),  # capital ẞ
        ("3 \u212aB cache", "3 kb"),  # the Kelvin sign → k
        ("e\ufb03cient routing", "efficient"),  # the ﬃ ligature
        ("\u0130stanbul rope", "i\u0307stanbul"),  # İ → i + a combining dot
        ("Al\u017fo ran", "also ran"),  # long s
        ("ALL\tREDUCE kernels", "all reduce"),  # a tab the loader reads as a space
    ],
)
def test_a_scan_finds_latin_words_that_casefolding_makes(
    tmp_path: Path, written: str, word: str
) -> None:
    copy_as(D4, tmp_path, **{"推理服务：批处理越大": f"{written}：批处理越大"})
    copy_as(D5, tmp_path)  # a file the shortcut rules out
    for archive in (Archive(tmp_path), Archive(tmp_path, index=False)):
        assert [(h.date, h.section) for h in archive.search(word)] == [(D4, Section.HEADLINE)]
        assert archive.search(word + "zq") == []


def test_a_scan_reads_all_of_a_file_that_grew_since_it_was_listed(tmp_path: Path) -> None:
    # the scan reads as many bytes as the listing saw; a file rewritten longer in place
    # (the folder's mtime does not move) must still be read to its end
    path = copy_as(D4, tmp_path)
    archive = Archive(tmp_path, index=False, restat_seconds=3600)
    assert archive.entries() == [(D4, path)]
    filler = "长" * 7_000  # 21 kB: well past the size the listing saw
    text = path.read_text(encoding="utf-8").replace("关掉？", f"关掉？{filler}斑马鱼 Zebrafish")
    touch_later(path, text)
    assert [h.section for h in archive.search("斑马鱼")] == [Section.CLASSIC]
    assert [h.section for h in archive.search("zebrafish")] == [Section.CLASSIC]
