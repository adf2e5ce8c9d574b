"""Telegram: the python-telegram-bot adapter (posting, commands, buttons)."""

from bots.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
