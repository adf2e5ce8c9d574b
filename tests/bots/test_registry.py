"""The platform registry: every platform's declaration, the settings it validates, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bots import registry
from bots.wecom.settings import WeComSettings
from digest_core.errors import ConfigError
from digest_core.platform import Platform
from digest_core.rendering import Part, render
from digest_core.settings import load_settings as core_load_settings
from tests import forkserver
from tests.bots.workchat_helpers import ROOT, load_golden_issue

ALL = ("console", "telegram", "discord", "feishu", "dingtalk", "wecom", "email")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.upper().startswith("DIGEST_BOT_"):
            monkeypatch.delenv(name)


def test_every_platform_declares_itself_under_its_name() -> None:
    assert registry.names() == ALL
    issue = load_golden_issue()
    for spec in registry.specs():
        assert spec.name in registry.PLATFORMS
        # each renderer renders the issue and previews its own payloads
        messages = render(issue, spec.renderer(), Part.ALL)
        assert messages and all(spec.renderer().preview(m) for m in messages)
        assert spec.renderer().notice("hello")
    assert set(registry.settings_models()) == set(ALL) - {"console"}


def test_a_table_is_validated_with_the_platforms_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "bot.toml"
    cfg.write_text('[wecom]\ntargets = ["ai-team"]\n', encoding="utf-8")
    monkeypatch.setenv("DIGEST_BOT_WECOM__WEBHOOKS", json.dumps({"ai-team": "k-1"}))
    settings = registry.load_settings(cfg)
    wecom = settings.platform("wecom")
    assert isinstance(wecom, WeComSettings) and wecom.targets == ["ai-team"]
    assert wecom.resolved_webhooks()["ai-team"].get_secret_value() == "k-1"
    assert set(settings.platforms) == set(ALL) - {"console"}
    # the core alone knows no platform: the same table is an unknown key
    with pytest.raises(ConfigError, match="unknown key") as info:
        core_load_settings(cfg)
    assert info.value.key == "wecom" and info.value.file == str(cfg)


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('[wecom]\nwebhooks = {a = "k"}\n', "wecom.webhooks", "DIGEST_BOT_WECOM__WEBHOOKS"),
        ('[feishu]\ntargets = ["bad name"]\n', "feishu.targets", "not a target name"),
        ('[dingtalk]\ntargts = ["x"]\n', "dingtalk.targts", "unknown key"),
        ('[slack]\ntoken_file = "x"\n', "slack", "unknown key"),
        ('[telegram]\ntoken = "x"\n', "telegram.token", "DIGEST_BOT_TELEGRAM__TOKEN"),
    ],
)
def test_config_errors_name_file_key_and_fix(
    tmp_path: Path, text: str, key: str, fragment: str
) -> None:
    cfg = tmp_path / "bot.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        registry.load_settings(cfg)
    assert info.value.key == key and info.value.file == str(cfg)
    assert fragment in str(info.value)


def test_a_list_variable_that_is_not_json_shows_the_platforms_example(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__CHANNELS", "@my_channel")
    with pytest.raises(ConfigError, match=r"""'\["@my_channel"\]'""") as info:
        registry.load_settings(None)
    assert info.value.file == "environment DIGEST_BOT_TELEGRAM__CHANNELS"


def test_built_adapters_are_platforms_with_their_own_renderer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bots.runtime import build_adapters
    from digest_core.testing import ManualClock
    from tests.bots.workchat_helpers import NOW

    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        "".join(f'[{n}]\ntargets = ["ai-team"]\n' for n in ("feishu", "dingtalk", "wecom")),
        encoding="utf-8",
    )
    for n in ("feishu", "dingtalk", "wecom"):
        monkeypatch.setenv(
            f"DIGEST_BOT_{n.upper()}__WEBHOOKS",
            json.dumps({"ai-team": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}),
        )
    settings = registry.load_settings(cfg)
    adapters = build_adapters(settings, clock=ManualClock(NOW))
    assert [a.name for a in adapters] == ["feishu", "dingtalk", "wecom"]  # registry order
    for adapter in adapters:
        assert isinstance(adapter, Platform)
        assert adapter.flavor is registry.spec(adapter.name).renderer()
    [wecom] = build_adapters(settings, only="wecom", clock=ManualClock(NOW))
    assert wecom.name == "wecom"
    with pytest.raises(ConfigError, match="--only telegram needs a token") as info:
        build_adapters(settings, only="telegram", clock=ManualClock(NOW))
    assert info.value.key == "telegram.token"
    [console] = build_adapters(registry.load_settings(None),
                               clock=ManualClock(NOW))  # fmt: skip
    assert console.name == "console"  # the fallback when nothing is configured


@pytest.mark.slow
def test_cli_choices_come_from_the_registry_and_help_imports_no_platform() -> None:
    # the parser reads the declarations (settings models), never an SDK, adapter or renderer
    code = (
        "import sys\n"
        "from bots.cli import build_parser\n"
        "build_parser()\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('telegram', 'discord') or m.endswith(('.adapter', '.render', '.transport')))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
    helped = forkserver.run(
        [sys.executable, "-m", "bots.cli", "run", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "{console,telegram,discord,feishu,dingtalk,wecom,email}" in helped.stdout


@pytest.mark.parametrize(
    ("text", "key", "near"),
    [
        ('[schedule]\npost_tme = "07:30"\n', "schedule.post_tme", "post_time"),
        ('[schedul]\npost_time = "07:30"\n', "schedul", "schedule"),
        ('[telegram]\nchanels = ["@x"]\n', "telegram.chanels", "channels"),
        ('timezon = "Asia/Shanghai"\n', "timezon", "timezone"),
        ('[wecom]\ntargts = ["x"]\n', "wecom.targts", "targets"),
    ],
)
def test_a_misspelt_key_or_table_gets_a_suggestion(
    tmp_path: Path, text: str, key: str, near: str
) -> None:
    """Issue 20, item 8: "did you mean post_time?" for keys and tables, as issue files do."""
    cfg = tmp_path / "bot.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        registry.load_settings(cfg)
    assert info.value.key == key
    assert f"{key}: unknown key; did you mean {near}? (config/digest-bot.example.toml" in str(
        info.value
    )


def test_a_key_like_no_other_gets_no_suggestion(tmp_path: Path) -> None:
    cfg = tmp_path / "bot.toml"
    cfg.write_text('[schedule]\ncolour = "blue"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        registry.load_settings(cfg)
    assert "did you mean" not in str(info.value) and "unknown key" in str(info.value)
