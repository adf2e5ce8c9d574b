"""docs/design.md's module map ("Shape") matches the code: every module of digest_core/ and
bots/ (and the suite's own machinery in tests/ and tests/fakes/) is named there, in its
package's block, and every path the map names exists.

A module is named by an entry line (its file name at the start of a line, indented under its
package's entry), by its path anywhere in the section, or by its file name in its own
package's block (the lines from the package's entry to the next entry of a package, nested
packages' lines excluded). A package is named the same way, as ``name/``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"

#: where an entry's text starts: a name further right continues the entry above
DESCRIPTION_COLUMN = 24
#: an entry line: a package (``name/``) or a module (``name.py``) left of the descriptions
ENTRY = re.compile(rf"^( {{0,{DESCRIPTION_COLUMN - 2}}})([\w.-]+/|[\w.-]+\.py)(?=\s|$)")
#: a path of the repository written out in the text
PATH = re.compile(r"(?<![\w./<>-])((?:digest_core|bots|tests|docs|benchmarks)/[\w./-]*[\w/])")
#: every module under these must be named (``__init__.py`` by its package)
TREES = ("digest_core", "bots")
#: every module directly in these but the tests themselves must be named
FOLDERS = ("tests", "tests/fakes")
#: the Alembic revisions, one per schema version: the map names their folder and pattern
EXEMPT = ("digest_core/delivery/ledger/migrations/versions/",)


def shape_of(doc: str) -> str:
    """The text of the section ``## Shape``, up to the next section."""
    return doc.split("\n## Shape\n", 1)[1].split("\n## ", 1)[0]


def _map(section: str) -> tuple[list[Path], dict[Path, str]]:
    """The paths the entries of the section's code block name, in order, and each package's
    own block of text."""
    block = section.split("```", 2)[1]
    entries: list[Path] = []
    own: dict[Path, list[str]] = defaultdict(list)
    stack: list[tuple[int, Path]] = []
    for line in block.splitlines():
        if found := ENTRY.match(line):
            indent, name = len(found[1]), found[2]
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = (stack[-1][1] if stack else Path()) / name.rstrip("/")
            entries.append(path)
            if name.endswith("/"):
                stack.append((indent, path))
        if stack:
            own[stack[-1][1]].append(line)
    return entries, {package: "\n".join(lines) for package, lines in own.items()}


def required(
    root: Path, trees: Iterable[str] = TREES, folders: Iterable[str] = FOLDERS
) -> set[Path]:
    """The modules and packages the map must name, relative to ``root``."""
    out: set[Path] = set()
    for tree in trees:
        for path in (root / tree).rglob("*.py"):
            rel = path.relative_to(root)
            if not rel.as_posix().startswith(EXEMPT):
                out.add(rel.parent if path.name == "__init__.py" else rel)
    for folder in folders:
        out.update(
            p.relative_to(root)
            for p in (root / folder).glob("*.py")
            if p.name != "__init__.py" and not p.name.startswith("test_")
        )
    return out


def problems(root: Path, doc: str, must: set[Path]) -> list[str]:
    """What is wrong with ``doc``'s map of the tree at ``root``: modules or packages of
    ``must`` it does not name, paths it names that do not exist, entries named twice."""
    section = shape_of(doc)
    entries, own = _map(section)
    written = {Path(p.rstrip("/")) for p in PATH.findall(section)}
    out = [f"named twice: {p}" for p in sorted({p for p in entries if entries.count(p) > 1})]
    out += [f"no such path: {p}" for p in sorted(set(entries) | written) if not (root / p).exists()]
    for path in sorted(must):
        word = path.name + ("/" if (root / path).is_dir() else "")
        in_block = re.search(rf"(?<![\w./<>-]){re.escape(word)}(?![\w])", own.get(path.parent, ""))
        if path not in entries and path not in written and not in_block:
            out.append(f"not in the map: {path.as_posix()}{'/' if word.endswith('/') else ''}")
    return out


def test_the_design_docs_map_names_every_module_and_only_what_exists() -> None:
    assert problems(ROOT, DESIGN.read_text(encoding="utf-8"), required(ROOT)) == []


BAD = """\
# A design page

## Shape

```
bots/                   a package: bots/sub/gone.py is long gone
  kept.py               an entry
  moved.py              an entry for a module since moved
  kept.py               the same entry again
  sub/                  a nested package; prose naming said.py
    inner.py            an entry
digest_core/            another package; prose naming elsewhere.py and x.py
```

## Next
bots/late.py is named after the section: it does not count.
"""


def test_a_map_that_misses_modules_or_names_missing_paths_fails(tmp_path: Path) -> None:
    for name in (
        "bots/__init__.py", "bots/kept.py", "bots/late.py", "bots/elsewhere.py",
        "bots/sub/__init__.py", "bots/sub/inner.py", "bots/sub/said.py",
        "bots/bare/__init__.py", "digest_core/x.py", "tests/helper.py", "tests/test_it.py",
    ):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    must = required(tmp_path, trees=("bots",), folders=("tests",))
    assert sorted(problems(tmp_path, BAD, must)) == [
        "named twice: bots/kept.py",
        "no such path: bots/moved.py",  # an entry
        "no such path: bots/sub/gone.py",  # a path in the text
        "not in the map: bots/bare/",  # a package
        "not in the map: bots/elsewhere.py",  # named in another package's block only
        "not in the map: bots/late.py",  # named outside the section
        "not in the map: tests/helper.py",  # the suite's machinery
    ]
