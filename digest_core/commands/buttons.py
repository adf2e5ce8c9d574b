"""Command buttons: a button that, pressed, runs one core command as the person who pressed it.

The core sends such buttons with messages to admins (Approve / Hold under a preview to
review). A button's data is ``ac:<command> <args>`` (at most 64 bytes, Telegram's limit for
callback data, well under Discord's 100 for a custom id); an adapter turns a press into the
:class:`~digest_core.commands.Request` of :func:`parse_action_data` with the presser's own
capabilities, so the command decides (and audits) whether the presser may do it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)

#: prefix of an action button's data
ACTION_PREFIX = "ac"
#: the most bytes an action's data may have
MAX_ACTION_DATA = 64


class Style(StrEnum):
    """How prominent a button is (platforms map these to their own styles)."""

    PRIMARY = "primary"
    DANGER = "danger"
    SECONDARY = "secondary"


@dataclass(frozen=True)
class CommandButton:
    """One button: its label and the command it runs."""

    label: str
    command: str
    args: tuple[str, ...] = ()
    style: Style = Style.SECONDARY

    @property
    def data(self) -> str:
        """``ac:approve 2026-11-28 1a2b3c4d``.

        Raises:
            ValueError: the data would exceed :data:`MAX_ACTION_DATA` bytes.
        """
        data = f"{ACTION_PREFIX}:{' '.join((self.command, *self.args))}"
        if len(data.encode("utf-8")) > MAX_ACTION_DATA:
            raise ValueError(f"action data over {MAX_ACTION_DATA} bytes: {data!r}")
        return data


def parse_action_data(data: str) -> tuple[str, tuple[str, ...]] | None:
    """``(command, args)`` of an action button's data; None for anything else."""
    prefix, sep, rest = data.partition(":")
    if prefix != ACTION_PREFIX or not sep:
        return None
    words = rest.split()
    if not words or not words[0].isascii() or not words[0].isalpha():
        return None
    return words[0].lower(), tuple(words[1:])
