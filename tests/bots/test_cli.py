"""The `digest-bot` command as a user runs it: real subprocesses on a temporary setup."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver
from tests.fakes.discord_api import FAKE_TOKEN
from tests.samples import SAMPLE_ARCHIVE

pytestmark = pytest.mark.slow  # real processes, servers or a browser

ROOT = Path(__file__).resolve().parents[2]
SEED_DIR = ROOT.parent / "shared" / "seeds"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLE_ARCHIVE, tmp_path / "archive")
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "digest-bot.toml", tmp_path / "config" / "digest-bot.toml")
    return tmp_path


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def cli(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "bots.cli", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
    )


def test_validate_good_files(workdir: Path) -> None:
    out = cli(workdir, "validate", "archive")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": ok — ") == 5


def test_validate_reports_path_line_and_exits_1(workdir: Path) -> None:
    bad = workdir / "2026-12-01.txt"
    bad.write_text("AI 技术日报\n重点\n只有标题\n简讯\n", encoding="utf-8")
    out = cli(workdir, "validate", str(bad), "archive/2026-11-26.txt")
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{bad}:3: ")
    assert "只有标题" in lines[0]
    assert lines[1].startswith("archive/2026-11-26.txt: ok")
    assert "1 of 2 files failed" in out.stderr


def test_validate_warns_of_an_issue_without_briefs(workdir: Path) -> None:
    """The first 30% of a file (a save cut short) is a valid headline-only issue: ok, but
    with a warning that asks whether the file is complete; the whole file has none."""
    full = (workdir / "archive" / "2026-11-27.txt").read_text(encoding="utf-8")
    cut = workdir / "2026-11-27.txt"
    cut.write_text(full[: full.rfind("\n", 0, len(full) * 3 // 10) + 1], encoding="utf-8")
    out = cli(workdir, "validate", str(cut), "archive/2026-11-27.txt")
    assert out.returncode == 0, out.stderr
    warning, ok, whole = out.stdout.splitlines()
    assert warning.startswith(f"{cut}:8: warning: the issue has no briefs")
    assert "is the file complete?" in warning
    assert ok.startswith(f"{cut}: ok — 2026-11-27, 1 headline, 0 briefs")
    assert whole.startswith("archive/2026-11-27.txt: ok")


def test_validate_goes_on_after_a_file_name_that_is_not_a_date(workdir: Path) -> None:
    bad = workdir / "2026-13-45.txt"
    shutil.copy(workdir / "archive" / "2026-11-26.txt", bad)
    out = cli(workdir, "validate", str(bad), "archive/2026-11-27.txt")
    assert out.returncode == 1
    assert "not a calendar day" in out.stdout
    assert "archive/2026-11-27.txt: ok" in out.stdout


def test_validate_tolerates_bom_and_crlf(workdir: Path) -> None:
    text = (workdir / "archive" / "2026-11-28.txt").read_text(encoding="utf-8")
    crlf = workdir / "draft-crlf.txt"
    crlf.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    out = cli(workdir, "validate", "--date", "2026-11-28", str(crlf))
    assert out.returncode == 0, out.stdout
    plain = cli(workdir, "preview", "--file", "archive/2026-11-28.txt", "--json")
    crlf_json = cli(workdir, "preview", "--file", str(crlf), "--date", "2026-11-28", "--json")
    assert json.loads(plain.stdout) == json.loads(crlf_json.stdout)


@pytest.mark.skipif(not SEED_DIR.is_dir(), reason="../shared/seeds is not present")
def test_seed_validates_and_previews(workdir: Path) -> None:
    seed = next(SEED_DIR.glob("*.txt"))
    out = cli(workdir, "validate", "--date", "2026-10-27", str(seed))
    assert out.returncode == 0, out.stdout
    assert "6 briefs, 1 classic review" in out.stdout
    for platform in ("telegram", "discord"):
        prev = cli(
            workdir,
            "preview",
            "--file",
            str(seed),
            "--date",
            "2026-10-27",
            "--platform",
            platform,
            "--json",
        )
        assert prev.returncode == 0, prev.stderr
        assert json.loads(prev.stdout)


def test_preview_json_is_the_exact_payloads(workdir: Path) -> None:
    tg = cli(workdir, "preview", "--date", "2026-11-28", "--platform", "telegram", "--json")
    assert tg.returncode == 0, tg.stderr
    payloads = json.loads(tg.stdout)
    assert all(p["parse_mode"] == "HTML" for p in payloads)
    html = "".join(p["text"] for p in payloads)
    assert "&lt;think&gt;" in html and "<think>" not in html  # issue text is escaped
    dc = cli(workdir, "preview", "--date", "2026-11-28", "--platform", "discord", "--json")
    messages = json.loads(dc.stdout)
    assert all(m["allowed_mentions"] == {"parse": []} for m in messages)
    dumped = json.dumps(messages, ensure_ascii=False)
    assert "@everyone" not in dumped  # defanged in the text, and nobody is pinged anyway


def test_preview_long_issue_splits_on_telegram(workdir: Path) -> None:
    out = cli(workdir, "preview", "--date", "2026-11-27", "--section", "headline", "--json")
    assert len(json.loads(out.stdout)) >= 2


@pytest.mark.parametrize("section", ["headline", "briefs", "classic", "toc"])
def test_preview_sections_readable(workdir: Path, section: str) -> None:
    out = cli(workdir, "preview", "--date", "2026-11-26", "--section", section)
    assert out.returncode == 0, out.stderr
    assert "telegram message 1/" in out.stdout


def test_preview_errors(workdir: Path) -> None:
    missing = cli(workdir, "preview", "--date", "2020-01-01")
    assert missing.returncode == 1 and "2026-11-26" in missing.stderr
    no_brief = cli(workdir, "preview", "--date", "2026-11-26", "--brief", "42")
    assert no_brief.returncode == 1 and "42" in no_brief.stderr
    bad_date = cli(workdir, "preview", "--date", "2026-02-30")
    assert bad_date.returncode == 2 and "not a date" in bad_date.stderr


def test_archive_list_and_search(workdir: Path) -> None:
    (workdir / "archive" / "2026-12-03.txt").write_text("不是日报\n", encoding="utf-8")
    listed = cli(workdir, "archive", "list")
    assert listed.returncode == 1  # a broken file is listed as invalid (issue #13)
    assert listed.stdout.count("  published  ") == 5
    assert "2026-12-03  invalid    " in listed.stdout  # listed, the listing not broken
    found = cli(workdir, "archive", "search", "ZeRO")
    assert found.returncode == 0 and "2026-11-27" in found.stdout
    none = cli(workdir, "archive", "search", "绝对不会出现的词")
    assert none.returncode == 1
    blank = cli(workdir, "archive", "search", "  ")  # a usage error, not a traceback
    assert blank.returncode == 2 and "Traceback" not in blank.stderr
    assert blank.stderr.strip() == "digest-bot: archive search: give a word to look for, e.g. 模型"


def test_validate_a_folder_never_follows_a_link_out_of_it(workdir: Path) -> None:
    secret = workdir / "secrets.env"
    secret.write_text("API_TOKEN=hunter2-do-not-print-me\nline two\n", encoding="utf-8")
    (workdir / "archive" / "2026-12-01.txt").symlink_to(secret)
    out = cli(workdir, "validate", "archive")
    assert out.returncode == 1
    assert "hunter2" not in out.stdout + out.stderr and "API_TOKEN" not in out.stdout + out.stderr
    assert "archive/2026-12-01.txt: a link that leads out of the folder: not followed" in out.stdout
    assert out.stdout.count(": ok — ") == 5
    listed = cli(workdir, "archive", "list")  # the archive agrees: not served
    assert "2026-12-01  invalid    archive/2026-12-01.txt: a link that leads out" in listed.stdout


def test_validate_a_folder_holding_a_fifo_does_not_hang(workdir: Path) -> None:
    os.mkfifo(workdir / "archive" / "2026-12-01.txt")
    out = cli(workdir, "validate", "archive")  # cli() gives up after 60 s
    assert out.returncode == 1
    assert "archive/2026-12-01.txt: not a regular file (a FIFO)" in out.stdout
    assert out.stdout.count(": ok — ") == 5


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("2026-11-30.json", "ignored: 2026-11-30.txt has the same date and is used instead"),
        ("2026-12-01.TXT", "the suffix must be lowercase: rename it 2026-12-01.txt"),
        ("2026-12-01.Txt", "the suffix must be lowercase: rename it 2026-12-01.txt"),
        ("٢٠٢٦-١٢-٠٢.txt", "the date in the name must be written with the digits 0-9"),
    ],
)
def test_validate_rejects_what_the_archive_would_not_serve_as_named(
    workdir: Path, name: str, problem: str
) -> None:
    shutil.copy(workdir / "archive" / "2026-11-30.txt", workdir / "archive" / name)
    out = cli(workdir, "validate", "archive")
    assert out.returncode == 1, out.stdout
    assert f"archive/{name}: {problem}" in out.stdout
    assert "1 of 6 files failed" in out.stderr
    listed = cli(workdir, "archive", "list")  # one rule: the archive does not serve it either
    [line] = [line for line in listed.stdout.splitlines() if name in line]
    assert "  invalid    " in line and f"{name}: {problem}" in line
    assert listed.stdout.count("  published  ") == 5 and listed.returncode == 1


def test_validate_a_missing_path_names_it_in_one_line(workdir: Path) -> None:
    out = cli(workdir, "validate", "/no/such/dir")
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr == "no such file or folder: /no/such/dir\n"
    both = cli(workdir, "validate", "/no/such/dir", "archive/2026-11-26.txt")
    assert both.returncode == 1 and "archive/2026-11-26.txt: ok" in both.stdout
    assert both.stderr.splitlines() == [
        "no such file or folder: /no/such/dir",
        "1 of 2 files failed",
    ]


def test_bad_config_value_names_key_and_exits_1(workdir: Path) -> None:
    cfg = workdir / "config" / "digest-bot.toml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace('"08:00"', '"8 点"'), encoding="utf-8")
    out = cli(workdir, "archive", "list")
    assert out.returncode == 1
    assert "schedule.post_time" in out.stderr and "HH:MM" in out.stderr


def test_post_twice_sends_once(workdir: Path) -> None:
    first = cli(workdir, "post", "--date", "2026-11-26")
    assert first.returncode == 0, first.stderr
    assert "console 2026-11-26: 发送 / sent 1" in first.stdout
    assert "AI 技术日报" in first.stdout  # the console platform printed the post
    second = cli(workdir, "post", "--date", "2026-11-26")
    assert second.returncode == 0
    assert "sent 0" in second.stdout
    forced = cli(workdir, "post", "--date", "2026-11-26", "--force")
    assert "sent 1" in forced.stdout
    status = cli(workdir, "status")
    assert "stdout: 最近 / last 2026-11-26" in status.stdout


def test_run_console_answers_typed_commands_and_stops_on_sigterm(workdir: Path) -> None:
    out_path, err_path = workdir / "out.txt", workdir / "err.txt"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        proc = forkserver.Popen(
            [sys.executable, "-m", "bots.cli", "run"],
            cwd=workdir,
            stdin=subprocess.PIPE,
            stdout=out_file,
            stderr=err_file,
            text=True,
            env=cli_env(),
        )
        assert proc.stdin is not None
        proc.stdin.write("/brief 2\n/issue 2026-11-29\n/search \x1b[31mred\n/brief x\n")
        proc.stdin.close()  # non-interactive from here on: the bot keeps running
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "/brief N" not in out_path.read_text():
            time.sleep(0.05)
        assert proc.poll() is None  # still running with stdin closed
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    out, err = out_path.read_text(), err_path.read_text()
    assert "> /brief 2" in out and "> /issue 2026-11-29" in out
    assert "AI Tech Daily" in out  # the English issue of 2026-11-29
    assert "用法 / usage: /brief N" in out
    assert "stopping" in err
    # a typed escape sequence is echoed and quoted as text, never reaching the terminal raw
    assert "\x1b" not in out and "> /search \\x1b[31mred" in out


# ---------------------------------------------------------------- issue #8: one line, exit 1


def cli_with(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """:func:`cli` with extra environment variables."""
    return forkserver.run(
        [sys.executable, "-m", "bots.cli", *args],
        cwd=cwd, input="", capture_output=True, text=True, env={**cli_env(), **env}, timeout=60,
    )  # fmt: skip


def assert_one_line(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 1 and one line of error on stderr (besides timestamped log records)."""
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    [line] = [x for x in out.stderr.splitlines() if not re.match(r"\d{4}-\d\d-\d\d ", x)]
    for fragment in fragments:
        assert fragment in line, line


def test_an_env_list_that_is_not_json_is_one_line_naming_the_variable(workdir: Path) -> None:
    out = cli_with(workdir, {"DIGEST_BOT_TELEGRAM__CHANNELS": "@foo"}, "archive", "list")
    assert_one_line(
        out, """DIGEST_BOT_TELEGRAM__CHANNELS: expected a JSON list such as '["@my_channel"]'"""
    )


def test_a_bad_token_file_variable_is_blamed_on_the_variable(workdir: Path) -> None:
    missing = workdir / "no-such-token"
    out = cli_with(workdir, {"DIGEST_BOT_TELEGRAM__TOKEN_FILE": str(missing)}, "status")
    assert_one_line(out, "environment DIGEST_BOT_TELEGRAM__TOKEN_FILE", str(missing), "point it at")
    assert "digest-bot.toml" not in out.stderr


def test_discord_sync_without_a_network_is_one_line(workdir: Path) -> None:
    """The host cannot be resolved (.invalid never is), or nothing listens there any more
    when the bot logs in (the gateway was asked from a server that then went away)."""
    env = {"DIGEST_BOT_DISCORD__TOKEN": FAKE_TOKEN}  # token-shaped: refused otherwise
    unresolvable = "http://discord.invalid/api/v10"
    out = cli_with(
        workdir, {**env, "DIGEST_BOT_DISCORD__API_BASE_URL": unresolvable}, "discord", "sync"
    )
    assert_one_line(
        out, f"cannot reach Discord at {unresolvable}: cannot resolve discord.invalid",
        "check the network",
    )  # fmt: skip

    with _answer_once({"url": "ws://127.0.0.1:9"}) as base:
        out = cli_with(
            workdir, {**env, "DIGEST_BOT_DISCORD__API_BASE_URL": base}, "discord", "sync"
        )
    port = base.split(":")[2].split("/")[0]
    assert_one_line(
        out, f"cannot reach Discord at {base}: cannot connect to 127.0.0.1:{port} "
        "(connection refused); check the network or [discord] api_base_url",
    )  # fmt: skip


@contextlib.contextmanager
def _answer_once(body: dict[str, str]) -> Iterator[str]:
    """An HTTP server that answers one request with ``body`` as JSON, then stops listening;
    yields its base URL (``http://127.0.0.1:PORT/api/v10``)."""

    class Once(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Once)
    port = server.server_address[1]

    def serve() -> None:
        server.handle_request()
        server.server_close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/api/v10"
    finally:
        if thread.is_alive():
            server.server_close()


def test_an_unreachable_bot_api_is_one_line(workdir: Path) -> None:
    port = _closed_port()
    base = f"http://127.0.0.1:{port}/bot"
    env = {"DIGEST_BOT_TELEGRAM__TOKEN": "1:abc", "DIGEST_BOT_TELEGRAM__API_BASE_URL": base}
    out = cli_with(workdir, env, "post", "--platform", "telegram", "--date", "2026-11-26")
    assert_one_line(
        out, f"cannot reach the Bot API at {base}: connection refused; check the network "
        "or [telegram] api_base_url",
    )  # fmt: skip


async def test_network_reasons_of_real_connection_failures() -> None:
    """What the CLI prints for aiohttp, httpx and socket failures, from real ones; anything
    else is not a network failure (the CLI then lets it show as the bug it is)."""
    import aiohttp
    import httpx

    from bots.network import network_reason
    from digest_core.errors import TransientError

    port = _closed_port()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError) as aio:
            await session.get(f"http://127.0.0.1:{port}/")
    assert network_reason(aio.value) == f"cannot connect to 127.0.0.1:{port} (connection refused)"
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError) as hx:
            await client.get(f"http://127.0.0.1:{port}/")
    try:  # as adapters raise it: translated, the cause kept
        raise TransientError("send failed") from hx.value
    except TransientError as wrapped:
        assert network_reason(wrapped) == "connection refused"
    assert network_reason(ValueError("not a network error")) is None


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
