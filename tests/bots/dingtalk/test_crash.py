"""SIGKILL mid-post on the DingTalk app robot: the real `digest-bot run` (dingtalk-stream's Stream
client, the robot's send APIs) as a subprocess, killed while it posts today's issue to its
group conversations and, one to one, to its subscribers, then started again.

DingTalk's send APIs take no idempotency key: a part whose send took effect but whose answer
the killed bot never read is sent again after the restart. So every reader gets every part
in order, and the only repeats are the parts the ledger had in flight, at most one per
conversation. The double answers every send late (after it took effect), so the kill finds
such parts.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from bots.dingtalk.api import msg_param
from digest_core.loading import load_issue
from digest_core.port import RenderOptions
from digest_core.rendering import dingtalk as dingtalk_render
from tests.bots.app_crash import (
    parts_in,
    start_bot,
    stop,
    subscribe,
    today,
    wait_for,
    write_run_config,
)
from tests.fakes.dingtalk_app import FakeDingTalkApp
from tests.fakes.threaded import Served, served

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

READERS = [f"staff-reader-{i:02d}" for i in range(12)]
GROUPS = [f"cidCrashGroup{i}==" for i in range(2)]
#: seconds each send is answered late, after it took effect
LATENCY = 0.6
#: messages sent when the first process is killed
KILL_AFTER = 20


def created(fake: FakeDingTalkApp) -> tuple[int, int]:
    """(messages in the readers' and groups' conversations, sends held unanswered)."""
    return sum(len(fake.conversations[c].sent) for c in [*READERS, *GROUPS]), fake.held


def test_sigkill_mid_post_then_restart_repeats_only_the_parts_in_flight(
    tmp_path: Path,
) -> None:
    fake = FakeDingTalkApp(latency=LATENCY)
    log = tmp_path / "bot.log"
    with served(fake, "fake-dingtalk") as dt:
        for reader in READERS:
            dt.call(fake.add, reader, "user")
        for group in GROUPS:
            dt.call(fake.add, group, "group")
        table = {"client_id": fake.client_id, "openapi_base": fake.url, "chats": GROUPS}
        config = write_run_config(tmp_path, "dingtalk", table)
        subscribe(tmp_path, "dingtalk", READERS)
        issue = load_issue(tmp_path / "archive" / f"{today()}.txt")
        rendered = dingtalk_render.render(issue, options=RenderOptions(buttons=True))
        # readers get the ActionCard with the section buttons; groups markdown only
        private = [_sent_form(m) for m in rendered]
        group = [_sent_form(dingtalk_render.as_markdown(m)) for m in rendered]
        env = {"DIGEST_BOT_DINGTALK__CLIENT_SECRET": fake.client_secret}
        total = len(rendered) * (len(READERS) + len(GROUPS))

        first = start_bot(config, env, log)
        try:
            wait_for(lambda: _kill_now(dt), 60, log)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        at_kill, _ = dt.call(created, fake)
        assert at_kill < total, "the kill did not land mid-post"
        db = tmp_path / "digest.db"
        left = parts_in(db, "in_flight") + parts_in(db, "unknown")
        assert left >= 1, "the kill found nothing in flight"

        second = start_bot(config, env, log)
        try:
            wait_for(lambda: _done(dt, db, total), 90, log)
        finally:
            stop(second, log)
        sent = dt.call(lambda: {c: list(fake.conversations[c].sent) for c in [*READERS, *GROUPS]})

    repeats = 0
    for conversation, got in sent.items():
        # every part, in order; the part in flight at the kill may follow itself once
        deduped = [m for i, m in enumerate(got) if i == 0 or m != got[i - 1]]
        assert deduped == (group if conversation in GROUPS else private), conversation
        assert len(got) - len(deduped) <= 1, f"{conversation}: more than one part repeated"
        repeats += len(got) - len(deduped)
    # the repeats are parts the ledger had in flight (a send held at the kill took effect)
    assert 1 <= repeats <= left, (repeats, left)
    print(
        f"dingtalk crash: {at_kill}/{total} sent before SIGKILL, {left} in flight; "
        f"{repeats} repeated after the restart (no idempotency key)"
    )


def _sent_form(message: Any) -> dict[str, Any]:
    """What the double records of one of our messages."""
    key, param = msg_param(message)
    return {"msgKey": key, "msgParam": param}


def _kill_now(dt: Served[FakeDingTalkApp]) -> bool:
    """Far enough into the post, with a send that took effect but is not answered yet."""
    done, held = dt.call(created, dt.double)
    return done >= KILL_AFTER and held >= 1


def _done(dt: Served[FakeDingTalkApp], db: Path, total: int) -> bool:
    """Every part recorded sent in the ledger and every send answered."""
    _, held = dt.call(created, dt.double)
    if held or dt.double.unanswered:
        return False
    return parts_in(db, "sent") >= total and not any(
        parts_in(db, state) for state in ("pending", "in_flight", "unknown")
    )
