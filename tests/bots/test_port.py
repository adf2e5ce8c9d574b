"""The narrow port: adapters ask the core only through digest_core.port.Port, and never sleep.

Each platform folder under ``bots/`` is read as a syntax tree (as tests/core/test_no_platform_names
does for the core): what an adapter may use of the core is what the Port offers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

BOTS = Path(__file__).resolve().parents[2] / "bots"
#: every platform folder and the shared work-chat one
FOLDERS = sorted(p for p in BOTS.iterdir() if (p / "__init__.py").exists())
MODULES = sorted(m for folder in FOLDERS for m in folder.rglob("*.py"))

#: the service's parts that are the core's own, never an adapter's to touch
INTERNALS = {"engine", "ledger", "archive", "commands", "poster", "platforms", "service"}
#: the Discord client's fields once found by duck typing (getattr(client, "service"))
DUCK_TYPED = {"service", "port", "limiter", "in_flight", "settings", "admin_guild_ids"}


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
    core paces and retries, replies included (digest_core/replies.py)."""

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
    from digest_core.port import Port, ServicePort
    from digest_core.service import DigestService

    members = sorted(n for n in vars(Port) if not n.startswith("_"))
    assert "handle" in members and "reply" in members
    assert issubclass(DigestService, ServicePort)
    declared = ServicePort.__annotations__
    assert [m for m in members if not hasattr(DigestService, m) and m not in declared] == []
