"""One place per platform: its renderer (with its text and size limits) is one module of
``digest_core/rendering/``, and its pacing sits on its registry spec."""

from __future__ import annotations

import importlib

import pytest

from bots import registry
from digest_core.rendering import TextLimits

#: the renderer module of each platform not named after it: the console renders plain text
RENDERED_AS = {"console": "plain"}


@pytest.mark.parametrize("name", registry.names())
def test_each_platform_renders_with_its_own_module_and_its_limits(name: str) -> None:
    spec = registry.spec(name)
    assert spec.renderer_module == f"digest_core.rendering.{RENDERED_AS.get(name, name)}"
    module = importlib.import_module(spec.renderer_module)
    assert spec.renderer() is module
    limits = module.Limits
    assert issubclass(limits, TextLimits) and limits is not TextLimits
    assert limits.body_maxlen > 0 and limits.unit in ("utf-16", "chars", "bytes")


@pytest.mark.parametrize("name", registry.names())
def test_each_spec_declares_its_pacing(name: str) -> None:
    limits = registry.spec(name).limits
    assert limits is not None and limits.overall.per_second > 0
