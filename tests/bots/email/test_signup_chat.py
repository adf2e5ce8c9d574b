"""``/email ADDRESS`` end to end: the real ``digest-bot run`` with Telegram (the Bot API double
in its own process), the email platform (a real SMTP server on loopback) and its HTTP pages.

A reader sends ``/email ADDRESS headline`` in a private chat and is answered there; the
confirmation mail carries the link whose page (a POST, not a GET) subscribes them in their
format. The same command in a group answers the reader privately, tells the group nothing and,
asked again so soon, mails nothing more. ``digest-bot status`` then counts one confirmed
reader and nothing pending, and no address reaches a log.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from bots.email.addresses import reader_id
from digest_core.subscriptions.signup import SENT
from tests import forkserver
from tests.bots.email.helpers import SECRET, SENDER
from tests.bots.email.test_e2e import free_port
from tests.bots.telegram.harness import ANN, CHANNEL, GROUP, REPO, write_config
from tests.fakes.smtp import FakeRelay
from tests.fakes.telegram_api import DEFAULT_TOKEN, running_process

pytestmark = pytest.mark.slow  # real processes and servers

ADDRESS = "ann@example.net"


@pytest.fixture
def telegram() -> Iterator[str]:
    with running_process({CHANNEL: "channel", ANN: "private", GROUP: "group"}) as root:
        yield root


def env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("DIGEST_BOT_")},
        "DIGEST_BOT_TELEGRAM__TOKEN": DEFAULT_TOKEN,
        "DIGEST_BOT_EMAIL__SECRET_KEY": SECRET,
    }


def with_email(config: Path, tmp_path: Path, smtp: int, http: int) -> None:
    with config.open("a", encoding="utf-8") as fh:
        fh.write(
            f'[http]\nlisten = "127.0.0.1:{http}"\n'
            f'[email]\nhost = "127.0.0.1"\nport = {smtp}\nsecurity = "none"\n'
            f'from = "AI 技术日报 <{SENDER}>"\npublic_url = "http://127.0.0.1:{http}/"\n'
            f'address_book = "{tmp_path / "readers.sqlite3"}"\n'
        )


async def until(check: Any, what: str, bot: asyncio.subprocess.Process) -> Any:
    """``check()``'s first true value, polled (at most 30 s, while the bot runs)."""
    for _ in range(600):
        got = await check()
        if got:
            return got
        assert bot.returncode is None, f"the bot exited while waiting for {what}"
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {what} within 30 s")


async def test_email_in_a_chat_mails_the_link_that_subscribes(
    tmp_path: Path, telegram: str
) -> None:
    http_port = free_port()
    config = write_config(tmp_path, base_url=telegram + "/bot", channels=[str(CHANNEL)])
    rid = reader_id(ADDRESS, SECRET)
    with FakeRelay(senders={f"digest+{rid}@example.org"}) as relay:
        with_email(config, tmp_path, relay.port, http_port)
        bot = await forkserver.create_subprocess_exec(
            sys.executable, "-m", "bots.cli", "run", "--config", str(config),
            cwd=REPO, env=env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            async with httpx.AsyncClient(base_url=telegram) as fake:

                async def sent(chat: int) -> list[dict[str, Any]]:
                    answer = await fake.get("/_fake/sent", params={"chat_id": chat})
                    result: list[dict[str, Any]] = answer.json()["result"]
                    return result

                async def say(chat: int, text: str) -> None:
                    message = {"chat_id": chat, "from_user": ANN, "text": text}
                    await fake.post("/_fake/inject_message", json=message)

                await say(ANN, f"/email {ADDRESS} headline")
                [answer] = await until(lambda: sent(ANN), "an answer in the private chat", bot)
                assert answer["text"] == SENT
                [mail] = await asyncio.to_thread(relay.wait_for, 1)
                assert mail.recipients == [ADDRESS]
                parsed = BytesParser(policy=policy.default).parsebytes(mail.data)
                plain = parsed.get_body(("plain",))
                assert plain is not None
                link = re.search(r"http://\S+/email/confirm\?t=\S+", plain.get_content())
                assert link is not None
                async with aiohttp.ClientSession() as http:
                    async with http.get(link.group(0)) as page:  # a scanner's GET: a button
                        assert page.status == 200 and '<form method="post"' in await page.text()
                    async with http.post(link.group(0)) as page:
                        assert page.status == 200 and "已订阅" in await page.text()

                # in a group: answered privately, the group told nothing, nothing mailed again
                await say(GROUP, f"/email {ADDRESS}")
                private = await until(
                    lambda: _more(sent(ANN), 1), "the private answer to the group's", bot
                )
                assert private[1]["text"] == SENT
                assert await sent(GROUP) == []
                assert len(relay.received) == 1

                out = await status(config)
                assert "readers: confirmed 1, pending 0, deactivated 0" in out
                assert ADDRESS not in out
        finally:
            if bot.returncode is None:
                bot.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(bot.communicate(), 30)
    assert bot.returncode == 0, err.decode()[-3000:]
    assert ADDRESS not in err.decode()  # addresses never reach the log


async def status(config: Path) -> str:
    """What ``digest-bot status`` prints (beside the running bot)."""
    proc = await forkserver.create_subprocess_exec(
        sys.executable, "-m", "bots.cli", "status", "--config", str(config),
        cwd=REPO, env=env(), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out = (await asyncio.wait_for(proc.communicate(), 60))[0].decode()
    assert proc.returncode == 0, out
    return out


async def _more(pending: Any, than: int) -> list[dict[str, Any]] | None:
    got: list[dict[str, Any]] = await pending
    return got if len(got) > than else None
