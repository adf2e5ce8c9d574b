"""The narrow port: adapters ask the core only through digest_core.port.Port, and never sleep.

Each platform folder under ``bots/`` is read as a syntax tree (as tests/core/test_no_platform_names
does for the core): what an adapter may use of the core is what the Port offers, and what it
imports of the core is ``digest_core.port`` (its ``__all__``) and its own renderer module (the
one its spec names, ``digest_core.rendering.<platform>``): one door. The door cannot be walked
around: a name taken from another module of ``bots`` is followed to the core object it is
(:func:`through_bots`), and no adapter imports a module whose name it computes
(:func:`dynamic_imports`).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

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
#: a string that is a core module's name or its start (``"digest_core." + name``), not prose
NAMING = re.compile(r"digest_core[\w.:]*")
DOOR = "digest_core.port"
#: what imports a module by a name given at run time
IMPORTERS = {"import_module", "__import__"}


def own_renderer(folder: str) -> str | None:
    """The renderer module the adapter of ``bots/<folder>/`` may import besides the port: the
    one its spec names (the console's is ``plain``); None for a folder that is no platform
    (the shared work-chat code gets its renderer from each platform)."""
    return registry.spec(folder).renderer_module if folder in registry.names() else None


def module_name(path: Path) -> str:
    """``bots.telegram.handlers`` for ``bots/telegram/handlers.py``."""
    parts = path.relative_to(BOTS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core(name: str) -> bool:
    return name == "digest_core" or name.startswith("digest_core.")


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
    written as a string, for ``importlib``, counts as an import; so does a string that
    starts one, ``"digest_core." + name``)."""
    allowed = {DOOR} if own is None else {DOOR, own}

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
        elif isinstance(node, ast.Constant) and NAMING.fullmatch(str(node.value)):
            named = MODULE_PATH.fullmatch(str(node.value))
            if named is None or named[1] not in allowed:
                hits.append(f"{line}: imports {node.value!r} by name")
    return hits


def dynamic_imports(source: str) -> list[str]:
    """``line: what`` for each import in ``source`` of a module whose name is not written out
    (``importlib.import_module(name)``, ``__import__(prefix + name)``), each importer passed
    around as a value or named for ``getattr``, and each ``exec``/``eval``: any of them could
    reach the core past :func:`core_imports`. A literal name is fine (that one checks it)."""
    tree = ast.parse(source)
    hits: list[str] = []
    called: set[int] = set()  # the nodes called as a function
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            name = ast.unparse(node.func).rpartition(".")[2]
            first = node.args[0] if node.args else None
            if name in ("exec", "eval"):
                hits.append(f"{line}: {name}(…)")
            elif name in IMPORTERS and not (
                isinstance(first, ast.Constant) and isinstance(first.value, str)
            ):
                hits.append(f"{line}: {ast.unparse(node)} (a module named at run time)")
        elif isinstance(node, ast.Constant) and node.value in IMPORTERS:
            hits.append(f"{line}: names {node.value!r}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.Attribute) and id(node) not in called:
            named = node.id if isinstance(node, ast.Name) else node.attr
            if named in IMPORTERS:
                hits.append(f"{node.lineno}: {named} passed as a value")
    return hits


@functools.cache
def exported() -> list[object]:
    """Everything the port exports (by identity: a name of it may be reached from anywhere)."""
    import digest_core.port as port

    return [getattr(port, n) for n in port.__all__]


def core_object(value: object, own: str | None, door: list[object]) -> str | None:
    """What of the core ``value`` (an object an adapter took from a module of ``bots``) is
    when the door is not where it comes from: a module of the core other than the port and
    ``own``; a class or function defined in the core that the port does not export (``door``)
    nor ``own`` defines; an object of such a class. None: a module, class, function or value
    of the bot's own, or one of the door's."""
    if isinstance(value, ModuleType):
        name = value.__name__
        return f"the module {name}" if core(name) and name not in (DOOR, own) else None
    if any(value is d for d in door):
        return None
    kind = value if inspect.isclass(value) or inspect.isroutine(value) else type(value)
    module = getattr(kind, "__module__", None) or ""
    if not core(module) or module == own or any(kind is d for d in door):
        return None
    what = f"{module}.{getattr(kind, '__qualname__', '?')}"
    return what if kind is value else f"a {what}"


def origin(module: str, name: str, seen: frozenset[str] = frozenset()) -> str | None:
    """The module of the core that ``name`` of the bot's module ``module`` was imported from,
    following the bot's own re-imports (``from bots.x import name`` where bots.x took it from
    ``digest_core.y``: ``digest_core.y``); None when the bot defines it."""
    source = imported_names(module).get(name)
    if source is None or module in seen:
        return None
    taken_from, original = source
    if core(taken_from):
        return taken_from
    return origin(taken_from, original, seen | {module}) if bots_module(taken_from) else None


@functools.cache
def imported_names(module: str) -> dict[str, tuple[str, str]]:
    """What the source of ``module`` binds by ``from … import``: local name -> (the module
    it is imported from, its name there)."""
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None or not found.origin.endswith(".py"):
        return {}
    package = module if found.submodule_search_locations else module.rpartition(".")[0]
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(Path(found.origin).read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names[alias.asname or alias.name] = (absolute(node, package), alias.name)
    return names


def absolute(node: ast.ImportFrom, package: str) -> str:
    """The module ``node`` imports from, its dots resolved against ``package``."""
    if node.level == 0:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def bots_module(name: str) -> bool:
    return name == "bots" or name.startswith("bots.")


def through_bots(source: str, module: str, own: str | None) -> list[str]:
    """``line: what`` for each object of the core that ``source`` (the adapter module
    ``module``, whose renderer module is ``own``) takes through another module of ``bots``
    rather than through the door: by ``from bots.… import name`` (followed to the object it
    is, :func:`core_object`, and to where that module imported it, :func:`origin`), as an
    attribute of a module of ``bots`` (``runtime.Ledger``) or by ``getattr`` on one."""
    package = module if module_name_is_package(module) else module.rpartition(".")[0]
    door = exported()
    tree = ast.parse(source)
    hits: list[str] = []
    modules: dict[str, ModuleType] = {}  # a local name of a module of bots
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if bots_module(alias.name):
                    imported = importlib.import_module(alias.name)
                    local = alias.asname or alias.name.partition(".")[0]
                    modules[local] = imported if alias.asname else importlib.import_module(local)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node, package)
            if not bots_module(base):
                continue
            for alias in node.names:
                if alias.name == "*":
                    hits.append(f"{line}: from {base} import *")
                    continue
                value = attribute_or_module(importlib.import_module(base), alias.name)
                what = core_object(value, own, door)
                taken = origin(base, alias.name)
                if what is None and taken is not None and taken not in (DOOR, own):
                    what = f"imported there from {taken}"
                if what is not None:
                    hits.append(f"{line}: from {base} import {alias.name} ({what})")
                if isinstance(value, ModuleType):
                    modules[alias.asname or alias.name] = value
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        chain: list[str] = []
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = dotted(node)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            chain = [*dotted(node.args[0]), node.args[1].value]
        if len(chain) < 2 or chain[0] not in modules:
            continue
        value: object = modules[chain[0]]
        for n, attribute in enumerate(chain[1:], start=2):  # the first core object on the way
            if not hasattr(value, attribute):
                break
            value = getattr(value, attribute)
            what = core_object(value, own, door)
            if what is not None:
                hits.append(f"{node.lineno}: {'.'.join(chain[:n])} ({what})")
                break
    return hits


def module_name_is_package(module: str) -> bool:
    found = importlib.util.find_spec(module)
    return bool(found and found.submodule_search_locations)


def attribute_or_module(module: ModuleType, name: str) -> object:
    """``from module import name``: the attribute, or else the submodule (None: neither, a
    name imported for the type checker only; :func:`origin` follows it)."""
    if hasattr(module, name):
        return getattr(module, name)
    if not hasattr(module, "__path__"):  # not a package: no submodules
        return None
    return importlib.import_module(f"{module.__name__}.{name}")


def dotted(node: ast.expr) -> list[str]:
    """``["bots", "runtime", "Ledger"]`` for ``bots.runtime.Ledger``; [] for anything else."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return [*inner, node.attr] if inner else []
    return []


def port_names_imported(source: str) -> set[str]:
    """The names ``source`` imports from ``digest_core.port``."""
    return {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module == "digest_core.port"
        for alias in node.names
    }


def test_the_import_rule_catches_what_it_should() -> None:
    own = "digest_core.rendering.feishu"
    bad = (
        "from digest_core.commands import Request\n"
        "import digest_core.errors\n"
        "from digest_core.rendering import Message, feishu\n"
        "from digest_core.rendering.telegram import corrected\n"
        "def f():\n    from digest_core import service\n"
        "if TYPE_CHECKING:\n    from digest_core.clock import Clock\n"
        'RENDERER = "digest_core.rendering.plain"\n'
        'PREFIX = "digest_core."\n'
        'module = f"digest_core.{name}"\n'
    )
    assert len(core_imports(bad, own)) == 9
    fine = (
        "from digest_core.port import Port, Request\n"
        "from digest_core.rendering import feishu as feishu_render\n"
        "from digest_core.rendering.feishu import render\n"
        "from digest_core import port\n"
        'RENDERER = "digest_core.rendering.feishu"\n'
        "from .adapter import X\n"
    )
    assert core_imports(fine, own) == []
    # the work-chat folder is no platform: the port only
    assert len(core_imports(fine, None)) == 3


def test_the_rule_on_computed_imports_catches_what_it_should() -> None:
    bad = (
        "import importlib\n"
        'importlib.import_module("digest_core." + n)\n'
        'import_module(f"digest_core.{n}")\n'
        "__import__(name)\n"
        "importlib.__import__(name, fromlist=['x'])\n"
        "await asyncio.to_thread(__import__, 'digest_core.delivery')\n"
        "load = importlib.import_module\n"
        'getattr(importlib, "import_module")(name)\n'
        'exec("from digest_core.delivery import Ledger")\n'
    )
    assert len(dynamic_imports(bad)) == 8
    fine = (
        'importlib.import_module("bots.feishu.app")\n'
        '__import__("dingtalk_stream")\n'
        "importlib.util.find_spec('tornado')\n"
    )
    assert dynamic_imports(fine) == []


def test_the_rule_on_the_bots_modules_catches_what_it_should() -> None:
    # bots.runtime, the composition root, holds the core's parts: none may be taken from it
    own, module = "digest_core.rendering.wecom", "bots.wecom.adapter"
    bad = (
        "from bots.runtime import Ledger, DeliveryEngine\n"  # classes the port does not export
        "from bots.runtime import Settings\n"  # exported, but runtime took it from the core
        "from bots import runtime\n"
        "runtime.Archive\n"
        "import bots.runtime\n"
        "bots.runtime.DeliveryEngine.deliver\n"
        'getattr(runtime, "Ledger")\n'
        "from bots.cli import issues\n"
        "issues.render\n"  # digest_core.rendering's
        "from bots.cli.issues import Part\n"  # through digest_core.rendering, not the door
        "from bots.runtime import log\n"  # a value of the bot's own: fine
    )
    hits = through_bots(bad, module, own)
    assert len(hits) == 8, hits
    fine = (
        "from bots.workchat.adapter import Request, WebhookAdapter\n"
        "from bots.runtime import Adapter\n"  # bots.runtime took it from the port
        "from bots.telegram.spec import TELEGRAM_LIMITS\n"  # a PlatformLimits: exported
        "from bots.wecom import spec\n"
        "spec.WECOM_LIMITS.overall\n"
        "from . import settings\n"
        "from .settings import WeComSettings\n"
    )
    assert through_bots(fine, module, own) == []
    # the platform's own renderer is as good as the door
    mine = "from bots.wecom import adapter\nadapter.wecom_render.Limits\n"
    assert through_bots(mine, module, own) == []
    assert len(through_bots(mine, "bots.feishu.adapter", "digest_core.rendering.feishu")) == 1


def test_the_specs_load_only_the_bots_own_adapters_by_name() -> None:
    from bots.platformspec import load_adapter

    assert load_adapter("bots.wecom.adapter:WeComAdapter").name == "wecom"
    for path in ("digest_core.delivery:Ledger", "bots.wecom.adapter", "botsx.y:Z"):
        with pytest.raises(ValueError, match=r"is not 'bots\."):
            load_adapter(path)


def private_exports(names: list[str]) -> list[str]:
    """The names of ``names`` (a module's ``__all__``) that are private (``_x``)."""
    return [n for n in names if n.startswith("_")]


def test_the_rule_on_private_exports_catches_what_it_should() -> None:
    assert private_exports(["Port", "_LAZY", "__getattr__", "parse_choice"]) == [
        "_LAZY",
        "__getattr__",
    ]


def test_adapters_import_the_core_only_through_the_port_and_their_renderer() -> None:
    found = []
    for module in MODULES:
        own = own_renderer(module.relative_to(BOTS).parts[0])
        where = module.relative_to(BOTS.parent)
        found += [f"{where}:{hit}" for hit in core_imports(module.read_text("utf-8"), own)]
    assert found == []


def test_adapters_import_no_module_by_a_computed_name() -> None:
    found = []
    for module in MODULES:
        where = module.relative_to(BOTS.parent)
        found += [f"{where}:{hit}" for hit in dynamic_imports(module.read_text("utf-8"))]
    assert found == []


def test_adapters_take_nothing_of_the_core_through_other_modules_of_bots() -> None:
    found = []
    for module in MODULES:
        own = own_renderer(module.relative_to(BOTS).parts[0])
        where = module.relative_to(BOTS.parent)
        hits = through_bots(module.read_text("utf-8"), module_name(module), own)
        found += [f"{where}:{hit}" for hit in hits]
    assert found == []


def test_the_port_exports_everything_adapters_import_from_it() -> None:
    import digest_core.port as port

    exported = set(port.__all__)
    assert [n for n in exported if not hasattr(port, n)] == []
    assert private_exports(port.__all__) == []
    assert len(exported) == len(port.__all__)
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
