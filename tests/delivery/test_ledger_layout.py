"""The ledger package's shape: collaborators over one state, tables once, small functions."""

from __future__ import annotations

import ast
from pathlib import Path

import digest_core.delivery.ledger as ledger_package
from digest_core.delivery.ledger import Ledger, metadata

PACKAGE = Path(ledger_package.__file__).parent
#: every module of the package, its migrations included
MODULES = sorted(PACKAGE.rglob("*.py"))
#: the longest function the package may have, in lines (docstring included)
LONGEST = 60


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in MODULES]


def test_nothing_private_is_exported() -> None:
    assert [name for name in ledger_package.__all__ if name.startswith("_")] == []


def test_every_table_is_declared_in_schema_only() -> None:
    declared: dict[str, list[str]] = {}
    for path, tree in _trees():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Table"
                and len(node.args) > 1
                and isinstance(node.args[0], ast.Constant)
                and ast.unparse(node.args[1]) == "metadata"  # ours, not Alembic's own
            ):
                declared.setdefault(path.name, []).append(str(node.args[0].value))
    assert list(declared) == ["schema.py"]
    assert sorted(declared["schema.py"]) == sorted(metadata.tables)


def test_no_function_is_longer_than_the_limit() -> None:
    longer = [
        f"{path.relative_to(PACKAGE)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > LONGEST
    ]
    assert longer == []


def test_the_migrations_are_among_the_modules_checked() -> None:
    assert PACKAGE / "migrations" / "versions" / "v0001_base.py" in MODULES


def test_no_collaborator_inherits_the_state_each_one_is_given_it() -> None:
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                assert not any(b.endswith(("Mixin", "LedgerBase")) for b in bases), (
                    f"{path.name}: {node.name}({', '.join(bases)})"
                )


def test_each_public_method_of_the_facade_is_one_of_a_collaborator_with_its_contract() -> None:
    forwarded = {
        name: getattr(Ledger, name)
        for name in dir(Ledger)
        if not name.startswith("_")
        and name != "open"  # the facade's own (an async context manager)
        and hasattr(getattr(Ledger, name), "__wrapped__")
    }
    assert {"plan", "claim", "mark_sent", "plan_correction", "acquire_lease", "prune"} <= set(
        forwarded
    )
    for name, method in forwarded.items():
        owner = method.__wrapped__.__qualname__.split(".")[0]
        assert owner != "Ledger" and method.__doc__, name
