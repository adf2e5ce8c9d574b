"""Issue #13: what a newcomer and an editor trip over in the first five minutes, each as a test."""

from __future__ import annotations

import datetime as dt
import io
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bots.registry import load_settings
from bots.runtime import open_service
from digest_core.archive import Archive
from digest_core.commands import ADMIN, MAX_ECHO_CHARS, Request
from digest_core.errors import IssueFormatError
from digest_core.loading import Hint, parse_text
from digest_core.rendering import preview
from digest_core.testing import ManualClock
from tests import forkserver
from tests.bots.test_cli import ROOT, cli, cli_env
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

DAY = dt.date(2026, 11, 30)
ISSUE = (SAMPLE_ARCHIVE / "2026-11-30.txt").read_text(encoding="utf-8")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The bundled archive and configuration in a folder of their own (the CLI's cwd)."""
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path


# ---------------------------------------------------------------- 10: a missing archive folder


@pytest.mark.parametrize("command", [["status"], ["run"], ["post"]])
def test_a_missing_archive_folder_is_named_and_exits_1(workdir: Path, command: list[str]) -> None:
    out = cli(workdir, *command, "--archive", str(workdir / "no-such-dir"))
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert f"archive_dir: the archive folder {workdir / 'no-such-dir'} does not exist" in line


def test_a_relative_archive_folder_says_where_it_was_looked_for(workdir: Path) -> None:
    shutil.rmtree(workdir / "archive")  # e.g. started from the wrong directory
    out = cli(workdir, "status")
    assert out.returncode == 1
    assert f"the archive folder archive ({workdir / 'archive'}) does not exist" in out.stderr


# ---------------------------------------------------------------- 5: the words of errors


def test_post_to_a_platform_without_a_token_speaks_of_platform_not_only(workdir: Path) -> None:
    out = cli(workdir, "post", "--platform", "telegram")
    assert out.returncode == 1
    assert "--platform telegram needs a token" in out.stderr
    assert "--only" not in out.stderr


@pytest.mark.parametrize(
    ("line", "label"),
    [("简讯：", "简讯"), ("简讯:", "简讯"), ("简讯 ：", "简讯"), (" 简 讯 ", "简讯"),
     ("经典回顾：", "经典回顾"), ("重点 :", "重点"), ("Briefs:", "Briefs"), ("简讯\u3000", None)],
)  # fmt: skip
def test_a_near_miss_section_label_asks_did_you_mean(line: str, label: str | None) -> None:
    text = ISSUE.replace("\n简讯\n", f"\n{line}\n", 1)
    assert text != ISSUE
    if label is None:  # surrounding (full-width) spaces are stripped: the label itself
        assert parse_text(text, date=DAY) == parse_text(ISSUE, date=DAY)
        return
    with pytest.raises(IssueFormatError) as info:
        parse_text(text, path="x.txt", date=DAY)
    number = ISSUE.split("\n").index("简讯") + 1
    assert info.value.line == number
    assert f"did you mean {label}?" in str(info.value)
    assert "exactly one item" not in str(info.value)


def test_a_lowercase_word_is_still_text_not_a_near_miss() -> None:
    text = ISSUE.replace("\n简讯\n", "\n简讯\nbriefs:\n正文。\n", 1)
    issue = parse_text(text, date=DAY)
    assert issue.briefs[0].title == "briefs:"


@pytest.mark.parametrize(
    "body",
    ["example.org/reports/x", "www.example.org", "arxiv.org/abs/1909.08053", "github.com",
     "htps://example.org/a", "example.org:8080/x"],
)  # fmt: skip
def test_a_body_line_that_is_a_bare_domain_or_path_is_a_warning(body: str) -> None:
    marker = "https://example.org/notes/token-based-rate-limit"
    text = ISSUE.replace(marker, f"{body}\n{marker}", 1)
    hints: list[Hint] = []
    issue = parse_text(text, path="x.txt", date=DAY, hints=hints)
    [hint] = hints
    assert body in {p for b in issue.briefs for p in b.paragraphs}  # loads: text, as before
    assert str(hint).startswith(f"x.txt:{text.split(chr(10)).index(body) + 1}: warning: ")
    assert "without https://" in hint.detail


@pytest.mark.parametrize("body", ["Node.js 的新版本。", "v1.2.3", "PyTorch.nn", "见 example.org"])
def test_ordinary_text_is_not_taken_for_a_link(body: str) -> None:
    text = ISSUE.replace(
        "https://example.org/notes/token-based-rate-limit",
        f"{body}\nhttps://example.org/notes/token-based-rate-limit",
        1,
    )
    hints: list[Hint] = []
    parse_text(text, date=DAY, hints=hints)
    assert hints == []


def test_validate_prints_the_warning_and_still_passes(workdir: Path) -> None:
    path = workdir / "archive" / "2026-11-30.txt"
    link = "https://example.org/reports/topology-aware-allreduce"
    text = ISSUE.replace(link, f"example.org/a\n{link}", 1)
    path.write_text(text, encoding="utf-8")
    out = cli(workdir, "validate", str(path))
    assert out.returncode == 0, out.stdout
    number = text.split("\n").index("example.org/a") + 1
    assert f"2026-11-30.txt:{number}: warning: headline" in out.stdout
    assert "looks like a link without https://" in out.stdout


@pytest.mark.parametrize(
    ("name", "fixed"),
    [("2026-12-1.txt", "2026-12-01.txt"), ("2026_12_01.txt", "2026-12-01.txt"),
     ("20261201.json", "2026-12-01.json"), ("2026-1-5.txt", "2026-01-05.txt")],
)  # fmt: skip
def test_a_date_written_another_way_is_an_error_naming_the_form(
    workdir: Path, name: str, fixed: str
) -> None:
    path = workdir / "archive" / name
    shutil.copy(workdir / "archive" / "2026-11-27.txt", path)
    out = cli(workdir, "validate", str(path))
    assert out.returncode == 1
    assert "undated" not in out.stdout
    assert f"{path}: the date in the name must be written YYYY-MM-DD" in out.stdout
    assert f"rename it {fixed}" in out.stdout
    # the archive reports the same problem instead of skipping the file without a word
    problems = [str(p) for p in Archive(workdir / "archive", index=False).problems]
    assert [p for p in problems if name in p and "YYYY-MM-DD" in p and fixed in p]


def test_an_undated_draft_is_still_checked_as_a_draft(workdir: Path) -> None:
    draft = workdir / "draft.txt"
    shutil.copy(workdir / "archive" / "2026-11-27.txt", draft)
    out = cli(workdir, "validate", str(draft))
    assert out.returncode == 0 and "undated" in out.stdout


# ---------------------------------------------------------------- 4: echoes and repeats


async def test_a_huge_argument_is_quoted_back_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{tmp_path / "archive"}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path}/l.db"\n',
        encoding="utf-8",
    )
    clock = ManualClock(dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC), autoadvance=False)
    huge = "1" * 5000
    async with open_service(load_settings(cfg), clock=clock, out=io.StringIO()) as svc:
        for command, args in [
            ("issue", (huge,)),
            ("headline", (huge,)),
            ("brief", ("2", huge)),
            (huge, ()),
            ("repost", (huge,)),
            ("reactivate", (huge,)),
        ]:
            request = Request(command, args, platform="console", capabilities=ADMIN)
            reply = await svc.commands.handle(request)
            text = "\n".join(preview(m, request.flavor) for m in reply.messages)
            assert "1" * MAX_ECHO_CHARS not in text, (command[:10], text[:200])
            assert len(text) < 1000


def test_a_missed_post_alert_is_printed_once(workdir: Path) -> None:
    """Two log lines and the console's alert block were the same message three times."""
    first = cli(workdir, "post", "--date", "2026-11-26")  # a ledger that has posted before
    assert first.returncode == 0, first.stderr
    now = dt.datetime.now(dt.UTC)
    cfg = workdir / "config" / "digest-bot.toml"
    text = cfg.read_text(encoding="utf-8")
    text = text.replace('timezone = "Asia/Shanghai"', 'timezone = "UTC"')
    text = text.replace('"08:00"', f'"{now - dt.timedelta(hours=2):%H:%M}"')
    text = text.replace("catch_up_hours = 6", "catch_up_hours = 0.5")
    cfg.write_text(text, encoding="utf-8")
    for day in (now.date(), now.date() - dt.timedelta(days=1)):  # the one that was missed
        shutil.copy(workdir / "archive" / "2026-11-27.txt", workdir / "archive" / f"{day}.txt")
    post_time = (now - dt.timedelta(hours=2)).time().replace(second=0, microsecond=0)
    # the days whose post was due (2 h late, beyond the half-hour catch-up): both, unless today's
    # post time is still to come (before 02:00 UTC)
    due = [d for d in (now.date() - dt.timedelta(days=1), now.date())
           if dt.datetime.combine(d, post_time, dt.UTC) <= now]  # fmt: skip
    out_path, err_path = workdir / "out.txt", workdir / "err.txt"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        proc = forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run"], cwd=workdir, stdin=subprocess.DEVNULL,
            stdout=out_file, stderr=err_file, text=True, env=cli_env(),
        )  # fmt: skip
        deadline = time.monotonic() + 30
        # the alert of every missed day, each printed at once with anything printed along
        while time.monotonic() < deadline and not all(
            f"Missed the post of {d}" in out_path.read_text() + err_path.read_text() for d in due
        ):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    both = out_path.read_text() + err_path.read_text()
    missed = [d for d in (now.date(), now.date() - dt.timedelta(days=1))
              if f"Missed the post of {d}" in both]  # fmt: skip
    assert missed, both
    for day in missed:
        assert both.count(f"Missed the post of {day}") == 1, both


# ---------------------------------------------------------------- 1: the console's greeting


async def _service_greeting(tmp_path: Path, *, schedule: bool, local: str) -> str:
    from zoneinfo import ZoneInfo

    from digest_core.service.greeting import greeting

    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{tmp_path / "archive"}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path}/l.db"\n'
        f"[schedule]\nenabled = {'true' if schedule else 'false'}\n",
        encoding="utf-8",
    )
    # 20:00 in Shanghai on 2026-11-30: today's post (08:00) is long past, nothing to see
    clock = ManualClock(dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC), autoadvance=False)
    async with open_service(load_settings(cfg), clock=clock, out=io.StringIO()) as svc:
        return greeting(svc.archive, svc.poster, zone=svc.zone, local_zone=ZoneInfo(local))


async def test_the_greeting_says_what_is_current_and_when_the_next_post_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    text = await _service_greeting(tmp_path, schedule=True, local="America/New_York")
    assert "current issue: 2026-11-30 · 集合通信的拓扑账" in text
    assert "next post: 2026-12-01 08:00 Asia/Shanghai (your time: 2026-11-30 19:00 EST)" in text
    assert "the file for 2026-12-01 is not in the archive yet" in text
    assert "/today" in text and "/help" in text


async def test_the_greeting_says_when_the_daily_post_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    text = await _service_greeting(tmp_path, schedule=False, local="UTC")
    assert "the daily post is off" in text and "next post" not in text
