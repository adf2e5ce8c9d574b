"""The rendering package's modules import each other without a cycle, wherever the import sits."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import digest_core.rendering

PACKAGE = "digest_core.rendering"
ROOT = Path(digest_core.rendering.__file__).parent
MODULES = {PACKAGE if p.stem == "__init__" else f"{PACKAGE}.{p.stem}": p for p in ROOT.glob("*.py")}


def _imports(path: Path) -> set[str]:
    """The package's modules that ``path`` imports anywhere (top level or inside functions):
    ``from digest_core.rendering import plain`` names the submodule, ``... import Message``
    the package itself. Parents loaded implicitly by Python are not counted."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in MODULES:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path of modules, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(mod: str) -> list[str] | None:
        state[mod] = 1
        path.append(mod)
        for dep in sorted(graph.get(mod, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[mod] = 2
        return None

    for mod in sorted(graph):
        if mod not in state and (found := visit(mod)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_rendering_modules_import_each_other_without_a_cycle() -> None:
    graph = {mod: _imports(path) - {mod} for mod, path in MODULES.items()}
    assert f"{PACKAGE}.types" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    # the renderers take the shared types from .types, never from the package they are in
    assert not [mod for mod, deps in graph.items() if PACKAGE in deps]


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_rendering_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
