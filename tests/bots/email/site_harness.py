"""The email edition in process with its HTTP pages: the real service (``open_service``, on a
clock the test sets), the real email adapter started on it, the operator's HTTP endpoint with
the readers' pages on a loopback port, and an HTTP client; the relay is the caller's
(``tests/fakes/smtp.py``)."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email import policy
from email.parser import BytesParser
from pathlib import Path

import aiohttp
import pytest

from bots import http, registry
from bots.email.adapter import EmailAdapter
from bots.runtime import open_service
from digest_core.clock import Clock
from digest_core.service.leadership import Leadership
from digest_core.service.root import DigestService
from tests.bots.email.helpers import SECRET, SENDER
from tests.bots.email.test_e2e import free_port
from tests.bots.workchat_helpers import ARCHIVE
from tests.fakes.smtp import Received

#: the preferences link of a mail's plain-text part
PREFERENCES_LINK = re.compile(r"设置 / Preferences: (http://\S+/email/preferences\?t=(\S+))")


@dataclass
class Site:
    service: DigestService
    adapter: EmailAdapter
    #: the pages' base URL (the adapter's public_url)
    base: str
    http: aiohttp.ClientSession

    async def reader(self, address: str) -> str:
        """A confirmed, subscribed reader (as the confirm page makes one): their id."""
        rid = await self.adapter.book.add(address, at=self.service.clock.now())
        await self.adapter.subscription(rid, on=True)
        return rid


def write_config(tmp_path: Path, smtp_port: int, http_port: int) -> Path:
    path = tmp_path / "digest-bot.toml"
    path.write_text(
        f'archive_dir = "{ARCHIVE}"\n'
        f'database_url = "sqlite+aiosqlite:///{tmp_path / "ledger.db"}"\n'
        'timezone = "Asia/Shanghai"\n'
        f'[http]\nlisten = "127.0.0.1:{http_port}"\n'
        f'[email]\nhost = "127.0.0.1"\nport = {smtp_port}\nsecurity = "none"\n'
        f'from = "AI 技术日报 <{SENDER}>"\npublic_url = "http://127.0.0.1:{http_port}/"\n'
        f'address_book = "{tmp_path / "readers.sqlite3"}"\n',
        encoding="utf-8",
    )
    return path


@asynccontextmanager
async def running_site(
    tmp_path: Path, smtp_port: int, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Site]:
    """The service, its started email adapter and its pages, until the block ends."""
    monkeypatch.setenv("DIGEST_BOT_EMAIL__SECRET_KEY", SECRET)
    http_port = free_port()
    settings = registry.load_settings(write_config(tmp_path, smtp_port, http_port))
    async with open_service(settings, clock=clock, out=io.StringIO()) as service:
        adapter = service.platforms["email"]
        assert isinstance(adapter, EmailAdapter)
        await adapter.start(service)
        probe = http.Probe(service, Leadership(service.ledger, clock=clock), started=[adapter])
        endpoint = http.HttpEndpoint(probe, host="127.0.0.1", port=http_port)
        await endpoint.start()
        try:
            async with aiohttp.ClientSession() as client:
                yield Site(service, adapter, f"http://127.0.0.1:{http_port}/", client)
        finally:
            await endpoint.stop()
            await adapter.stop()


def plain_body(received: Received) -> str:
    parsed = BytesParser(policy=policy.default).parsebytes(received.data)
    part = parsed.get_body(("plain",))
    assert part is not None
    return str(part.get_content())


def html_body(received: Received) -> str:
    parsed = BytesParser(policy=policy.default).parsebytes(received.data)
    part = parsed.get_body(("html",))
    assert part is not None
    return str(part.get_content())
