"""The ledger package's shape: collaborators over one state, tables once, small functions,
small public surfaces (each module's ``__all__``; nothing private imported across modules)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import bots
import digest_core
import digest_core.delivery.ledger as ledger_package
from digest_core.delivery.ledger import Ledger, metadata

PACKAGE = Path(ledger_package.__file__).parent
#: every module of the package, its migrations included
MODULES = sorted(PACKAGE.rglob("*.py"))
#: the longest function the package may have, in lines (docstring included)
LONGEST = 60
#: the two packages of the product, whose modules import no other module's private names
PRODUCT = [Path(digest_core.__file__).parent, Path(bots.__file__).parent]


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the tests of this file (read, never
    changed)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(path, _parsed(path)) for path in MODULES]


def _module_name(path: Path) -> str:
    """The dotted name of a module of the package (of the package itself for __init__.py)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join((ledger_package.__name__, *parts[: -1 if parts[-1] == "__init__" else None]))


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
    assert {"plan", "claim", "mark_sent_soon", "plan_correction", "acquire_lease", "prune"} <= set(
        forwarded
    )
    for name, method in forwarded.items():
        owner = method.__wrapped__.__qualname__.split(".")[0]
        assert owner != "Ledger" and method.__doc__, name


def _product_trees() -> list[tuple[str, ast.Module]]:
    return [
        (f"{root.name}/{path.relative_to(root)}", _parsed(path))
        for root in PRODUCT
        for path in sorted(root.rglob("*.py"))
    ]


@functools.cache
def _imports_from() -> list[tuple[str, ast.ImportFrom]]:
    """Every ``from … import …`` of the product code, function-level ones too."""
    return [
        (where, node)
        for where, tree in _product_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    ]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _exported(tree: ast.Module) -> list[str] | None:
    """What a module's ``__all__`` lists, every assignment to it added up (None: it has none)."""
    found: list[str] | None = None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "__all__" and value is not None:
            found = (found or []) + [str(name) for name in ast.literal_eval(value)]
    return found


def _public_definitions(tree: ast.Module) -> set[str]:
    """The module's own public top-level names (functions, classes, assignments)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_") and name != "log"}


def test_no_module_imports_a_private_name_of_another() -> None:
    found = {
        f"{where}: {'.' * node.level}{node.module or ''}.{alias.name}"
        for where, node in _imports_from()
        for alias in node.names
        if _private(alias.name)
    }
    assert sorted(found) == []


def test_no_module_exports_a_private_name() -> None:
    exported = [
        f"{where}: {name}"
        for where, tree in _product_trees()
        for name in _exported(tree) or []
        if name.startswith("_")
    ]
    assert exported == []


def test_each_module_of_the_package_lists_its_public_surface() -> None:
    unlisted: dict[str, list[str]] = {}
    for path, tree in _trees():
        where = str(path.relative_to(PACKAGE))
        if path.parent.name == "versions":
            continue  # (a revision's surface is Alembic's: revision, upgrade, ...)
        exported = _exported(tree)
        if exported is None:
            unlisted[where] = ["(no __all__)"]
        elif missing := sorted(_public_definitions(tree) - set(exported)):
            unlisted[where] = missing
    assert unlisted == {}


def test_a_module_of_the_package_is_imported_only_for_what_it_lists() -> None:
    listed = {_module_name(path): _exported(tree) for path, tree in _trees()}
    outside = {
        f"{where}: {node.module}.{alias.name}"
        for where, node in _imports_from()
        if node.level == 0 and node.module in listed
        for alias in node.names
        if (names := listed[node.module]) is not None
        and alias.name not in names
        and f"{node.module}.{alias.name}" not in listed  # a module of the package
    }
    assert sorted(outside) == []


def test_the_package_docstring_names_each_of_its_modules_and_no_other() -> None:
    modules = {  # the package's own modules and subpackages (not their modules)
        name.removeprefix(f"{ledger_package.__name__}.")
        for name in map(_module_name, MODULES)
        if name.rpartition(".")[0] == ledger_package.__name__
    }
    doc = ledger_package.__doc__ or ""
    named = set(re.findall(r":mod:`\.(\w+)`", doc))
    assert sorted(modules - named) == []
    assert sorted(named - modules) == []  # (no module it cites is missing)
