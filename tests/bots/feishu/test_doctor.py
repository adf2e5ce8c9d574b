"""`digest-bot doctor` for the Feishu app bot against the Feishu app double: each failure with
its fix, nothing sent, no long connection opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots.cli.doctor import run_checks
from bots.doctor import Check, Status
from bots.registry import load_settings
from bots.workchat.app.doctor import sdk_check
from tests import ports
from tests.fakes.feishu_app import FakeFeishuApp
from tests.samples import SAMPLE_ARCHIVE


def write_config(tmp: Path, **feishu: object) -> Path:
    lines = [
        f'archive_dir = "{SAMPLE_ARCHIVE}"',
        f'database_url = "sqlite+aiosqlite:///{tmp / "ledger.db"}"',
        "[feishu]",
        *(f"{k} = {json.dumps(v)}" for k, v in feishu.items()),
    ]
    path = tmp / "doctor.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def feishu_checks(tmp: Path, fs: FakeFeishuApp, **feishu: object) -> dict[str, Check]:
    config = write_config(tmp, app_id=fs.app_id, api_base=fs.url, **feishu)
    return {c.name: c for c in await run_checks(load_settings(config)) if c.area == "feishu"}


@pytest.fixture(autouse=True)
def app_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGEST_BOT_FEISHU__APP_SECRET", FakeFeishuApp().app_secret)


async def test_a_healthy_app_bot_passes_without_sending_or_connecting(tmp_path: Path) -> None:
    async with FakeFeishuApp() as fs:
        checks = await feishu_checks(tmp_path, fs)
        assert [c.name for c in checks.values()] == [
            "app credentials", "clock", "bot", "long connection",
        ]  # fmt: skip
        assert all(c.status is Status.OK for c in checks.values()), checks
        assert "enabled in the tenant" in checks["bot"].detail
        assert fs.bot_open_id in checks["bot"].detail
        assert fs.answers == [] and fs.connections == []  # nothing sent, nothing connected


async def test_refused_credentials_fail_with_where_to_copy_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGEST_BOT_FEISHU__APP_SECRET", "not-the-secret")
    async with FakeFeishuApp() as fs:
        checks = await feishu_checks(tmp_path, fs)
    [check] = checks.values()  # nothing else can be checked without a token
    assert check.name == "app credentials" and check.status is Status.FAIL
    assert "10014" in check.detail and "not-the-secret" not in check.detail
    assert "凭证与基础信息" in check.fix and "DIGEST_BOT_FEISHU__APP_SECRET" in check.fix
    monkeypatch.delenv("DIGEST_BOT_FEISHU__APP_SECRET")
    async with FakeFeishuApp() as fs:
        checks = await feishu_checks(tmp_path, fs)
    assert checks["app credentials"].status is Status.FAIL
    assert "DIGEST_BOT_FEISHU__APP_SECRET" in checks["app credentials"].detail


async def test_a_bot_not_enabled_fails_with_how_to_enable_it(tmp_path: Path) -> None:
    async with FakeFeishuApp() as fs:
        fs.bot_ability = False
        checks = await feishu_checks(tmp_path, fs)
        assert checks["bot"].status is Status.FAIL
        assert "230006" in checks["bot"].detail and "机器人" in checks["bot"].fix
        fs.bot_ability, fs.activate_status = True, 3
        checks = await feishu_checks(tmp_path, fs)
        assert checks["bot"].status is Status.FAIL
        assert "安装后待启用" in checks["bot"].detail
        assert "版本管理与发布" in checks["bot"].fix


async def test_the_long_connection_endpoint_and_its_address(tmp_path: Path) -> None:
    async with FakeFeishuApp() as fs:
        fs.max_connections = 0  # the app's connections all taken
        checks = await feishu_checks(tmp_path, fs)
        assert checks["long connection"].status is Status.FAIL
        assert "1000040350" in checks["long connection"].detail
        assert "other instances" in checks["long connection"].fix
        fs.max_connections = 50
        fs.ws_base = f"ws://127.0.0.1:{_closed_port()}"  # an address nothing answers on
        checks = await feishu_checks(tmp_path, fs)
        assert checks["long connection"].status is Status.FAIL
        assert "127.0.0.1" in checks["long connection"].detail
        assert "HTTPS_PROXY" in checks["long connection"].fix


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_http_mode_checks_the_callbacks_secrets_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs:
        checks = await feishu_checks(tmp_path, fs, mode="http")
        assert "long connection" not in checks
        assert checks["callback"].status is Status.FAIL
        assert "Encrypt Key and the Verification Token" in checks["callback"].detail
        assert "DIGEST_BOT_FEISHU__ENCRYPT_KEY" in checks["callback"].fix
        monkeypatch.setenv("DIGEST_BOT_FEISHU__ENCRYPT_KEY", fs.encrypt_key)
        checks = await feishu_checks(tmp_path, fs, mode="http")
        assert "Verification Token" in checks["callback"].detail
        assert "Encrypt Key" not in checks["callback"].detail
        monkeypatch.setenv("DIGEST_BOT_FEISHU__VERIFICATION_TOKEN", fs.verification_token)
        checks = await feishu_checks(tmp_path, fs, mode="http", callback_path="/hooks/feishu")
        assert checks["callback"].status is Status.OK
        assert "https://<your host>/hooks/feishu" in checks["callback"].detail


async def test_webhooks_and_the_app_are_checked_together_with_one_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeFeishuApp() as fs:  # the webhooks live at the same api_base
        monkeypatch.setenv("DIGEST_BOT_FEISHU__WEBHOOKS", json.dumps({"ai-team": "tok-ai-123456"}))
        config = write_config(tmp_path, app_id=fs.app_id, api_base=fs.url, targets=["ai-team"])
        checks = [c for c in await run_checks(load_settings(config)) if c.area == "feishu"]
    names = [c.name for c in checks]
    assert "webhook ai-team" in names and "bot" in names and names.count("clock") == 1


async def test_an_unreachable_feishu_fails_with_the_network_fix(tmp_path: Path) -> None:
    async with FakeFeishuApp() as fs:
        config = write_config(
            tmp_path, app_id=fs.app_id, api_base=f"http://127.0.0.1:{_closed_port()}"
        )
        checks = {c.name: c for c in await run_checks(load_settings(config)) if c.area == "feishu"}
    assert checks["app credentials"].status is Status.FAIL
    assert "HTTPS_PROXY" in checks["app credentials"].fix


def test_a_missing_sdk_is_a_failure_with_the_extra_to_install() -> None:
    assert sdk_check("feishu", "lark_oapi", "feishu") is None  # installed here
    check = sdk_check("feishu", "no_such_sdk_module", "feishu")
    assert check is not None and check.status is Status.FAIL
    assert "digest-bot[feishu]" in check.fix


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    return ports.free_port()
