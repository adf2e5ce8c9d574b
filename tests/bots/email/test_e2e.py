"""The email edition end to end: real ``digest-bot run`` (its HTTP server) and ``digest-bot
post`` processes, a real SMTP server on loopback.

A reader subscribes by the form, confirms through the link mailed to them (a GET only shows
the button), gets the next issue with a DKIM signature dkimpy verifies, opens the unsubscribe
page (a GET: still subscribed, as a link scanner's prefetch must leave them), unsubscribes by
one RFC 8058 POST, and gets nothing more. On the way, the preferences page the issue links
changes their format, and the next post comes in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import sys
from email import policy
from email.parser import BytesParser
from pathlib import Path

import aiohttp
import dkim
import pytest
import yarl

from bots.email.addresses import reader_id
from tests import forkserver, ports
from tests.bots.email.helpers import SECRET, SENDER, dkim_keys
from tests.bots.workchat_helpers import ARCHIVE, ROOT
from tests.fakes.smtp import FakeRelay, Received

pytestmark = pytest.mark.slow  # real processes, servers or a browser

DAY = "2026-11-30"
ADDRESS = "reader@example.net"


def free_port() -> int:
    return ports.free_port()


def body_of(received: Received, kind: str) -> str:
    parsed = BytesParser(policy=policy.default).parsebytes(received.data)
    part = parsed.get_body((kind,))
    assert part is not None
    return str(part.get_content())


async def post(config: Path, env: dict[str, str], *extra: str, code: int = 0) -> str:
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "post", "--config", str(config),
        "--platform", "email", "--date", DAY, *extra,
        cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == code, (out + err).decode()[-2000:]
    return (out + err).decode()


async def test_subscribe_confirm_receive_unsubscribe_through_real_processes(
    tmp_path: Path,
) -> None:
    pem, record = dkim_keys(tmp_path)
    http_port = free_port()
    base = f"http://127.0.0.1:{http_port}/"
    rid = reader_id(ADDRESS, SECRET)
    with FakeRelay(senders={f"digest+{rid}@example.org"}) as relay:
        config = tmp_path / "digest-bot.toml"
        config.write_text(
            f'archive_dir = "{ARCHIVE}"\n'
            f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n'
            'timezone = "Asia/Shanghai"\n'
            "[schedule]\nenabled = false\n"
            f'[http]\nlisten = "127.0.0.1:{http_port}"\nsite = true\n'
            f'[email]\nhost = "127.0.0.1"\nport = {relay.port}\nsecurity = "none"\n'
            f'from = "AI 技术日报 <{SENDER}>"\npublic_url = "{base}"\n'
            f'address_book = "{tmp_path / "readers.sqlite3"}"\n'
            f'dkim_selector = "s1"\ndkim_domain = "example.org"\ndkim_key_file = "{pem}"\n',
            encoding="utf-8",
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")},
            "DIGEST_BOT_EMAIL__SECRET_KEY": SECRET,
        }
        run = await forkserver.create_subprocess_exec(
            sys.executable, "-m", "bots.cli", "run", "--config", str(config),
            cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            async with aiohttp.ClientSession() as http:
                for _ in range(600):  # until the server answers (at most 60 s)
                    try:
                        async with http.get(base + "email/subscribe") as answer:
                            if answer.status == 200:
                                break
                    except aiohttp.ClientConnectionError:
                        pass
                    assert run.returncode is None
                    await asyncio.sleep(0.1)
                # every page of the live web archive carries the form
                for page in ("", "2026/11/30/"):
                    async with http.get(base + page) as answer:
                        text = await answer.text()
                    action = re.search(
                        r'<form class="subscribe" method="post" action="([^"]+)"', text
                    )
                    assert action is not None, page
                    assert (
                        str(answer.url.join(yarl.URL(action.group(1)))) == base + "email/subscribe"
                    )
                # a bad address gets the same answer as a good one
                async with http.post(base + "email/subscribe", data={"address": "no"}) as a:
                    refused = await a.text()
                chosen = {"address": ADDRESS, "format": "headline"}  # readers' own format
                async with http.post(base + "email/subscribe", data=chosen) as a:
                    assert a.status == 200
                    assert await a.text() == refused
                [confirmation] = await asyncio.to_thread(relay.wait_for, 1)
                assert confirmation.recipients == [ADDRESS]
                link = re.search(r"http://\S+/email/confirm\?t=\S+", body_of(confirmation, "plain"))
                assert link is not None
                async with http.get(link.group(0)) as a:  # a scanner's GET: only a button
                    assert a.status == 200 and '<form method="post"' in await a.text()
                async with http.post(link.group(0)) as a:
                    assert a.status == 200 and "已订阅" in await a.text()

                await post(config, env)
                issue = relay.received[1]
                assert issue.recipients == [ADDRESS]
                assert dkim.verify(issue.data, dnsfunc=lambda name, timeout=5: record)
                parsed = BytesParser(policy=policy.default).parsebytes(issue.data)
                # the headline alone, in both parts, as the reader chose
                assert "【简讯】" not in body_of(issue, "plain")
                assert 'id="briefs"' not in body_of(issue, "html")
                assert 'id="headline"' in body_of(issue, "html")
                assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
                unsub = re.search(r"<(http://[^>]+)>", str(parsed["List-Unsubscribe"]))
                assert unsub is not None

                async with http.get(unsub.group(1)) as a:  # a prefetch unsubscribes no one
                    assert a.status == 200 and '<form method="post"' in await a.text()
                # the mail's preferences link: the running bot's page stores the reader's
                # new format in the ledger, and the next post is in it
                prefs = re.search(
                    r"设置 / Preferences: (http://\S+/email/preferences\?t=(\S+))",
                    body_of(issue, "plain"),
                )
                assert prefs is not None
                async with http.get(prefs.group(1)) as a:
                    assert (
                        a.status == 200 and '<option value="headline" selected>' in await a.text()
                    )
                chosen = {"t": prefs.group(2), "when": "post", "format": "compact"}
                async with http.post(base + "email/preferences", data=chosen) as a:
                    assert a.status == 200 and "已保存" in await a.text()
                await post(config, env, "--force")
                assert len(relay.received) == 3
                assert 'id="briefs"' in body_of(relay.received[2], "html")  # compact now

                async with http.post(
                    unsub.group(1), data={"List-Unsubscribe": "One-Click"}
                ) as a:  # RFC 8058: one POST, no login, no confirmation page
                    assert a.status == 200 and "已退订" in await a.text()
                # nothing more: the ledger has no subscriber left on the platform
                said = await post(config, env, "--force", code=1)
                assert "nothing to post" in said and ADDRESS not in said
                assert len(relay.received) == 3
        finally:
            if run.returncode is None:
                run.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(run.communicate(), 30)
        assert run.returncode == 0, err.decode()[-2000:]
        assert ADDRESS not in err.decode()  # addresses never reach the log
        # the dashboard's reason for the end: the email's link, counted as the bot stopped
        with contextlib.closing(sqlite3.connect(tmp_path / "ledger.db")) as db:
            left = list(db.execute("SELECT platform, key, n FROM usage_counts WHERE kind = 'left'"))
        assert left == [("email", "link", 1)]
