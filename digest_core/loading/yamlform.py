"""The YAML form of an issue: read with libyaml's parser when PyYAML has it, file:line errors.

PyYAML's pure-Python reader, scanner and parser were most of the cost of a YAML issue (7.4x
the same content as text). When PyYAML is built with libyaml (``yaml.__with_libyaml__``, as
its wheels are), the events come from libyaml's C parser, the parser of ``yaml.CSafeLoader``.
The nodes are still composed here, in Python, so that anchors and aliases are refused, nesting
and list lengths are capped while the file is read (:class:`_Checks`), and the safe
constructor builds the values as before. ``CSafeLoader``'s own composer (C, not overridable)
would expand aliases and recurse without a cap.

A file the C parser refuses, or that any check refuses, is read again with the pure-Python
``SafeLoader``: its error messages and lines are the ones editors have always been shown
(libyaml words its syntax errors differently and counts a bad character's position in
bytes), and only refused files pay for the second reading.

Imported by :func:`digest_core.loading.structured.load_structured` on the first YAML file:
an archive of text issues never imports YAML.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from digest_core.errors import IssueFormatError
from digest_core.loading import shape

if TYPE_CHECKING:
    from digest_core.loading.shape import Loc
    from digest_core.models import Issue

CParser: Any
try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python loader alone
    CParser = None

#: which parser reads YAML issues first: "libyaml" (C) or "python"
PARSER = "python" if CParser is None else "libyaml"


def parse_yaml(text: str, *, path: str | Path) -> tuple[object, Callable[[Loc], int | None]]:
    """The data of a YAML document and what finds the line of a field path in it.

    Raises:
        IssueFormatError: not valid YAML, an anchor or alias, too deep, a list past its cap,
            a value the safe constructor cannot build, or a duplicate key (at its line).
    """
    if _CLoader is not None:
        try:
            return _read(_CLoader(text, path=path), path=path)
        except Exception:  # refused: the pure-Python loader says what is wrong, below
            pass
    return _parse_python(text, path=path)


def _parse_python(text: str, *, path: str | Path) -> tuple[object, Callable[[Loc], int | None]]:
    """:func:`parse_yaml` with PyYAML's pure-Python loader; its errors as file:line errors."""
    try:
        loader = _PyLoader(text, path=path)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, raw in the file
        line = text.count("\n", 0, exc.position) + 1
        detail = f"not valid YAML: the character U+{exc.character:04X} is not allowed; remove it"
        raise IssueFormatError(path, line, detail) from exc
    try:
        return _read(loader, path=path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "cannot be read"
        raise IssueFormatError(
            path, mark.line + 1 if mark else None, f"not valid YAML: {problem}"
        ) from exc
    except yaml.YAMLError as exc:
        raise IssueFormatError(path, None, f"not valid YAML: {exc}") from exc
    except RecursionError as exc:  # a guard: _Checks caps nesting before this can happen
        raise IssueFormatError(path, None, shape.too_deep()) from exc
    except (ValueError, TypeError, OverflowError) as exc:  # a guard, as construct_object wraps
        raise IssueFormatError(path, None, f"not valid YAML: {exc}") from exc


def _read(loader: Any, *, path: str | Path) -> tuple[object, Callable[[Loc], int | None]]:
    """Compose the single document, check its keys, construct it."""
    try:
        node = loader.get_single_node()
        if node is None:
            return None, _NodeLines(None)
        _check_duplicate_keys(node, path=path)
        return loader.construct_document(node), _NodeLines(node)
    finally:
        loader.dispose()


class _Checks(Composer):
    """A composer that refuses anchors and aliases and caps nesting while it composes.

    Aliases are what make "billion laughs" files and self-referencing data possible; an issue
    file has no use for them, so they are refused before anything is expanded. Values the safe
    constructor cannot build (``2026-02-30``, a 5000-digit number) become YAML errors at their
    line instead of a bare ValueError.
    """

    def _start(self, path: str | Path) -> None:
        self.path = path
        self.depth = 0
        self.loc: list[str | int] = []  # the field path of the node being composed

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[attr-defined]
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            what = (
                f"the alias *{event.anchor}"
                if isinstance(event, yaml.AliasEvent)
                else f"the anchor &{event.anchor}"
            )
            raise IssueFormatError(
                self.path,
                line,
                f"YAML anchors and aliases are not allowed in an issue file (found {what}); "
                "write the value out in full",
            )
        if self.depth >= shape.MAX_NESTING:
            raise IssueFormatError(self.path, line, shape.too_deep())
        part: str | int | None = None
        if isinstance(parent, yaml.SequenceNode):
            part = index
            self._check_list_cap(index, line)
        elif isinstance(parent, yaml.MappingNode) and isinstance(index, yaml.ScalarNode):
            part = str(index.value)  # composing a value: index is its key
        self.depth += 1
        if part is not None:
            self.loc.append(part)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
            if part is not None:
                self.loc.pop()

    def _check_list_cap(self, index: int, line: int | None) -> None:
        """Refuse a list past its model cap while composing it, so a file with 20,000 briefs
        stops at the 201st instead of being read whole."""
        name = self.loc[-1] if self.loc else None
        caps = shape.LIST_CAPS
        cap = caps.get(name, shape.MAX_LIST) if isinstance(name, str) else shape.MAX_LIST
        if index >= cap:
            loc = tuple(self.loc)
            fmt = shape.format_loc
            raise IssueFormatError(
                self.path,
                line,
                f"{fmt(loc)}: more than {cap} entries; at most {cap} are allowed "
                f"(the first one too many is {fmt((*loc, cap))})",
            )

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except (ValueError, TypeError, OverflowError) as exc:
            shown = f" {_short(node.value)}" if isinstance(node, yaml.ScalarNode) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read the value{shown}: {exc}", node.start_mark
            ) from exc


class _PyLoader(_Checks, yaml.SafeLoader):
    """PyYAML's pure-Python ``SafeLoader`` with the checks."""

    def __init__(self, text: str, *, path: str | Path) -> None:
        yaml.SafeLoader.__init__(self, text)
        self._start(path)


def _c_loader() -> type | None:
    """libyaml's parser (as in ``CSafeLoader``) under the checks' composer, the safe
    constructor and resolver; None without libyaml."""
    if CParser is None:
        return None

    # _Checks (a Composer) comes before CParser: CParser's own composer (C) would bypass
    # the checks, so get_single_node is Composer's, over CParser's events
    class CLoader(_Checks, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        def __init__(self, text: str, *, path: str | Path) -> None:
            CParser.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._start(path)

    return CLoader


_CLoader = _c_loader()


def _short(value: str, limit: int = 40) -> str:
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


class _NodeLines:
    """Maps a field path to the 1-based line of its node; ``None`` for an empty document."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._root = root

    def __call__(self, loc: Loc) -> int | None:
        node = self._root
        if node is None:
            return None
        line: int = node.start_mark.line + 1
        for part in loc:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                        line, child = key.start_mark.line + 1, value
                        break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and 0 <= part < len(node.value)
            ):
                child = node.value[part]
                line = child.start_mark.line + 1
            if child is None:
                break  # the deepest node there is, e.g. the item a required field is missing from
            node = child
        return line


def _check_duplicate_keys(node: yaml.Node, *, path: str | Path) -> None:
    """Reject a mapping that repeats a key (PyYAML would silently keep the last one)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[object, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise IssueFormatError(
                        path, line, f"duplicate key {key.value!r} (first at line {seen[key.value]})"
                    )
                seen[key.value] = line
            _check_duplicate_keys(value, path=path)
    elif isinstance(node, yaml.SequenceNode):
        children: Sequence[yaml.Node] = node.value
        for child in children:
            _check_duplicate_keys(child, path=path)


def dump_yaml(issue: Issue) -> str:
    """The issue's canonical YAML form: fields in model order, the date unquoted, no null fields."""
    data = issue.model_dump(mode="json", exclude_none=True)
    data["date"] = issue.date  # written as a YAML date, not a quoted string
    return yaml.dump(
        data,
        Dumper=_Dumper,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
        width=1_000_000,
    )


# YAML 1.1 reads NEL, LS and PS as line breaks, yet PyYAML's emitter may write them raw inside
# a plain or single-quoted scalar, which then reads back as "\n"; double quotes escape them.
_YAML_BREAKS = frozenset("\x85\u2028\u2029")


class _Dumper(yaml.SafeDumper):
    """SafeDumper that double-quotes strings holding characters YAML reads as line breaks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if _YAML_BREAKS.intersection(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)
