"""Every platform shows each command with the catalogue's name, description and admin flag."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegram import BotCommandScopeChat

from bots.console.platform import ConsolePlatform
from bots.discord.cli import sync_commands
from bots.discord.commands import FOLDED, TRANSLATIONS
from bots.registry import load_settings
from bots.renderers import Flavor
from bots.runtime import open_service
from bots.telegram.menus import command_menus
from digest_core.catalogue import (
    BY_NAME,
    CATALOGUE,
    MAX_DESCRIPTION,
    help_line,
    help_text,
    menu,
)
from digest_core.commands import ADMIN, Request
from digest_core.rendering import preview
from digest_core.service import DigestService
from digest_core.testing import ManualClock
from tests.bots.discord.harness import GUILD, fake_discord, make_settings

ROOT = Path(__file__).resolve().parents[2]
ADMINS = (42, 43)
# 09:00 in Shanghai on 2026-11-30
MORNING = dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC)
LISTED = {s.name for s in CATALOGUE if s.menu}
ADMIN_ONLY = {s.name for s in CATALOGUE if s.admin}


@pytest.fixture
async def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DigestService]:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    archive = tmp_path / "archive"
    archive.mkdir()
    for src in sorted((ROOT / "archive").glob("*.txt"))[-2:]:
        shutil.copy(src, archive / src.name)
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f'archive_dir = "{archive}"\ndatabase_url = "sqlite+aiosqlite:///{tmp_path}/l.db"\n',
        encoding="utf-8",
    )
    clock = ManualClock(MORNING, autoadvance=False)
    async with open_service(load_settings(cfg), clock=clock, out=io.StringIO()) as svc:
        yield svc


def test_the_catalogue_is_well_formed() -> None:
    assert len(BY_NAME) == len(CATALOGUE)
    for spec in CATALOGUE:
        assert spec.usage.split()[0] == f"/{spec.name}"
        texts = [spec.zh, spec.zh_tw, spec.en, *(a.en for a in spec.args)]
        assert all(1 <= len(t) <= MAX_DESCRIPTION for t in texts), spec.name
    assert {"repost", "status", "reactivate", "correct", "preview", "approve", "hold"} == ADMIN_ONLY


async def test_every_catalogue_command_is_answered(service: DigestService) -> None:
    assert set(service.commands.names) == set(BY_NAME)


def test_telegram_menus_are_the_catalogue() -> None:
    calls = command_menus(ADMINS)
    readers = {lang: cmds for scope, lang, cmds in calls if scope is None}
    assert set(readers) == {None, "zh"}
    for lang, cmds in readers.items():
        shown = {c.command: c.description for c in cmds}
        assert set(shown) == LISTED - ADMIN_ONLY  # admin commands never in readers' menus
        for name, text in shown.items():
            assert text == (BY_NAME[name].zh if lang == "zh" else BY_NAME[name].en)
    for admin in ADMINS:
        scoped = {lang: cmds for scope, lang, cmds in calls if scope == BotCommandScopeChat(admin)}
        assert set(scoped) == {None, "zh"}
        for lang, cmds in scoped.items():
            shown = {c.command: c.description for c in cmds}
            assert set(shown) == LISTED  # /reactivate included
            for name, text in shown.items():
                assert text == (BY_NAME[name].zh if lang == "zh" else BY_NAME[name].en)


async def test_discord_registers_the_catalogue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_discord() as fake:
        settings = make_settings(tmp_path, monkeypatch, fake)
        await sync_commands(settings.discord, guild=GUILD)
        registered = {c["name"]: c for c in fake.commands(GUILD)}
    # every listed command is a slash command, or folded into one (/brief N is /briefs n)
    assert set(registered) == LISTED - set(FOLDED)
    assert set(FOLDED.values()) <= set(registered)
    for name, command in registered.items():
        spec = BY_NAME[name]
        assert command["description"] == spec.en
        assert command["description_localizations"] == {"zh-CN": spec.zh, "zh-TW": spec.zh_tw}
        assert (command["default_member_permissions"] is not None) == spec.admin, name
        options = {o["name"]: o for o in command.get("options", [])}
        assert set(options) == {a.name for a in spec.args}, name
        for arg in spec.args:
            assert options[arg.name]["description"] == arg.en
            assert options[arg.name]["description_localizations"]["zh-CN"] == arg.zh
    assert len(TRANSLATIONS) >= len(registered)


async def test_help_and_console_list_the_catalogue(service: DigestService) -> None:
    reader = await service.commands.handle(Request("help"))
    admin = await service.commands.handle(Request("help", capabilities=ADMIN))
    reader_text = "\n".join(preview(m, Flavor.PLAIN) for m in reader.messages)
    admin_text = "\n".join(preview(m, Flavor.PLAIN) for m in admin.messages)
    for spec in menu(admin=True):
        assert help_line(spec) in admin_text
        assert (help_line(spec) in reader_text) != spec.admin, spec.name
    # the console (operator = admin) prints the same lines for /help typed on stdin
    out = io.StringIO()
    console = ConsolePlatform(out=out, stdin=io.StringIO("/help\n"))
    await console.start(service)
    assert console._task is not None
    await asyncio.wait_for(console._task, 5)
    printed = out.getvalue()
    for line in help_text(admin=True).splitlines():
        assert line in printed
