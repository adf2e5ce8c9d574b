"""The core knows no platform by name: adding one must not need an edit of ``digest_core``.

The rule, checked on the syntax tree of every module under ``digest_core``: no identifier (a
name, attribute, argument, function, class, import or module path) contains a platform's name
and no string literal contains one as a word, case-insensitively. Docstrings and comments are
exempt: they may describe a platform as an example, they cannot dispatch on one. So are the
renderer modules ``digest_core/rendering/<platform>.py`` (one per platform, holding its
markup, text and size limits) and ``html.py`` (the Telegram HTML subset): renderers a platform
may choose, named after their markup. No other core module may import one by name.

A command's own word is exempt too, and only where it is declared: the name and the usage
line of a ``command(...)`` declaration. ``/email ADDRESS`` is the word readers type for what
they give (a mail address), which happens to be a platform's name; it dispatches on nothing
(the core hands the address to whichever platform it was given,
:mod:`digest_core.subscriptions.signup`), and its handler, arguments and texts are checked
like any other code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import digest_core
from bots import registry

CORE = Path(digest_core.__file__).parent
#: every registered platform, and the six this rule was written for
NAMES = sorted({*registry.names(), "console", "telegram", "discord", "feishu", "dingtalk", "wecom"})
LIBRARIES = {CORE / "rendering" / f"{name}.py" for name in (*NAMES, "html")}
WORD = re.compile(r"\b(" + "|".join(NAMES) + r")\b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (or bare string statements)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        for child in (
            getattr(node, "body", []) if isinstance(getattr(node, "body", None), list) else []
        ):
            if (
                isinstance(child, ast.Expr)
                and isinstance(child.value, ast.Constant)
                and isinstance(child.value.value, str)
            ):
                found.add(id(child.value))
    return found


def _command_words(tree: ast.AST) -> set[int]:
    """ids of the string constants that are a ``command(...)`` declaration's name or usage."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "command"):
            continue
        words = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "usage")]
        found.update(id(w) for w in words if isinstance(w, ast.Constant))
    return found


def platform_names_in(source: str) -> list[str]:
    """``line: what`` for each place ``source`` names a platform (see the module doc)."""
    tree = ast.parse(source)
    docs = _docstrings(tree) | _command_words(tree)
    hits: list[str] = []

    def identifier(node: ast.AST, name: str | None) -> None:
        if name and any(p in name.lower() for p in NAMES):
            hits.append(f"{getattr(node, 'lineno', 0)}: identifier {name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            identifier(node, node.id)
        elif isinstance(node, ast.Attribute):
            identifier(node, node.attr)
        elif isinstance(node, ast.arg):
            identifier(node, node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            identifier(node, node.name)
        elif isinstance(node, ast.alias):
            identifier(node, node.name)
            identifier(node, node.asname)
        elif isinstance(node, ast.ImportFrom):
            identifier(node, node.module)
        elif isinstance(node, ast.keyword):
            identifier(node, node.arg)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and WORD.search(node.value)
        ):
            hits.append(f"{node.lineno}: string {node.value[:60]!r}")
    return hits


def core_modules() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if p not in LIBRARIES)


def test_the_rule_catches_what_it_should() -> None:
    bad = (
        'FLAVORS = ("telegram", "discord")\n'
        "from x import TELEGRAM_LIMITS\n"
        "def f(wecom_key): return settings.feishu\n"
        'x = f"DIGEST_BOT_{name}" if name != "Console" else 1\n'
    )
    assert len(platform_names_in(bad)) == 6
    fine = '"""Posts to Telegram."""\n# like Discord\ndef f():\n    """For DingTalk."""\n'
    assert platform_names_in(fine) == []
    # a command's word where it is declared, and only there
    declared = '@command("email", usage="/email ADDRESS", en="By mail")\ndef by_mail(): ...\n'
    assert platform_names_in(declared) == []
    elsewhere = (
        '@command("email", en="Get it by email")\ndef email(): ...\n'
        'spec("email")\nx = {"usage": "/email"}\n'
    )
    assert len(platform_names_in(elsewhere)) == 4


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_no_core_module_names_a_platform(path: Path) -> None:
    assert platform_names_in(path.read_text(encoding="utf-8")) == []
