"""Settings: TOML + env precedence, validation messages naming file and key, token hygiene."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.registry import load_settings
from digest_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("DIGEST_BOT_"):
            monkeypatch.delenv(key)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bot.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_config_and_example_load_with_the_documented_defaults() -> None:
    shipped = load_settings(ROOT / "config" / "digest-bot.toml")
    example = load_settings(ROOT / "config" / "digest-bot.example.toml")
    for s in (shipped, example):
        assert s.timezone == "Asia/Shanghai"
        assert s.schedule.post_time == "08:00"
        assert s.schedule.catch_up_hours == 6
        assert s.database_url == "sqlite+aiosqlite:///var/digest-bot.db"
        assert (s.ledger.auto_upgrade, s.ledger.keep_days, s.ledger.audit_keep_days) == (
            True,
            90,
            400,
        )
        assert s.telegram.resolved_token() is None


def test_env_overrides_file_and_nests_with_double_underscore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = write(tmp_path, '[schedule]\npost_time = "08:00"\n[telegram]\nchannels = ["@news"]\n')
    monkeypatch.setenv("DIGEST_BOT_SCHEDULE__POST_TIME", "07:15")
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", "123:secret-token")
    s = load_settings(cfg)
    assert s.schedule.post_time == "07:15"
    assert s.telegram.channels == ["@news"]
    token = s.telegram.resolved_token()
    assert token is not None and token.get_secret_value() == "123:secret-token"
    assert "secret-token" not in repr(s) and "secret-token" not in str(s.model_dump())


def test_token_in_the_config_file_is_refused(tmp_path: Path) -> None:
    cfg = write(tmp_path, '[discord]\ntoken = "abc"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert info.value.key == "discord.token"
    assert "DIGEST_BOT_DISCORD__TOKEN" in str(info.value)
    assert "abc" not in str(info.value)


def test_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "tg_token"
    secret.write_text("42:from-file\n", encoding="utf-8")
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN_FILE", str(secret))
    token = load_settings(write(tmp_path, "")).telegram.resolved_token()
    assert token is not None and token.get_secret_value() == "42:from-file"
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=r"telegram\.token_file: cannot read token file"):
        load_settings(write(tmp_path, ""))


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('timezone = "Mars/Olympus"', "timezone", "unknown time zone"),
        ('[schedule]\npost_time = "8am"', "schedule.post_time", "HH:MM"),
        ("[schedule]\ncatch_up_hours = -1", "schedule.catch_up_hours", "greater than or equal"),
        ('[telegram]\nchannels = ["news"]', "telegram.channels", "@username"),
        ('[discord]\nchannels = ["general"]', "discord.channels", "channel id"),
        ('[telegram]\nmode = "push"', "telegram.mode", "'polling' or 'webhook'"),
        ('[schedule]\npost_tme = "08:00"', "schedule.post_tme", "unknown key"),
        ('database_url = "var/x.db"', "database_url", "SQLAlchemy URL"),
        ('database_url = "sqlite:///x.db"', "database_url", "asyncio driver"),
        ('database_url = "foo://bar"', "database_url", "unknown database kind"),
        ("[ledger]\nkeep_days = 3", "ledger.keep_days", "greater than or equal to 7"),
        ('[ledger]\nprune_time = "4am"', "ledger.prune_time", "HH:MM"),
    ],
)
def test_bad_values_name_file_key_and_reason(
    tmp_path: Path, text: str, key: str, fragment: str
) -> None:
    cfg = write(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert info.value.key == key
    assert info.value.file == str(cfg)
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"{cfg}: {key}: ")


def test_bad_env_value_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGEST_BOT_SCHEDULE__POST_TIME", "25:00")
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, ""))
    assert "environment DIGEST_BOT_SCHEDULE__POST_TIME" in str(info.value)


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(write(tmp_path, "[telegram\n"))
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.toml")


def test_database_password_is_never_echoed(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'database_url = "postgresql://bot:hunter2@db/digest"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert "hunter2" not in str(info.value) and "***" in str(info.value)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "DIGEST_BOT_TELEGRAM__CHANNELS",
            "@foo",
            """DIGEST_BOT_TELEGRAM__CHANNELS: expected a JSON list such as '["@my_channel"]'""",
        ),
        (
            "DIGEST_BOT_TELEGRAM__CHANNELS",
            '"@foo"',  # JSON, but not a list
            """DIGEST_BOT_TELEGRAM__CHANNELS: expected a JSON list such as '["@my_channel"]'""",
        ),
        (
            "digest_bot_discord__admin_roles",  # matched case-insensitively, as it is read
            "123, 456",
            "digest_bot_discord__admin_roles: expected a JSON list such as '[123456789012345678]'",
        ),
        (
            "DIGEST_BOT_DISCORD",
            "channels=1",
            'DIGEST_BOT_DISCORD: expected a JSON object such as \'{"key": "value"}\'',
        ),
    ],
)
def test_env_value_that_is_not_the_json_expected_names_the_variable_and_the_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    """Issue #8: such a value gave a 40-line pydantic-settings trace naming only the section."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, '[telegram]\nchannels = ["@ai_digest"]\n'))
    assert info.value.file == f"environment {variable}"
    assert str(info.value).startswith(f"environment {expected}")
    assert "\n" not in str(info.value)


def test_env_json_lists_still_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__CHANNELS", '["@ai_digest", -100123]')
    monkeypatch.setenv("DIGEST_BOT_DISCORD__ADMIN_ROLES", "[7]")
    settings = load_settings(write(tmp_path, ""))
    assert settings.telegram.channels == ["@ai_digest", "-100123"]
    assert settings.discord.admin_roles == [7]


def test_a_bad_token_file_variable_is_blamed_not_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #8: the error named the TOML file although the variable set the path."""
    missing = tmp_path / "missing"
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN_FILE", str(missing))
    cfg = write(tmp_path, 'timezone = "Asia/Shanghai"\n')  # a file with content
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert info.value.file == "environment DIGEST_BOT_TELEGRAM__TOKEN_FILE"
    assert str(cfg) not in str(info.value)
    assert f"cannot read token file {missing}" in str(info.value)
    assert "point it at a readable file holding only the bot token" in str(info.value)
    # set in the file, the file is named
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN_FILE")
    cfg = write(tmp_path, f'[telegram]\ntoken_file = "{missing}"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert info.value.file == str(cfg) and info.value.key == "telegram.token_file"
