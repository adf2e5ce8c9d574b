"""The narrow port: adapters ask the core only through digest_core.port.Port, and never sleep.

Each platform folder under ``bots/`` is read as a syntax tree (as tests/core/test_no_platform_names
does for the core): what an adapter may use of the core is what the Port offers.
"""

from __future__ import annotations

import ast
from pathlib import Path

BOTS = Path(__file__).resolve().parents[2] / "bots"
#: every platform folder and the shared work-chat one
FOLDERS = sorted(p for p in BOTS.iterdir() if (p / "__init__.py").exists())
MODULES = sorted(m for folder in FOLDERS for m in folder.rglob("*.py"))

#: the service's parts that are the core's own, never an adapter's to touch
INTERNALS = {"engine", "ledger", "archive", "commands", "poster", "platforms", "service"}
#: the Discord client's fields once found by duck typing (getattr(client, "service"))
DUCK_TYPED = {"service", "port", "limiter", "in_flight", "settings", "admin_guild_ids"}


def _trees() -> list[tuple[str, ast.AST]]:
    return [
        (str(m.relative_to(BOTS.parent)), ast.parse(m.read_text(encoding="utf-8"))) for m in MODULES
    ]


def test_there_are_platform_folders_to_check() -> None:
    names = {f.name for f in FOLDERS}
    assert {"telegram", "discord", "console", "workchat", "feishu"} <= names


def test_adapters_never_import_the_service() -> None:
    found = []
    for where, tree in _trees():
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            if "digest_core.service" in modules:
                found.append(f"{where}:{node.lineno} imports digest_core.service")
            if isinstance(node, ast.Name) and node.id == "DigestService":
                found.append(f"{where}:{node.lineno} names DigestService")
    assert found == []


def test_adapters_never_reach_into_the_core() -> None:
    found = [
        f"{where}:{node.lineno} uses .{node.attr}"
        for where, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in INTERNALS
    ]
    assert found == []


def test_no_duck_typing_of_the_client() -> None:
    found = [
        f"{where}:{node.lineno} getattr(…, {node.args[1].value!r})"
        for where, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in DUCK_TYPED
    ]
    assert found == []


def test_adapters_never_sleep_or_retry_a_rate_limit() -> None:
    """The Platform contract (digest_core/platform.py): adapters MUST NOT retry or sleep; the
    core paces and retries, replies included (digest_core/replies.py)."""
    found = []
    for where, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "sleep":
                    found.append(f"{where}:{node.lineno} sleeps")
            elif isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = ast.unparse(node.type)
                if "RateLimited" in caught:
                    found.append(f"{where}:{node.lineno} catches {caught}")
    assert found == []


def test_the_service_offers_every_member_of_the_port() -> None:
    # mypy checks it too: bots/runtime.py hands the service to Adapter.start(port: Port)
    from digest_core.port import Port, ServicePort
    from digest_core.service import DigestService

    members = sorted(n for n in vars(Port) if not n.startswith("_"))
    assert "handle" in members and "reply" in members
    assert issubclass(DigestService, ServicePort)
    missing = [
        m for m in members if not hasattr(DigestService, m) and m not in ServicePort.__annotations__
    ]
    assert missing == []
