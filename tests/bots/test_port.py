"""The narrow port: adapters ask the core only through digest_core.port.Port, and never sleep.

Each platform folder under ``bots/`` is read as a syntax tree (as tests/core/test_no_platform_names
does for the core): what an adapter may use of the core is what the Port offers, and what it
imports of the core is ``digest_core.port`` (its ``__all__``) and its own renderer module (the
one its spec names, ``digest_core.rendering.<platform>``): one door.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bots import registry

BOTS = Path(__file__).resolve().parents[2] / "bots"
#: every platform folder and the shared work-chat one (not the CLI nor the editor's dashboard:
#: bots/cli/ and bots/dashboard/ are the composition side, like runtime.py, and use the core
#: as a whole)
COMPOSITION = {"cli", "dashboard"}
FOLDERS = sorted(
    p for p in BOTS.iterdir() if (p / "__init__.py").exists() and p.name not in COMPOSITION
)
assert {"telegram", "discord", "email", "workchat"} <= {f.name for f in FOLDERS}
MODULES = sorted(m for folder in FOLDERS for m in folder.rglob("*.py"))

#: the service's parts that are the core's own, never an adapter's to touch
INTERNALS = {"engine", "ledger", "archive", "commands", "poster", "platforms", "service"}
#: the Discord client's fields once found by duck typing (getattr(client, "service"))
DUCK_TYPED = {"service", "port", "limiter", "in_flight", "settings", "admin_guild_ids"}

#: a core module written as a string (``"pkg.module"`` or ``"pkg.module:name"``, for importlib)
MODULE_PATH = re.compile(r"(digest_core(?:\.\w+)*)(?::\w+)?")


def own_renderer(folder: str) -> str | None:
    """The renderer module the adapter of ``bots/<folder>/`` may import besides the port: the
    one its spec names (the console's is ``plain``); None for a folder that is no platform
    (the shared work-chat code gets its renderer from each platform)."""
    return registry.spec(folder).renderer_module if folder in registry.names() else None


def offences(check: Callable[[ast.AST], str | None]) -> list[str]:
    """``file:line what`` for every node of every adapter module that ``check`` names."""
    found = []
    for module in MODULES:
        where = module.relative_to(BOTS.parent)
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            what = check(node)
            if what is not None:
                found.append(f"{where}:{getattr(node, 'lineno', 0)} {what}")
    return found


def core_imports(source: str, own: str | None) -> list[str]:
    """``line: what`` for each import in ``source`` (a module of an adapter whose renderer
    module is ``own``) of the core other than ``digest_core.port`` and ``own`` (a module path
    written as a string, for ``importlib``, counts as an import)."""
    door = "digest_core.port"
    allowed = {door} if own is None else {door, own}

    def core(name: str) -> bool:
        return name == "digest_core" or name.startswith("digest_core.")

    hits: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            hits += [f"{line}: import {a.name}" for a in node.names if core(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and core(node.module or ""):
            module = node.module or ""
            for alias in node.names:
                if module not in allowed and f"{module}.{alias.name}" not in allowed:
                    hits.append(f"{line}: from {module} import {alias.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = MODULE_PATH.fullmatch(node.value)
            if named and named[1] not in allowed:
                hits.append(f"{line}: imports {named[1]!r} by name")
    return hits


def port_names_imported(source: str) -> set[str]:
    """The names ``source`` imports from ``digest_core.port``."""
    return {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module == "digest_core.port"
        for alias in node.names
    }


def test_the_import_rule_catches_what_it_should() -> None:
    bad = (
        "from digest_core.commands import Request\n"
        "import digest_core.errors\n"
        "from digest_core.rendering import Message, feishu\n"
        "from digest_core.rendering.telegram import corrected\n"
        "def f():\n    from digest_core import service\n"
        "if TYPE_CHECKING:\n    from digest_core.clock import Clock\n"
        'RENDERER = "digest_core.rendering.plain"\n'
    )
    assert len(core_imports(bad, "digest_core.rendering.feishu")) == 7
    fine = (
        "from digest_core.port import Port, Request\n"
        "from digest_core.rendering import feishu as feishu_render\n"
        "from digest_core.rendering.feishu import render\n"
        "from digest_core import port\n"
        'RENDERER = "digest_core.rendering.feishu"\n'
        "from .adapter import X\n"
    )
    assert core_imports(fine, "digest_core.rendering.feishu") == []
    # the work-chat folder is no platform: the port only
    assert len(core_imports(fine, None)) == 3


def test_adapters_import_the_core_only_through_the_port_and_their_renderer() -> None:
    found = []
    for module in MODULES:
        own = own_renderer(module.relative_to(BOTS).parts[0])
        where = module.relative_to(BOTS.parent)
        found += [f"{where}:{hit}" for hit in core_imports(module.read_text("utf-8"), own)]
    assert found == []


def test_the_port_exports_everything_adapters_import_from_it() -> None:
    import digest_core.port as port

    exported = set(port.__all__)
    assert [n for n in exported if not hasattr(port, n)] == []
    imported = {n for m in MODULES for n in port_names_imported(m.read_text("utf-8"))}
    assert sorted(imported - exported) == []
    assert "Reception" not in exported  # the service's side, not the adapters'


def test_there_are_platform_folders_to_check() -> None:
    assert {"telegram", "discord", "console", "workchat", "feishu"} <= {f.name for f in FOLDERS}


def test_adapters_never_import_the_service() -> None:
    def check(node: ast.AST) -> str | None:
        if isinstance(node, ast.ImportFrom) and node.module == "digest_core.service":
            return "imports digest_core.service"
        if isinstance(node, ast.Import) and any(
            a.name == "digest_core.service" for a in node.names
        ):
            return "imports digest_core.service"
        if isinstance(node, ast.Name) and node.id == "DigestService":
            return "names DigestService"
        return None

    assert offences(check) == []


def test_adapters_never_reach_into_the_core() -> None:
    def check(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and node.attr in INTERNALS:
            return f"uses .{node.attr}"
        return None

    assert offences(check) == []


def test_no_duck_typing_of_the_client() -> None:
    def check(node: ast.AST) -> str | None:
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr"):
            return None
        name = node.args[1] if len(node.args) >= 2 else None
        if isinstance(name, ast.Constant) and name.value in DUCK_TYPED:
            return f"getattr(…, {name.value!r})"
        return None

    assert offences(check) == []


def test_adapters_never_sleep_or_retry_a_rate_limit() -> None:
    """The Platform contract (digest_core/platform.py): adapters MUST NOT retry or sleep; the
    core paces and retries, replies included (digest_core/commands/replies.py)."""

    def check(node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] == "sleep":
            return "sleeps"
        caught = ast.unparse(node.type) if isinstance(node, ast.ExceptHandler) and node.type else ""
        if "RateLimited" in caught:
            return f"catches {caught}"
        return None

    assert offences(check) == []


def test_the_service_offers_every_member_of_the_port() -> None:
    # mypy checks it too: bots/runtime.py hands the service to Adapter.start(port: Port)
    from digest_core.port import Port
    from digest_core.service.reception import Reception
    from digest_core.service.root import DigestService

    members = sorted(n for n in vars(Port) if not n.startswith("_"))
    assert "handle" in members and "reply" in members
    fields = Reception.__dataclass_fields__
    assert [m for m in members if not hasattr(Reception, m) and m not in fields] == []
    # the service offers them as its own: its attributes, or the ones its builders set
    nodes = ast.walk(ast.parse(inspect.getsource(DigestService)))
    attributes = [n for n in nodes if isinstance(n, ast.Attribute)]
    stored = {a.attr for a in attributes if isinstance(a.ctx, ast.Store)}
    assert [m for m in members if not hasattr(DigestService, m) and m not in stored] == []


def test_the_door_is_light_for_the_platforms_declarations() -> None:
    """A platform's spec and settings take their bases from the port; that loads only what they
    name (PEP 562), never the ledger, the scheduler or a renderer: the CLI's ``--help`` and
    ``validate`` read every declaration."""
    code = (
        "import sys\n"
        "from bots import registry\n"
        "registry.specs(); registry.settings_models()\n"
        "from digest_core.port import PlatformLimits, TokenSettings\n"
        "heavy = ('sqlalchemy', 'apscheduler', 'digest_core.delivery', 'digest_core.commands')\n"
        "renderers = tuple(f'digest_core.rendering.{n}' for n in registry.names())\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith(heavy) or "
        "m in renderers)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=BOTS.parent, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
