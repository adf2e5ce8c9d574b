"""The core's built-in renderers by name (``Flavor.TELEGRAM`` …), each one a :class:`Renderer`."""

from __future__ import annotations

import importlib
from enum import StrEnum
from typing import TYPE_CHECKING, cast

from digest_core.rendering import Message, Part, Renderer, RenderOptions

if TYPE_CHECKING:
    from digest_core.models import Issue


class Flavor(StrEnum):
    """A renderer module of ``digest_core.rendering``, imported on first use (the CLI's
    ``--help`` and ``validate`` load none of them)."""

    TELEGRAM = "telegram"
    DISCORD = "discord"
    PLAIN = "plain"

    @property
    def module(self) -> Renderer:
        return cast(Renderer, importlib.import_module(f"digest_core.rendering.{self.value}"))

    def render(
        self,
        issue: Issue,
        part: Part = Part.ALL,
        *,
        brief: int | None = None,
        options: RenderOptions | None = None,
    ) -> list[Message]:
        return self.module.render(issue, part, brief=brief, options=options or RenderOptions())

    def preview(self, message: Message) -> str:
        return self.module.preview(message)

    def notice(self, text: str, *, mentions: bool = False) -> list[Message]:
        return self.module.notice(text, mentions=mentions)
