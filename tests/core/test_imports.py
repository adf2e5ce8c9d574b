"""`import digest_core` (every module) must not load a chat SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import digest_core

CORE = Path(digest_core.__file__).parent


@pytest.mark.slow
def test_core_modules_import_without_telegram_or_discord() -> None:
    modules = sorted(
        "digest_core."
        + ".".join(p.relative_to(CORE).with_suffix("").parts).removesuffix(".__init__")
        for p in CORE.rglob("*.py")
    )
    assert "digest_core.rendering.telegram" in modules and "digest_core.service" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m.removesuffix('.__init__'))\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('telegram', 'discord'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
