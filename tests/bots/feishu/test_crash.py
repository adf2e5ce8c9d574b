"""SIGKILL mid-post on the Feishu app bot: the real `digest-bot run` (lark-oapi's long connection,
the send API) as a subprocess, killed while it posts today's issue to its group chats and to
its subscribers, then started again: every reader gets every part, once.

The double answers every send late (after it took effect), so the kill finds parts Feishu
created but the bot never heard of: in flight in the ledger. The restart sends them again
with the same ``uuid`` (derived from the part's ledger identity) and, as Feishu does within
an hour, the double creates nothing more and answers with the message sent before.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from digest_core.loading import load_issue
from digest_core.port import RenderOptions
from digest_core.rendering import feishu as feishu_render
from tests.bots.app_crash import (
    parts_in,
    start_bot,
    stop,
    subscribe,
    today,
    wait_for,
    write_run_config,
)
from tests.fakes.feishu_app import FakeFeishuApp
from tests.fakes.threaded import Served, served

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

READERS = [f"ou_reader{i:024d}" for i in range(40)]
GROUPS = [f"oc_group{i:025d}" for i in range(2)]
#: seconds each send is answered late, after it took effect
LATENCY = 0.5
#: messages created when the first process is killed
KILL_AFTER = 30


def created(fs: FakeFeishuApp) -> tuple[int, int]:
    """(messages created in the readers' and groups' chats, sends held unanswered)."""
    return sum(len(fs.chats[c].sent) for c in [*READERS, *GROUPS]), fs.held


def contents(fs: FakeFeishuApp) -> dict[str, list[dict[str, Any]]]:
    return {c: [dict(m) for m in fs.chats[c].sent] for c in [*READERS, *GROUPS]}


def test_sigkill_mid_post_then_restart_every_reader_gets_every_part_once(
    tmp_path: Path,
) -> None:
    fake = FakeFeishuApp(latency=LATENCY)
    log = tmp_path / "bot.log"
    with served(fake, "fake-feishu") as fs:
        for reader in READERS:
            fs.call(fake.add_chat, reader, "p2p")
        for group in GROUPS:
            fs.call(fake.add_chat, group, "group")
        table = {"app_id": fake.app_id, "api_base": fake.url, "chats": GROUPS}
        config = write_run_config(tmp_path, "feishu", table)
        subscribe(tmp_path, "feishu", READERS)
        issue = load_issue(tmp_path / "archive" / f"{today()}.txt")
        expected = _cards(issue, buttons=True)
        env = {"DIGEST_BOT_FEISHU__APP_SECRET": fake.app_secret}
        total = len(expected) * (len(READERS) + len(GROUPS))

        first = start_bot(config, env, log)
        try:
            wait_for(lambda: _kill_now(fs), 60, log)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        at_kill, _ = fs.call(created, fake)
        assert at_kill < total, "the kill did not land mid-post"
        left = parts_in(tmp_path / "digest.db", "in_flight")
        left += parts_in(tmp_path / "digest.db", "unknown")
        assert left >= 1, "the kill found nothing in flight"
        assert fs.call(lambda: list(fake.replays)) == []

        second = start_bot(config, env, log)
        try:
            wait_for(lambda: _done(fs, tmp_path, total), 60, log)
        finally:
            stop(second, log)
        sent = fs.call(contents, fake)
        replays = fs.call(lambda: list(fake.replays))

    # nothing lost, nothing twice: each chat holds the issue's parts once, in order
    copies = Counter(
        (chat, json.dumps(m["content"], sort_keys=True)) for chat, ms in sent.items() for m in ms
    )
    assert max(copies.values()) == 1, "a reader saw a part twice"
    for chat, messages in sent.items():
        assert [m["content"] for m in messages] == expected, chat
        assert len({m["uuid"] for m in messages}) == len(messages)  # each part its own uuid
    # the parts the kill left in flight that Feishu had created came back by their uuid:
    # the restart sent the same uuid, and the double answered with the first message
    assert 1 <= len(replays) <= left, (len(replays), left)
    for replay in replays:
        [original] = [m for m in sent[replay["chat_id"]] if m["uuid"] == replay["uuid"]]
        assert original["message_id"] == replay["message_id"]
    # for the report (pytest -s)
    print(
        f"feishu crash: {at_kill}/{total} created before SIGKILL, {left} in flight; "
        f"{len(replays)} resent with their uuid and not created again; 0 duplicates"
    )


def _cards(issue: Any, *, buttons: bool) -> list[Any]:
    """The cards of ``issue`` as the app bot renders its posts."""
    messages = feishu_render.CARDS.render(issue, options=RenderOptions(buttons=buttons))
    return [m.payload["card"] for m in messages]


def _kill_now(fs: Served[FakeFeishuApp]) -> bool:
    """Far enough into the post, with a send that took effect but is not answered yet."""
    done, held = fs.call(created, fs.double)
    return done >= KILL_AFTER and held >= 1


def _done(fs: Served[FakeFeishuApp], tmp: Path, total: int) -> bool:
    """Every part created, answered, and recorded sent in the ledger."""
    done, held = fs.call(created, fs.double)
    if done < total or held or fs.double.unanswered:
        return False
    db = tmp / "digest.db"
    return parts_in(db, "sent") >= total and not any(
        parts_in(db, state) for state in ("pending", "in_flight", "unknown")
    )
