"""Telegram: the python-telegram-bot adapter (posting, commands, buttons)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bots.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]


def __getattr__(name: str) -> Any:
    # python-telegram-bot is imported only when the adapter is used (not by the registry,
    # which reads this platform's settings model and limits)
    if name == "TelegramAdapter":
        from bots.telegram.adapter import TelegramAdapter

        return TelegramAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
