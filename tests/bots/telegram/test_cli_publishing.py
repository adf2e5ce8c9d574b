"""`digest-bot preview --to-admins` and `digest-bot post` saying why it sent nothing, against the
Bot API double running as its own process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bots.cli import EXIT_FAILED, EXIT_OK, main
from digest_core.archive import Archive
from digest_core.rendering import Part, RenderOptions, render
from digest_core.rendering import telegram as telegram_render
from tests.bots.telegram.harness import ADMIN, CHANNEL, TODAY, write_config
from tests.fakes.telegram_api import DEFAULT_TOKEN, running_process

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
]


@pytest.fixture
def fake_url() -> Iterator[str]:
    with running_process({CHANNEL: "channel", ADMIN: "private"}) as root:
        yield root


def _sent(root: str, chat: int) -> list[dict[str, object]]:
    with httpx.Client(base_url=root) as client:
        result: list[dict[str, object]] = client.get(
            "/_fake/sent", params={"chat_id": chat}
        ).json()["result"]
    return result


def test_preview_to_admins_sends_the_post_privately_and_records_no_delivery(
    fake_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(tmp_path, base_url=fake_url + "/bot", channels=[str(CHANNEL)])
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
    argv = ["preview", "--to-admins", "--config", str(config), "--date", str(TODAY)]
    assert main(argv) == EXIT_OK
    assert f"telegram: preview of {TODAY} sent to 1 admin(s)" in capsys.readouterr().out
    issue = Archive(tmp_path / "archive").on(TODAY)
    want = render(issue, telegram_render, Part.ALL, options=RenderOptions(buttons=True))
    got = _sent(fake_url, ADMIN)
    assert [m["html"] for m in got[1 : 1 + len(want)]] == [m.payload["text"] for m in want]
    assert got[len(want)]["reply_markup"] == want[-1].payload["reply_markup"]  # buttons too
    assert "预览" in str(got[0]["text"]) and "预览结束" in str(got[-1]["text"])
    assert _sent(fake_url, CHANNEL) == []
    # nothing was a delivery: a post afterwards sends the channel everything
    post = ["post", "--config", str(config), "--platform", "telegram", "--date", str(TODAY)]
    assert main(post) == EXIT_OK
    assert f"telegram {TODAY}: 发送 / sent {len(want)}" in capsys.readouterr().out
    # a second post sends nothing, and says why
    assert main(post) == EXIT_OK
    out = capsys.readouterr().out
    assert f"telegram {TODAY}: 发送 / sent 0" in out
    assert "already delivered at 2026-" in out and "add --force to send it again" in out


def test_preview_to_admins_without_admins_fails_with_the_fix(
    fake_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(tmp_path, base_url=fake_url + "/bot", admins=())
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", DEFAULT_TOKEN)
    argv = ["preview", "--to-admins", "--config", str(config), "--date", str(TODAY)]
    assert main(argv) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "no admin got the preview" in err and "[telegram] admins" in err
    assert "Traceback" not in err
