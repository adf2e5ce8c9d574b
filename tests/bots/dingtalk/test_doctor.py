"""`digest-bot doctor` for the DingTalk app robot against the DingTalk app double: each failure
with its fix, nothing sent, no stream opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots.cli.doctor import run_checks
from bots.doctor import Check, Status
from bots.registry import load_settings
from tests import ports
from tests.fakes.dingtalk_app import FakeDingTalkApp
from tests.samples import SAMPLE_ARCHIVE

GROUP = "cidGroup0000000000000000=="


def write_config(tmp: Path, **dingtalk: object) -> Path:
    lines = [
        f'archive_dir = "{SAMPLE_ARCHIVE}"',
        f'database_url = "sqlite+aiosqlite:///{tmp / "ledger.db"}"',
        "[dingtalk]",
        *(f"{k} = {json.dumps(v)}" for k, v in dingtalk.items()),
    ]
    path = tmp / "doctor.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def dingtalk_checks(tmp: Path, fake: FakeDingTalkApp, **dingtalk: object) -> dict[str, Check]:
    config = write_config(tmp, client_id=fake.client_id, openapi_base=fake.url, **dingtalk)
    return {c.name: c for c in await run_checks(load_settings(config)) if c.area == "dingtalk"}


@pytest.fixture(autouse=True)
def client_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGEST_BOT_DINGTALK__CLIENT_SECRET", FakeDingTalkApp().client_secret)


async def test_a_healthy_app_robot_passes_without_sending_or_streaming(tmp_path: Path) -> None:
    async with FakeDingTalkApp() as fake:
        fake.add(GROUP, "group")
        checks = await dingtalk_checks(tmp_path, fake, chats=[GROUP])
        assert [c.name for c in checks.values()] == [
            "app credentials", "clock", "robot", "stream",
        ]  # fmt: skip
        assert all(c.status is Status.OK for c in checks.values()), checks
        assert "the app's own robot" in checks["robot"].detail
        assert {"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"} in fake.subscriptions
        # nothing sent; the gateway's ticket left unused: no stream was opened
        assert fake.sent(GROUP) == [] and fake.connections == [] and len(fake.tickets) == 1


async def test_refused_credentials_fail_with_where_to_copy_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGEST_BOT_DINGTALK__CLIENT_SECRET", "not-the-secret")
    async with FakeDingTalkApp() as fake:
        checks = await dingtalk_checks(tmp_path, fake)
    [check] = checks.values()
    assert check.name == "app credentials" and check.status is Status.FAIL
    assert "HTTP 400" in check.detail and "not-the-secret" not in check.detail
    assert "凭证与基础信息" in check.fix and "DIGEST_BOT_DINGTALK__CLIENT_SECRET" in check.fix


async def test_an_unreachable_stream_endpoint_fails_with_the_network_fix(tmp_path: Path) -> None:
    async with FakeDingTalkApp() as fake:
        fake.endpoint_base = f"ws://127.0.0.1:{_closed_port()}"
        checks = await dingtalk_checks(tmp_path, fake)
    assert checks["stream"].status is Status.FAIL
    assert "127.0.0.1" in checks["stream"].detail and "HTTPS_PROXY" in checks["stream"].fix


async def test_http_mode_checks_the_callback_instead_of_the_stream(tmp_path: Path) -> None:
    async with FakeDingTalkApp() as fake:
        checks = await dingtalk_checks(tmp_path, fake, mode="http", robot_code="dingRobot42")
        assert "stream" not in checks and fake.tickets == set()
    assert checks["callback"].status is Status.OK
    assert "https://<your host>/dingtalk/messages" in checks["callback"].detail
    assert "dingRobot42, robot_code" in checks["robot"].detail
    async with FakeDingTalkApp() as fake:
        checks = await dingtalk_checks(tmp_path, fake, mode="http", callback_listen="8092")
    assert checks["callback"].status is Status.FAIL
    assert "callback_listen" in checks["callback"].fix


async def test_an_unreachable_dingtalk_fails_with_the_network_fix(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, client_id="dingdigesttest", openapi_base=f"http://127.0.0.1:{_closed_port()}"
    )
    checks = {c.name: c for c in await run_checks(load_settings(config)) if c.area == "dingtalk"}
    assert checks["app credentials"].status is Status.FAIL
    assert "HTTPS_PROXY" in checks["app credentials"].fix


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    return ports.free_port()
