"""The layout names the architecture: digest_core's packages, one concept per name, no prefix
families, no import cycles (function-level imports included: they hide cycles, they do not
break them), and a composition root that owns no behaviour."""

from __future__ import annotations

import ast
import collections
import inspect
import itertools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "digest_core"

#: the core's cross-cutting modules, kept at the top; everything else is in a package
TOP_MODULES = {
    "clock",
    "errors",
    "heap",
    "logcontext",
    "metrics",
    "models",
    "platform",
    "port",
    "settings",
    "testing",
}
PACKAGES = {
    "archive",
    "commands",
    "delivery",
    "loading",
    "publishing",
    "rendering",
    "service",
    "site",
    "subscriptions",
}
#: a string naming a module of ours for importlib: "pkg.mod" or "pkg.mod:attr" (the registry's
#: tables, a spec's adapter and doctor, the CLI's commands, the port's lazy re-exports)
MODULE_PATH = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+(?::[A-Za-z_]\w*)?")


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def _modules(*roots: str) -> dict[str, Path]:
    return {_name(p): p for r in roots for p in sorted((ROOT / r).rglob("*.py"))}


def _imports(path: Path, name: str, known: set[str]) -> Iterator[str]:
    """The project modules ``path`` imports at run time, at any level (``TYPE_CHECKING``
    blocks excluded), or names in a string for importlib to import (:data:`MODULE_PATH`);
    importing ``a.b.c`` imports the packages ``a`` and ``a.b`` too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def walk(nodes: list[ast.stmt]) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from walk(node.orelse)
                continue
            if isinstance(node, ast.Import):
                yield from (a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                yield base
                yield from (f"{base}.{a.name}" for a in node.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from walk([n for n in inner if isinstance(n, ast.stmt)])
                    for handler in inner:
                        if isinstance(handler, ast.ExceptHandler):
                            yield from walk(handler.body)

    def named(tree: ast.Module) -> Iterator[str]:
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and MODULE_PATH.fullmatch(text):
                yield text.partition(":")[0]

    tree = ast.parse(path.read_text())
    for target in [*walk(tree.body), *named(tree)]:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            dep = ".".join(parts[:i])
            # (a module's own packages are initialised before it: importing them is no edge)
            if dep in known and dep != name and not name.startswith(dep + "."):
                yield dep


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {n: set(_imports(p, n, set(modules))) for n, p in modules.items()}


def _a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """The shortest cycle through the first module of a strongly connected ``component``
    (what a failure shows: ``a -> b -> a``)."""
    start, inside = component[0], set(component)
    came: dict[str, str] = {}
    queue = [start]
    for here in queue:
        for there in sorted(graph[here] & inside):
            if there == start:
                path = [here]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [*reversed(path), start]
            if there not in came:
                came[there] = here
                queue.append(there)
    return component


def _cycles(modules: dict[str, Path]) -> list[list[str]]:
    graph = _graph(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_core_is_its_top_modules_and_its_packages() -> None:
    modules = {p.stem for p in CORE.glob("*.py")} - {"__init__"}
    packages = {p.parent.name for p in CORE.glob("*/__init__.py")}
    assert modules == TOP_MODULES
    assert packages == PACKAGES


#: sibling modules that begin with the same three or more letters and are still no family:
#: different words that happen to begin alike (a numbered prefix, ``v0001_``, is no word)
ALIKE = {
    frozenset({"core", "corrections"}),  # delivery/ledger/: open and close; corrections
    frozenset({"migrate", "migrations"}),  # delivery/ledger/: Alembic's folder, what runs it
    frozenset({"cli", "client"}),  # bots/discord/: `digest-bot discord`; the gateway client
}


def _families(stems: set[str]) -> set[str]:
    """The prefixes siblings share: ``archive`` of ``archive_add`` beside ``archive`` or
    ``archive_files``; ``app`` of ``appapi`` beside ``appbot`` (three letters or more)."""
    found = {s.split("_")[0] for s in stems if "_" in s.strip("_") and s.split("_")[0] in stems}
    prefixes = [s.split("_")[0] for s in stems if "_" in s.strip("_")]
    found |= {p for p in prefixes if prefixes.count(p) > 1}
    for a, b in itertools.combinations(sorted(stems), 2):
        pairs = zip(a, b, strict=False)
        shared = "".join(x for x, _ in itertools.takewhile(lambda p: p[0] == p[1] != "_", pairs))
        shared = re.sub(r"[^a-z].*", "", shared)
        if len(shared) >= 3 and frozenset({a, b}) not in ALIKE:
            found.add(shared)
    return found


@pytest.mark.parametrize("package", [*sorted(PACKAGES), "../bots"])
def test_no_module_name_prefix_families(package: str) -> None:
    """``archive_add``, ``archive_files`` beside ``archive``, or ``appapi``, ``appbot``: a
    package, not a prefix."""
    top = (CORE / package).resolve()
    for folder in [top, *(p.parent for p in top.rglob("*/__init__.py"))]:
        stems = {p.stem for p in folder.glob("*.py")} | {
            p.parent.name for p in folder.glob("*/__init__.py")
        }
        assert not _families(stems - {"__init__", "__main__"}), (folder, sorted(stems))


def test_the_prefix_check_finds_a_family() -> None:
    """(The check above can fail: the work chats' app modules were one.)"""
    assert _families({"appapi", "appbot", "adapter", "doctor"}) == {"app"}
    assert _families({"archive", "archive_add"}) == {"archive"}
    assert _families({"core", "corrections", "v0001_base", "v0002_leases"}) == set()


#: one concept under one class name in several modules: each renderer's own ``Limits``
ONE_CONCEPT_CLASSES = {"Limits"}


def test_no_word_names_two_concepts() -> None:
    """``readers`` once meant three things (commands, storage, a Discord view); ``port`` the
    adapters' door and the service's side of it; ``usage`` a command's help line and the
    readers' counts; ``Deliveries`` the deliveries under way and a dashboard page; ``Action``
    a confirmation's and a correction row's, ``Decision`` a confirmation's and an approval's
    (now ``CorrectionAction`` and ``ApprovalDecision``)."""
    paths = [*CORE.rglob("*.py"), *(ROOT / "bots").rglob("*.py")]
    stems = [p.stem for p in paths]
    assert "readers" not in stems and "personal" not in stems and "corrector" not in stems
    # ``port``: the adapters' door (Port, Adapter); ``usage``: CommandSpec.usage, a help line
    assert [p for p in paths if p.stem == "port"] == [CORE / "port.py"]
    assert "usage" not in stems
    classes = collections.Counter(
        node.name
        for path in CORE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    )
    twice = {name for name, n in classes.items() if n > 1}
    assert twice - ONE_CONCEPT_CLASSES == set()
    assert "Usage" not in classes


@pytest.mark.parametrize("root", ["digest_core", "bots"])
def test_no_import_cycles_even_through_function_level_imports(root: str) -> None:
    modules = _modules(root)
    cycles = _cycles(modules)
    assert cycles == [], [" -> ".join(_a_cycle(_graph(modules), c)) for c in cycles]


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function_or_a_string(tmp_path: Path) -> None:
    """(The check above can fail: a cycle through a function-level import is found, and one
    through a module path importlib is given, as the registry's to a platform's spec.)"""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("import b\n")
    b.write_text("def f():\n    import a\n")
    assert _cycles({"a": a, "b": b}) == [["a", "b"]]
    b.write_text("def f():\n    return 1\n")
    assert _cycles({"a": a, "b": b}) == []
    (tmp_path / "p").mkdir()
    d, e = tmp_path / "p" / "d.py", tmp_path / "p" / "e.py"
    d.write_text('TABLE = {"e": "p.e"}\n')
    e.write_text('"""Built by p.d:build."""\nBUILD = "p.d:build"\n')
    assert _cycles({"p.d": d, "p.e": e}) == [["p.d", "p.e"]]
    e.write_text('"""Built by p.d:build."""\n')  # (prose names no module)
    assert _cycles({"p.d": d, "p.e": e}) == []


#: what no method of the composition root holds: a decision, a loop, a guard, a computation
BRANCHES = (ast.If, ast.IfExp, ast.Match, ast.BoolOp, ast.Compare)
LOOPS = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
GUARDS = (ast.Try, ast.TryStar, ast.With, ast.AsyncWith, ast.Raise)
SUMS = (ast.BinOp, ast.UnaryOp, ast.Subscript)
BEHAVIOUR = (*BRANCHES, *LOOPS, *GUARDS, *SUMS)
#: calls that decide by an object's type or attributes (duck typing)
INSPECTING = {"getattr", "hasattr", "isinstance"}


def _formatted(path: Path) -> str:
    """``path``'s source as ``ruff format`` makes it (the project's settings)."""
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"],
        input=path.read_text(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return out.stdout


def _the_root() -> list[tuple[Path, ast.ClassDef]]:
    """``DigestService`` and every class of the project it inherits from, formatted."""
    from digest_core.service.root import DigestService

    found = []
    for cls in DigestService.__mro__:
        if not cls.__module__.startswith("digest_core."):
            continue
        path = Path(inspect.getfile(cls))
        tree = ast.parse(_formatted(path))
        found += [
            (path, n) for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__
        ]
    return found


def _forwards(node: ast.Lambda) -> bool:
    """A lambda that only forwards its arguments, as they are, to a method named by attributes
    (late binding: a collaborator built after the one that calls it)."""
    call, params = node.body, [a.arg for a in node.args.args]
    return (
        isinstance(call, ast.Call)
        and not call.keywords
        and [a.id if isinstance(a, ast.Name) else None for a in call.args] == params
        and all(isinstance(n, ast.Name | ast.Attribute | ast.Load) for n in ast.walk(call.func))
    )


def _decisions(f: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """What in ``f``'s body is behaviour rather than wiring: a branch, loop, operator or
    look-up, a call deciding by type or attribute, a lambda that does more than forward."""
    found = []
    for statement in f.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Lambda):
                found += [] if _forwards(node) else [f"lambda {ast.unparse(node.body)}"]
            elif isinstance(node, BEHAVIOUR) and not _in_lambda(node, statement):
                found.append(type(node).__name__)
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in INSPECTING:
                found.append(ast.unparse(node.func))
    return found


def _in_lambda(node: ast.AST, statement: ast.stmt) -> bool:
    return any(
        node in set(ast.walk(lam)) for lam in ast.walk(statement) if isinstance(lam, ast.Lambda)
    )


def test_the_composition_root_owns_no_behaviour() -> None:
    """``DigestService`` builds and wires collaborators: at most 250 lines as ``ruff format``
    writes them, with every class of ours it inherits from (no ``# fmt: skip`` packing lines);
    its constructor and builder steps (``_build_*``, ``_expose``) at most 60 lines each and
    straight-line (assignments and calls), and no method holding behaviour: no branch, loop,
    operator or look-up, no duck typing, no lambda but one that only forwards."""
    classes = _the_root()
    assert [path.name for path, _ in classes] == ["root.py"]  # nothing inherited
    root = CORE / "service" / "root.py"
    assert "fmt:" not in root.read_text()
    assert (
        len(_formatted(root).splitlines())
        + sum((c.end_lineno or 0) - c.lineno + 1 for path, c in classes if path != root)
        <= 250
    )
    methods = [
        f
        for _, c in classes
        for f in c.body
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
    ]

    def wiring(name: str) -> bool:
        return name in ("__init__", "_expose") or name.startswith("_build_")

    def lines(f: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
        assert f.end_lineno is not None
        return f.end_lineno - f.lineno + 1

    long = [(f.name, lines(f)) for f in methods if lines(f) > (60 if wiring(f.name) else 12)]
    assert long == []
    branching = [
        (f.name, type(statement).__name__)
        for f in methods
        if wiring(f.name)
        for statement in f.body
        if not isinstance(statement, ast.Assign | ast.AnnAssign | ast.Expr)
    ]
    assert branching == []
    assert [(f.name, d) for f in methods for d in _decisions(f)] == []


def test_the_behaviour_check_finds_behaviour() -> None:
    """(The check above can fail: what the root once held is found.)"""
    source = """
def f(self, platforms):
    subscribable = frozenset(p.name for p in platforms if getattr(p, "subscriptions", False))
    signup = signups[0] if signups else None
    self.resumer = Resumer(
        window=lambda day: (self.poster.post_at(day), self.poster.post_at(day) + catch_up),
        post=lambda day: self.post(day, requested_by="resume:"),
        today=lambda: self.poster.today(),
        post_on=lambda day, name: self.posting.resume_on(day, name),
    )
"""
    [f] = ast.parse(source).body
    assert isinstance(f, ast.FunctionDef)
    assert _decisions(f) == [
        "GeneratorExp",
        "getattr",
        "IfExp",
        "Subscript",
        "lambda (self.poster.post_at(day), self.poster.post_at(day) + catch_up)",
        "lambda self.post(day, requested_by='resume:')",
    ]


def test_the_run_is_contexts_entered_top_down() -> None:
    """``digest-bot run``: every part an async context manager entered on one exit stack
    (no callback pushed to be run "from the last line up"), ``run`` and what it enters its
    parts with (``_serve``) under 60 lines each as ``ruff format`` writes them, and
    ``open_service`` too."""
    runtime = ROOT / "bots" / "runtime.py"
    assert "fmt:" not in runtime.read_text()
    tree = ast.parse(_formatted(runtime))
    functions = {
        f.name: f.end_lineno - f.lineno + 1
        for f in tree.body
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.end_lineno
    }
    assert {n: functions[n] for n in ("run", "_serve", "open_service") if functions[n] >= 60} == {}
    pushed = [
        ast.unparse(n.func)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("callback", "push_async_callback", "push_async_exit", "push")
    ]
    assert pushed == []
