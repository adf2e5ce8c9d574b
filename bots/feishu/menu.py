"""The Feishu bot menu (机器人自定义菜单), derived from the catalogue.

Feishu's bot menu is set in the developer console (应用功能 → 机器人 → 机器人自定义菜单), not
through an API: each item's action is "推送事件" with an ``event_key`` (1-30 characters), and a
click sends ``application.bot.menu_v6`` with it (https://open.feishu.cn/document/
server-docs/application-v6/bot/events/menu). The items to enter are the listed reader commands
that take no argument, ``event_key`` their name; ``digest-bot feishu menu`` prints them, and
the bot answers a click with the command its key names (:func:`bots.feishu.handlers.
menu_command`), so nothing is listed twice.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from digest_core.port import menu


@dataclass(frozen=True)
class MenuItem:
    """One item to enter in the console."""

    name_zh: str
    name_en: str
    event_key: str


def bot_menu() -> list[MenuItem]:
    """The reader commands of the catalogue that need no argument, in its order."""
    return [
        MenuItem(s.zh, s.en, s.name)
        for s in menu(admin=False)
        if not any(a.required for a in s.args)
    ]


def configure(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``digest-bot feishu menu``: print the items of the bot menu to set up
    (:data:`bots.cli.PLATFORM_COMMANDS`)."""
    sub = p.add_subparsers(title="feishu commands", metavar="ACTION", required=True)
    shown = sub.add_parser(
        "menu", parents=[common],
        help="print the bot menu (机器人自定义菜单) to enter in the developer console",
    )  # fmt: skip
    shown.set_defaults(handler=_print_menu)


def _print_menu(args: argparse.Namespace, settings: object) -> int:
    print("机器人自定义菜单 · 响应动作：推送事件 / action: push event")
    for item in bot_menu():
        print(f"{item.event_key:<12} {item.name_zh} / {item.name_en}")
    return 0
