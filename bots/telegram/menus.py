"""Telegram's command menus (setMyCommands) from the catalogue; the token kept out of logs."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pydantic import SecretStr
from telegram import BotCommand, BotCommandScope, BotCommandScopeChat

from digest_core.port import menu

#: one setMyCommands call: scope (None: default), language code (None: all), commands
MenuCall = tuple[BotCommandScope | None, str | None, list[BotCommand]]


def command_menus(admins: Iterable[int]) -> list[MenuCall]:
    """Every ``setMyCommands`` call, as (scope, language code, commands), from the catalogue.

    Readers get the listed reader commands, in English by default and in Chinese for language
    code "zh"; each admin's own chat scope gets the admin commands too, in both languages.
    Descriptions are the catalogue's (1-256 characters, telegram.constants.BotCommandLimit).
    """

    def commands(*, admin: bool, zh: bool) -> list[BotCommand]:
        return [BotCommand(s.name, s.zh if zh else s.en) for s in menu(admin=admin)]

    calls: list[MenuCall] = [
        (None, None, commands(admin=False, zh=False)),
        (None, "zh", commands(admin=False, zh=True)),
    ]
    for admin in sorted(admins):
        scope = BotCommandScopeChat(admin)
        calls.append((scope, None, commands(admin=True, zh=False)))
        calls.append((scope, "zh", commands(admin=True, zh=True)))
    return calls


def sdk_loggers() -> list[logging.Logger]:
    """The loggers of PTB, httpx and httpcore (a logger's filters do not see its children's
    records, so each one gets the filter)."""
    names = [
        name
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
        and name.split(".", 1)[0] in ("telegram", "httpx", "httpcore")
    ]
    return [logging.getLogger(n) for n in {"telegram", "httpx", "httpcore", *names}]


class RedactToken(logging.Filter):
    """Replaces the bot token in log records (request URLs carry it) with ``<token>``."""

    def __init__(self, token: SecretStr) -> None:
        super().__init__()
        self._secret = token.get_secret_value()

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secret:
            message = record.getMessage()
            if self._secret in message:
                record.msg = message.replace(self._secret, "<token>")
                record.args = None
        return True
