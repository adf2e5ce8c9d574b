"""The editor's commands as an editor runs them: archive list/add, new, schema, validate."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest

from digest_core.archive import Archive
from digest_core.models import issue_json_schema
from digest_core.testing import build_index
from tests.bots.test_cli import ROOT, cli
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


def future(days: int = 30) -> dt.date:
    return dt.datetime.now(dt.UTC).date() + dt.timedelta(days=days)


def sample(date: str = "2026-11-27") -> bytes:
    return (SAMPLE_ARCHIVE / f"{date}.txt").read_bytes()


# ---------------------------------------------------------------- archive list (issue #13, 3)


def test_archive_list_prints_date_state_headline_and_briefs(workdir: Path) -> None:
    day = future()
    (workdir / "archive" / f"{day}.txt").write_bytes(sample())
    out = cli(workdir, "archive", "list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "2026-11-26  published  投机解码遇上大批量：草稿长度不该是一个全局常数 · 5 briefs"
    )
    assert lines[-1].startswith(f"{day}  scheduled  深读：KV 缓存为什么要分页")
    assert lines[-1].endswith(" · 6 briefs")
    assert "revision" not in out.stdout and ".txt" not in out.stdout


def test_archive_list_marks_broken_and_misnamed_files_invalid_and_exits_1(workdir: Path) -> None:
    (workdir / "archive" / "2026-12-03.txt").write_text("AI 技术日报\n重点\n", encoding="utf-8")
    (workdir / "archive" / "2026-12-4.txt").write_bytes(sample())
    out = cli(workdir, "archive", "list")
    assert out.returncode == 1
    assert "2026-12-03  invalid    " in out.stdout and "2026-12-03.txt:2: " in out.stdout
    [misnamed] = [x for x in out.stdout.splitlines() if "2026-12-4.txt" in x]
    assert "invalid" in misnamed and "rename it 2026-12-04.txt" in misnamed
    assert out.stdout.count("  published  ") == 5
    assert "WARNING" not in out.stderr  # each problem once, in the listing


# ---------------------------------------------------------------- schema (issue #13, 6)


def test_schema_prints_the_json_schema(workdir: Path) -> None:
    out = cli(workdir, "schema")
    assert out.returncode == 0
    assert json.loads(out.stdout) == json.loads(json.dumps(issue_json_schema()))


# ---------------------------------------------------------------- new (issue #10, 4)


def test_new_writes_a_commented_template_that_validates_only_once_filled(workdir: Path) -> None:
    out = cli(workdir, "new", "2026-12-24")
    assert out.returncode == 0, out.stderr
    template = workdir / "2026-12-24.yaml"
    text = template.read_text(encoding="utf-8")
    assert "date: 2026-12-24" in text and text.count("\n# ") >= 5
    unfilled = cli(workdir, "validate", str(template))
    assert unfilled.returncode == 1 and "headline.title: must not be empty" in unfilled.stdout
    again = cli(workdir, "new", "2026-12-24")  # never over an editor's work
    assert again.returncode == 1 and "already exists" in again.stderr
    assert template.read_text(encoding="utf-8") == text
    filled = (
        text.replace('lede: ""', "lede: 一句话导语。")
        .replace('title: ""', "title: 一个标题", 3)
        .replace('- ""', "- 一段正文。", 3)
        .replace('question: ""', "question: 一个问题？")
    )
    template.write_text(filled, encoding="utf-8")
    ok = cli(workdir, "validate", str(template))
    assert ok.returncode == 0, ok.stdout
    assert "ok — 2026-12-24, 1 headline, 1 brief, 1 classic review" in ok.stdout


def test_an_unfilled_template_gets_one_line_per_problem_with_its_line(workdir: Path) -> None:
    """Issue 20, item 6: ``archive add`` and ``validate`` of the unfilled template print each
    problem on its own ``path:line: field: detail`` line, every one of them."""
    assert cli(workdir, "new", "2026-12-24").returncode == 0
    template = workdir / "2026-12-24.yaml"
    lines = template.read_text(encoding="utf-8").splitlines()
    added = cli(workdir, "archive", "add", str(template))
    assert added.returncode == 1
    problems = added.stderr.strip().splitlines()
    assert len(problems) >= 6 and not any("more problems" in p for p in problems)
    for problem in problems:
        path, line, field, detail = problem.split(":", 3)
        assert path == str(template) and detail.strip() == "must not be empty", problem
        # the line named is the field's own line of the template (a list item's "- ")
        last = field.strip().split(".")[-1]
        own = lines[int(line) - 1].lstrip().removeprefix("- ")
        assert own.startswith('""' if last.isdigit() else f"{last}:"), problem
    assert len({p.split(":")[1] for p in problems}) == len(problems)  # each its own line
    validated = cli(workdir, "validate", str(template))
    assert validated.stdout.strip().splitlines() == problems


def test_new_without_a_date_is_the_next_posts_day(workdir: Path) -> None:
    out = cli(workdir, "new")
    assert out.returncode == 0
    [written] = list(workdir.glob("*.yaml"))
    day = dt.date.fromisoformat(written.stem)
    today = dt.datetime.now(dt.UTC).date()
    assert today - dt.timedelta(days=1) <= day <= today + dt.timedelta(days=2)


# ---------------------------------------------------------------- archive add (issue #10, 4)


def test_archive_add_stores_a_good_file_under_its_date(workdir: Path) -> None:
    day = future()
    draft = workdir / "draft.txt"
    draft.write_bytes(sample())
    out = cli(workdir, "archive", "add", str(draft), "--date", str(day))
    assert out.returncode == 0, out.stderr
    stored = workdir / "archive" / f"{day}.txt"
    assert stored.read_bytes() == sample()
    assert f"stored archive/{day}.txt: {day} · 深读" in out.stdout and "posts " in out.stdout
    assert not [p for p in (workdir / "archive").iterdir() if p.name.startswith(".")]  # no temp
    assert Archive(workdir / "archive", index=False).on(day).headline.title.startswith("深读")
    same = cli(workdir, "archive", "add", str(draft), "--date", str(day))
    assert same.returncode == 0 and "unchanged" in same.stdout


def test_archive_add_takes_a_loosely_dated_name_and_stores_it_rightly_named(
    workdir: Path,
) -> None:
    day = future()
    loose = workdir / f"{day.year}-{day.month}-{day.day}.txt"
    loose.write_bytes(sample())
    out = cli(workdir, "archive", "add", str(loose))
    assert out.returncode == 0, out.stderr
    assert (workdir / "archive" / f"{day}.txt").exists()


def test_archive_add_refuses_a_bad_file_with_path_line_and_writes_nothing(workdir: Path) -> None:
    day = future()
    bad = workdir / f"{day}.txt"
    bad.write_text(sample().decode().replace("\n简讯\n", "\n简讯：\n", 1), encoding="utf-8")
    before = sorted(os.listdir(workdir / "archive"))
    out = cli(workdir, "archive", "add", str(bad))
    assert out.returncode == 1
    line = sample().decode().split("\n").index("简讯") + 1
    assert out.stderr.strip() == (
        f'{bad}:{line}: "简讯：" is not a section label: did you mean 简讯? (a label stands '
        "alone on its line, without a colon or spaces)"
    )
    assert sorted(os.listdir(workdir / "archive")) == before
    undated = workdir / "draft.txt"
    undated.write_bytes(sample())
    out = cli(workdir, "archive", "add", str(undated))
    assert out.returncode == 1 and "name the file YYYY-MM-DD.txt" in out.stderr
    assert sorted(os.listdir(workdir / "archive")) == before


def test_archive_add_refuses_to_overwrite_a_published_issue_unless_correct(
    workdir: Path,
) -> None:
    published = workdir / "archive" / "2026-11-27.txt"
    old = published.read_bytes()
    fixed = workdir / "2026-11-27.txt"
    fixed.write_bytes(old.replace("深读".encode(), "深读（更正）".encode(), 1))
    out = cli(workdir, "archive", "add", str(fixed))
    assert out.returncode == 1
    assert "the issue of 2026-11-27 is published already" in out.stderr
    assert "--correct" in out.stderr
    assert published.read_bytes() == old
    corrected = cli(workdir, "archive", "add", str(fixed), "--correct")
    assert corrected.returncode == 0, corrected.stderr
    assert "a correction" in corrected.stdout
    assert published.read_bytes() == fixed.read_bytes()


def test_a_day_published_early_is_published_for_every_editor_command(workdir: Path) -> None:
    """`post --date D` before D's post time publishes D early (audited in the ledger); the
    shell's commands read that as the running bot does: `archive add` refuses to replace it
    without --correct, `archive list` calls it published, `site build` includes it."""
    day = future()
    stored = workdir / "archive" / f"{day}.txt"
    stored.write_bytes(sample())
    posted = cli(workdir, "post", "--date", day.isoformat())
    assert posted.returncode == 0, posted.stderr
    listed = cli(workdir, "archive", "list")
    assert f"{day}  published  " in listed.stdout
    fixed = workdir / f"{day}.txt"
    fixed.write_bytes(sample().replace("深读".encode(), "深读（更正）".encode(), 1))
    out = cli(workdir, "archive", "add", str(fixed))
    assert out.returncode == 1
    assert f"the issue of {day} is published already" in out.stderr
    assert stored.read_bytes() == sample()
    assert cli(workdir, "archive", "add", str(fixed), "--correct").returncode == 0
    site = cli(workdir, "site", "build", str(workdir / "site"))
    assert site.returncode == 0, site.stderr
    assert (workdir / "site" / f"{day:%Y/%m/%d}" / "index.html").exists()


def test_archive_add_of_json_replaces_the_days_text_file(workdir: Path) -> None:
    day = future()
    (workdir / "archive" / f"{day}.txt").write_bytes(sample())
    as_json = cli(workdir, "preview", "--date", "2026-11-28", "--json")  # any issue as data
    assert as_json.returncode == 0
    from digest_core.loading import dump_json, load_issue

    issue = load_issue(workdir / "archive" / "2026-11-28.txt")
    data = workdir / "upload.json"
    data.write_text(dump_json(issue.model_copy(update={"date": day})), encoding="utf-8")
    out = cli(workdir, "archive", "add", str(data))
    assert out.returncode == 0, out.stderr
    assert not (workdir / "archive" / f"{day}.txt").exists()
    assert f"removed archive/{day}.txt" in out.stdout
    assert (
        Archive(workdir / "archive", index=False).on(day).revision
        == issue.model_copy(update={"date": day}).revision
    )


def test_archive_add_refuses_a_file_over_1_mib(workdir: Path) -> None:
    big = workdir / f"{future()}.txt"
    big.write_bytes(sample() + b"x" * (1024 * 1024))
    out = cli(workdir, "archive", "add", str(big))
    assert out.returncode == 1 and "at most 1 MiB" in out.stderr


# ---------------------------------------------------------------- validate with no path


def test_validate_without_a_path_checks_the_configured_archive(workdir: Path) -> None:
    out = cli(workdir, "validate")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(": ok — ") == 5
    (workdir / "archive" / "2026-12-03.txt").write_text("AI 技术日报\n", encoding="utf-8")
    broken = cli(workdir, "validate")
    assert broken.returncode == 1 and "2026-12-03.txt" in broken.stdout


def test_archive_add_that_cannot_write_leaves_no_temporary_file(workdir: Path) -> None:
    day = future()
    (workdir / "archive" / f"{day}.txt").mkdir()  # a folder where the file would go
    source = workdir / f"{day}.txt"
    source.write_bytes(sample())
    out = cli(workdir, "archive", "add", str(source))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "cannot store the issue" in out.stderr
    assert not [p for p in (workdir / "archive").iterdir() if p.name.startswith(".")]


def test_a_reader_sees_the_old_file_or_the_new_one_never_a_part(workdir: Path) -> None:
    """The store renames a complete file over the old one: the inode changes, and at no
    point does the path hold a shorter file (the old inode is never written to)."""
    day = future()
    target = workdir / "archive" / f"{day}.txt"
    target.write_bytes(sample("2026-11-26"))
    held = target.open("rb")  # a reader that opened the old file
    source = workdir / "new.txt"
    source.write_bytes(sample())
    out = cli(workdir, "archive", "add", str(source), "--date", str(day))
    assert out.returncode == 0, out.stderr
    assert held.read() == sample("2026-11-26")  # the old file, whole, for its reader
    held.close()
    assert target.read_bytes() == sample()


# ---------------------------------------------------------------- archive search (issue #24, 3)


def _kept_index(workdir: Path) -> Path:
    """The search index the bot keeps beside the workdir's SQLite ledger, brought up to date
    as the running bot does."""
    from digest_core.archive.fulltext import index_path_for

    path = workdir / "var" / "digest-bot.search.sqlite"
    ledger = "sqlite+aiosqlite:///var/digest-bot.db"  # as config/digest-bot.toml has it
    assert index_path_for(ledger) == path.relative_to(workdir)
    archive = Archive(workdir / "archive", index=path)
    assert build_index(archive) == 5
    archive.close()
    return path


def test_archive_search_reads_the_kept_index_and_scans_what_changed_since(
    workdir: Path,
) -> None:
    scanned = cli(workdir, "archive", "search", "ZeRO")  # no index yet: every file scanned
    assert scanned.returncode == 0 and "2026-11-27" in scanned.stdout
    assert not (workdir / "var" / "digest-bot.search.sqlite").exists()  # none was made
    index = _kept_index(workdir)
    before = index.stat().st_mtime_ns, index.read_bytes()
    kept = cli(workdir, "archive", "search", "ZeRO")
    assert (kept.returncode, kept.stdout, kept.stderr) == (0, scanned.stdout, scanned.stderr)
    # an issue edited after the bot indexed it is found by what it says now
    day = workdir / "archive" / "2026-11-26.txt"
    text = day.read_text(encoding="utf-8")
    assert "投机解码的思路" in text
    day.write_text(text.replace("投机解码的思路", "独角兽词投机解码的思路", 1), "utf-8")
    edited = cli(workdir, "archive", "search", "独角兽词")
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout.startswith("2026-11-26 · 重点")
    # a file gone since is not found, though the index still holds it
    (workdir / "archive" / "2026-11-27.txt").unlink()
    gone = cli(workdir, "archive", "search", "ZeRO")
    assert "2026-11-27" not in gone.stdout
    # the command never wrote to the bot's index
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before


def test_archive_search_leaves_an_index_of_another_folder_alone(workdir: Path) -> None:
    index = _kept_index(workdir)
    before = index.read_bytes()
    other = workdir / "other"
    shutil.copytree(workdir / "archive", other)
    (other / "2026-11-27.txt").unlink()
    found = cli(workdir, "--archive", str(other), "archive", "search", "ZeRO")
    assert "2026-11-27" not in found.stdout  # the other folder's files, scanned
    assert index.read_bytes() == before  # not thrown away, as the bot would for its own


def test_archive_search_scans_when_the_kept_index_cannot_be_read(workdir: Path) -> None:
    import sqlite3

    index = _kept_index(workdir)
    with sqlite3.connect(index) as db:  # an index damaged past what opening it checks
        db.execute("DROP TABLE pieces")
    found = cli(workdir, "archive", "search", "ZeRO")
    assert found.returncode == 0 and "2026-11-27" in found.stdout, found.stderr
    assert "the bot's search index cannot be read (no such table: pieces)" in found.stderr
    assert "Traceback" not in found.stderr
