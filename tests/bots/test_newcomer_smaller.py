"""Issue 20, item 10: the smaller frictions of a newcomer's first minutes, one test each."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bots.cli.doctor import run_checks
from bots.doctor import Status, format_table, ok, warn
from bots.registry import load_settings
from digest_core.clock import zoned_text
from digest_core.testing import make_issue
from tests.bots.test_cli import ROOT, cli
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_args_stay_out_of_the_programs_the_recipes_run() -> None:
    """`make test ARGS=-rs` must not hand ARGS to the test suite's own nested `make run`."""
    probe = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "ARGS=-rs", "--eval",
         'probe-args: ; @echo "[$${ARGS-unset}]"', "probe-args"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert probe.stdout.strip() == "[unset]"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_readmes_site_build_target_is_ignored_by_git() -> None:
    checked = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", "public/index.html"], timeout=30
    )
    assert checked.returncode == 0


async def test_doctor_with_only_the_console_checks_the_clock(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{tmp_path / "archive"}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "l.db"}"\n',
        encoding="utf-8",
    )
    checks = await run_checks(load_settings(cfg))
    [clock] = [c for c in checks if c.name == "clock"]
    assert clock.status in (Status.OK, Status.WARN)  # this machine's kernel decides which
    assert "synchronised" in clock.detail


def test_counts_agree_with_their_nouns() -> None:
    table = format_table([ok("a", "b", "fine"), warn("a", "c", "hm", "fix it")])
    assert table.endswith("2 checks: 0 failed, 1 warning")
    issue = make_issue(dt.date(2026, 11, 30), briefs=1)
    with pytest.raises(IndexError, match=r"this issue has 1 brief$"):
        issue.brief(2)


def test_times_name_their_zone_not_an_ambiguous_abbreviation() -> None:
    at = dt.datetime(2026, 12, 3, 8, 0, tzinfo=SHANGHAI)
    assert zoned_text(at) == "2026-12-03 08:00 (Asia/Shanghai)"
    assert zoned_text(at, day=False) == "08:00 (Asia/Shanghai)"
    fixed = at.astimezone(dt.timezone(dt.timedelta(hours=-5, minutes=-30)))
    assert zoned_text(fixed, day=False) == "18:30 (UTC-05:30)"
    assert zoned_text(at.astimezone(dt.UTC), day=False) == "00:00 (UTC)"


def test_a_one_shot_command_says_its_result_once(tmp_path: Path) -> None:
    """``archive add`` prints ``stored …``; the INFO record saying the same stays out unless
    ``--log-level info`` asks for it."""
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    text = (SAMPLE_ARCHIVE / "2026-11-30.txt").read_text(encoding="utf-8")
    (tmp_path / "2026-12-20.txt").write_text(text, encoding="utf-8")
    done = cli(tmp_path, "archive", "add", "2026-12-20.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stored archive/2026-12-20.txt: 2026-12-20 · ")
    assert done.stdout.rstrip().endswith("posts 2026-12-20 08:00 (Asia/Shanghai)")
    assert done.stderr == ""
    (tmp_path / "archive" / "2026-12-20.txt").unlink()
    logged = cli(tmp_path, "archive", "add", "2026-12-20.txt", "--log-level", "info")
    assert "INFO digest_core.archive.adding: stored the issue of 2026-12-20" in logged.stderr


def _bare_path(tmp_path: Path, *, uid: str) -> str:
    """A PATH with grep and stubs only: no chromium, no fonts, ``id -u`` answering ``uid``,
    a ``sudo`` that asks for a password (fails) and an ``apt-get`` that records its call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "grep").symlink_to(shutil.which("grep") or "/bin/grep")
    stubs = {
        "id": f"echo {uid}",
        "sudo": "exit 1",
        "apt-get": f'echo "apt-get $*" >> {tmp_path / "apt.log"}',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("uid", ["1000", "0"])
def test_make_test_first_says_or_installs_what_the_browser_tests_need(
    tmp_path: Path, uid: str
) -> None:
    """Issue 20, item 2: without Chromium, `make test` begins by installing it as .ci/run does
    (as root, or with sudo) or, when it cannot, by printing the exact command."""
    make = shutil.which("make") or "make"
    done = subprocess.run(
        [make, "-s", "-C", str(ROOT), "browser-deps"],
        env={"PATH": _bare_path(tmp_path, uid=uid)}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    packages = "chromium fonts-wqy-microhei"
    if uid == "0":
        assert done.stdout.startswith("• installing Chromium and a CJK font")
        log = (tmp_path / "apt.log").read_text(encoding="utf-8").splitlines()
        assert log == [
            "apt-get update -qq",
            f"apt-get install -y -qq --no-install-recommends {packages}",
        ]
    else:
        assert (
            done.stdout.splitlines()[1]
            == f"    sudo apt-get install -y --no-install-recommends {packages}"
        )
        assert not (tmp_path / "apt.log").exists()
    dry = subprocess.run(
        [make, "-n", "-C", str(ROOT), "test"], capture_output=True, text=True, timeout=60
    )
    assert dry.stdout.index("apt-get install") < dry.stdout.index("ruff check")
