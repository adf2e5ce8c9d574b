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
from bots.console.spec import CONSOLE_LIMITS
from bots.discord.cli import sync_commands
from bots.discord.commands import FOLDED, TRANSLATIONS
from bots.registry import load_settings
from bots.runtime import open_service
from bots.telegram.menus import command_menus
from digest_core.archive import Archive
from digest_core.commands import ADMIN, Capability, Reply, Request, Status, editor
from digest_core.commands.admin import AdminCommands
from digest_core.commands.catalogue import (
    BY_NAME,
    CATALOGUE,
    MAX_DESCRIPTION,
    OWNERS,
    help_line,
    help_text,
    menu,
)
from digest_core.commands.declaration import Argument, Group, declared, number
from digest_core.commands.declaration import command as declare_command
from digest_core.commands.dispatch import Commands
from digest_core.errors import BadArgument
from digest_core.rendering import plain as plain_render
from digest_core.rendering import preview
from digest_core.service.root import DigestService
from digest_core.testing import ManualClock
from tests.bots.discord.harness import GUILD, fake_discord, make_settings
from tests.samples import SAMPLE_ARCHIVE

ADMINS = (42, 43)
# 09:00 in Shanghai on 2026-11-30
MORNING = dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.UTC)
LISTED = {s.name for s in CATALOGUE if s.menu}
ADMIN_ONLY = {s.name for s in CATALOGUE if s.admin}
#: the owners of the admins' commands (every other owner's are readers')
ADMIN_OWNERS = (AdminCommands, editor)
#: Discord's application command option types (string, integer, boolean)
OPTION_TYPES = {str: 3, int: 4, bool: 5}


@pytest.fixture
async def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DigestService]:
    monkeypatch.delenv("DIGEST_BOT_TELEGRAM__TOKEN", raising=False)
    monkeypatch.delenv("DIGEST_BOT_DISCORD__TOKEN", raising=False)
    archive = tmp_path / "archive"
    archive.mkdir()
    for src in sorted(SAMPLE_ARCHIVE.glob("*.txt"))[-2:]:
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
    # the admins' commands are exactly those of the admins' owners, each needing a capability
    assert {s.name for owner in ADMIN_OWNERS for s, _ in declared(owner)} == ADMIN_ONLY
    assert all(s.needs in Capability and s.group is Group.ADMIN for s in CATALOGUE if s.admin)


def test_a_commands_answers_every_owner_with_nothing_installed(tmp_path: Path) -> None:
    # one list of owners (OWNERS): any Commands answers all of their declarations
    assert len(set(OWNERS)) == len(OWNERS)
    commands = Commands(Archive(tmp_path, index=False), ManualClock(MORNING), dt.UTC)
    assert commands.names == [s.name for owner in OWNERS for s, _ in declared(owner)]
    assert set(commands.names) == set(BY_NAME)


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
        assert set(options) == {a.name for a in spec.options}, name
        for arg in spec.options:
            option = options[arg.name]
            assert option["description"] == arg.en
            assert option["description_localizations"]["zh-CN"] == arg.zh
            # typed from the declaration: type, required, range or choices, autocomplete
            kind = arg.kind
            assert option["type"] == OPTION_TYPES[kind.type], (name, arg.name)
            assert option.get("required", False) == arg.required, (name, arg.name)
            assert bool(option.get("autocomplete")) == (arg.complete is not None), arg.name
            if kind.choices:
                assert [c["value"] for c in option["choices"]] == list(kind.choices)
            elif kind.type is int:
                assert (option["min_value"], option["max_value"]) == (kind.low, kind.high)
            elif kind.type is str:
                assert (option["min_length"], option["max_length"]) == (kind.low, kind.high)
    assert len(TRANSLATIONS) >= len(registered)


async def test_the_declared_capability_is_what_refuses(service: DigestService) -> None:
    # every admin command, from a user who has every capability but the one it declares
    admin_commands = [s for s in CATALOGUE if s.admin]
    for entry in admin_commands:
        assert entry.needs is not None
        others = frozenset(ADMIN - {entry.needs})
        reply = await service.commands.handle(
            Request(entry.name, ("2026-11-30",), platform="console", user="u9", capabilities=others)
        )
        assert reply.status is Status.REFUSED and reply.private, entry.name
    audited = [(e.action, e.allowed, e.user_id) for e in await service.ledger.audit_log()]
    assert sorted(audited) == sorted((s.name, False, "u9") for s in admin_commands)


async def test_one_declaration_is_a_command_its_help_and_its_check(
    service: DigestService,
) -> None:
    ran: list[str] = []

    class Extra:
        @declare_command(
            "extra",
            zh="管理员：试一试",
            zh_tw="管理員：試一試",
            en="Admins: try it",
            usage="/extra",
            needs=Capability.STATUS,
        )
        async def extra(self, request: Request) -> Reply:
            ran.append(request.user)  # no capability check of its own
            return Reply([])

    service.commands.declare(Extra())
    refused = await service.commands.handle(Request("extra", user="r1"))
    assert refused.status is Status.REFUSED and refused.private and ran == []
    done = await service.commands.handle(Request("extra", user="a1", capabilities=ADMIN))
    assert done.status is Status.OK and ran == ["a1"]
    [entry] = await service.ledger.audit_log()
    assert (entry.action, entry.allowed, entry.user_id) == ("extra", False, "r1")
    reader = await service.commands.handle(Request("help"))
    admin = await service.commands.handle(Request("help", capabilities=ADMIN))
    line = "/extra — 管理员：试一试 / Admins: try it"
    assert line in preview(admin.messages[0], plain_render)
    assert line not in "\n".join(preview(m, plain_render) for m in reader.messages)


async def test_help_and_console_list_the_catalogue(service: DigestService) -> None:
    reader = await service.commands.handle(Request("help"))
    admin = await service.commands.handle(Request("help", capabilities=ADMIN))
    reader_text = "\n".join(preview(m, plain_render) for m in reader.messages)
    admin_text = "\n".join(preview(m, plain_render) for m in admin.messages)
    for spec in menu(admin=True):
        assert help_line(spec) in admin_text
        assert (help_line(spec) in reader_text) != spec.admin, spec.name
    # the console (operator = admin) prints the same lines for /help typed on stdin
    out = io.StringIO()
    console = ConsolePlatform(out=out, stdin=io.StringIO("/help\n"), limits=CONSOLE_LIMITS)
    await console.start(service)
    assert console._task is not None
    await asyncio.wait_for(console._task, 5)
    printed = out.getvalue()
    for line in help_text(admin=True).splitlines():
        assert line in printed


async def test_a_bad_argument_is_answered_in_one_place_with_the_usage(
    service: DigestService,
) -> None:
    got: list[object] = []

    class Extra:
        @declare_command(
            "extra",
            zh="试一试",
            zh_tw="試一試",
            en="Try it",
            usage="/extra N",
            args=(Argument("n", "A number", "数字", "數字", "数", "數", kind=number(1, 9)),),
            dm=True,
        )
        async def extra(self, request: Request, n: int | None) -> Reply:
            if n == 0:
                raise BadArgument("零不行 / not zero")  # a handler's own problem, told the same
            got.append(n)
            return Reply([])

    service.commands.declare(Extra())
    words = await service.commands.handle(Request("extra", ("x",), user="r1"))
    own = await service.commands.handle(Request("extra", ("0",), user="r1"))
    typed = await service.commands.handle(Request("extra", values={"n": 7}, user="r1"))
    assert [preview(r.messages[0], plain_render) for r in (words, own)] == [
        "“x” 不是数字 / is not a number\n用法 / usage: /extra N",
        "零不行 / not zero\n用法 / usage: /extra N",
    ]
    assert all(r.status is Status.USAGE and r.private for r in (words, own))  # a dm command
    assert typed.status is Status.OK and got == [7]  # the typed value as given
