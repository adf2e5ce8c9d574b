"""Webhook settings (shared by Feishu, DingTalk, WeCom): secrets only from env or files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from bots.dingtalk.adapter import DingTalkAdapter
from bots.dingtalk.settings import DingTalkSettings
from bots.dingtalk.spec import DINGTALK_LIMITS
from bots.feishu.adapter import FeishuAdapter
from bots.feishu.settings import FeishuSettings
from bots.feishu.spec import FEISHU_LIMITS
from bots.wecom.settings import WeComSettings
from digest_core.errors import ConfigError
from tests.bots.workchat_helpers import clock

TOKEN = "7f3a9c0e1b2d4f6a8c0e2b4d6f8a0c2e"
URL = f"https://oapi.dingtalk.com/robot/send?access_token={TOKEN}"


@pytest.mark.parametrize("key", ["webhooks", "secrets"])
def test_a_secret_in_the_toml_table_is_refused(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        DingTalkSettings.load({"targets": ["ai-team"], key: {"ai-team": URL}}, file="bot.toml")
    text = str(err.value)
    assert text.startswith("bot.toml: dingtalk.") and f"DIGEST_BOT_DINGTALK__{key.upper()}" in text
    assert TOKEN not in text


def test_webhooks_and_secrets_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGEST_BOT_DINGTALK__WEBHOOKS", json.dumps({"ai-team": URL}))
    monkeypatch.setenv("DIGEST_BOT_DINGTALK__SECRETS", json.dumps({"ai-team": "SECabc"}))
    settings = DingTalkSettings.load({"targets": ["ai-team"]})
    assert settings.resolved_webhooks()["ai-team"].get_secret_value() == URL
    assert settings.resolved_secrets()["ai-team"].get_secret_value() == "SECabc"
    assert TOKEN not in repr(settings) and "SECabc" not in repr(settings)
    adapter = DingTalkAdapter(settings, clock=clock(), limits=DINGTALK_LIMITS)
    assert [t.id for t in adapter.channel_targets()] == ["ai-team"]


def test_webhooks_from_a_file_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"ai-team": "https://x/hook/old", "research": "tok-research-1"}))
    monkeypatch.setenv("DIGEST_BOT_FEISHU__WEBHOOKS", json.dumps({"ai-team": "tok-ai-team-2"}))
    settings = FeishuSettings.load({"targets": ["ai-team", "research"], "webhooks_file": str(path)})
    found = {k: v.get_secret_value() for k, v in settings.resolved_webhooks().items()}
    assert found == {"ai-team": "tok-ai-team-2", "research": "tok-research-1"}


def test_a_target_without_a_webhook_names_the_variable() -> None:
    settings = WeComSettings.load({"targets": ["ai-team"]})
    with pytest.raises(ConfigError, match="DIGEST_BOT_WECOM__WEBHOOKS") as err:
        settings.resolved_webhooks()
    assert err.value.key == "wecom.targets"


def test_an_unreadable_or_bad_secrets_file_is_one_clear_line(tmp_path: Path) -> None:
    missing = FeishuSettings.load({"secrets_file": str(tmp_path / "nope.json")})
    with pytest.raises(ConfigError, match="cannot read"):
        missing.resolved_secrets()
    bad = tmp_path / "bad.json"
    bad.write_text('{"ai-team": "SECsecretvalue"')
    with pytest.raises(ConfigError) as err:
        FeishuSettings.load({"secrets_file": str(bad)}).resolved_secrets()
    assert "not JSON" in str(err.value) and "SECsecretvalue" not in str(err.value)


@pytest.mark.parametrize("name", ["", "https://open.feishu.cn/x", "a b", "x" * 65])
def test_a_target_must_be_a_name_not_an_address(name: str) -> None:
    with pytest.raises(ConfigError, match=r"feishu\.targets"):
        FeishuSettings.load({"targets": [name]})


def test_a_webhook_that_is_not_the_platforms_is_refused_without_echoing_it() -> None:
    settings = FeishuSettings(
        targets=["ai-team"], webhooks={"ai-team": SecretStr("https://evil.example/?t=secret123")}
    )
    with pytest.raises(ConfigError) as err:
        FeishuAdapter(settings, clock=clock(), limits=FEISHU_LIMITS)
    assert "secret123" not in str(err.value) and "feishu.webhooks" in str(err.value)


def test_unknown_keys_are_named() -> None:
    with pytest.raises(ConfigError, match=r"dingtalk\.chanels: unknown key"):
        DingTalkSettings.load({"chanels": ["x"]})
