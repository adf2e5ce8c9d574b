"""The structured forms of an issue (.json, .yaml): load with file:line errors, dump canonically."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import TypeAdapter, ValidationError

from digest_core.errors import IssueFormatError
from digest_core.models import MAX_BRIEFS, MAX_LINKS, MAX_PARAGRAPHS, Issue, shorten

log = logging.getLogger(__name__)

#: A location inside the data, as pydantic reports it: ``("briefs", 2, "links", 0)``.
Loc = tuple[str | int, ...]
StructuredSuffix = Literal[".json", ".yaml", ".yml"]

#: How deeply lists and mappings may nest in an issue file. An issue needs 4 levels (issue,
#: briefs, item, links); the cap keeps hostile files far from Python's recursion limit.
MAX_NESTING = 32

_DATE = TypeAdapter(dt.date)
#: The model's caps on lists, by field name, for checking YAML while it is read.
_LIST_CAPS: dict[str, int] = {
    "briefs": MAX_BRIEFS,
    "paragraphs": MAX_PARAGRAPHS,
    "links": MAX_LINKS,
}
#: Any other list (which the schema refuses anyway) stops at the largest cap.
_MAX_LIST = max(_LIST_CAPS.values())


def format_loc(loc: Loc) -> str:
    """``("briefs", 2, "links", 0)`` -> ``briefs.2.links.0`` (the field path used in messages);
    a key from the file is shortened and escaped, as it may hold anything."""
    return ".".join(shorten(str(part), 40) for part in loc) or "(top level)"


class Problem(NamedTuple):
    """One problem pydantic found: the field path, a plain message, and the path to look the
    line up by (for a list over its cap, the first element past it)."""

    loc: Loc
    msg: str
    at: Loc


def validation_problems(exc: ValidationError) -> list[Problem]:
    """Each problem pydantic found, in pydantic's order, less the echo of a list that is too
    short only because its items failed. Messages never quote input raw: the model's own
    messages escape what they quote, pydantic's quote nothing."""
    out: list[Problem] = []
    errors = exc.errors(include_url=False, include_input=False)
    inner = {tuple(err["loc"])[:n] for err in errors for n in range(len(err["loc"]))}
    for err in errors:
        loc: Loc = tuple(err["loc"])
        at = loc
        kind = err["type"]
        if kind == "too_short" and loc in inner:
            continue  # "at least 1 item" only because an item inside failed: that one says why
        ctx = err.get("ctx") or {}
        if kind == "missing":
            msg = "required but missing"
        elif kind == "extra_forbidden":
            msg = "unknown field (not part of the issue schema)"
        elif kind == "too_long" and "actual_length" in ctx:
            cap = int(ctx["max_length"])
            msg = (
                f"{ctx['actual_length']} entries; at most {cap} are allowed "
                f"(the first one too many is {format_loc((*loc, cap))})"
            )
            at = (*loc, cap)
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
        out.append(Problem(loc, msg, at))
    return out


def decode_utf8(data: bytes, *, path: str | Path) -> str:
    """Decode issue file bytes as UTF-8, dropping a leading BOM.

    Raises:
        IssueFormatError: at the line of the first byte that is not UTF-8.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise IssueFormatError(
            path,
            line,
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {column}); "
            "save the file as UTF-8",
        ) from exc
    return text.removeprefix("\ufeff")


def load_structured(
    data: bytes | str,
    *,
    path: str | Path = "<data>",
    date: dt.date | None = None,
    suffix: StructuredSuffix,
) -> Issue:
    """Load an issue from its JSON or YAML form, validated by the :class:`Issue` model.

    ``date`` (from the file name or the caller) fills in a missing ``date`` field; when the data
    has its own ``date`` it MUST be the same day. Duplicate keys are errors, not "last one wins".

    Raises:
        IssueFormatError: ``path:line: field.path: what is wrong``; the line is known for YAML
            (every node) and for JSON syntax errors, and left out when it cannot be found cheaply.
    """
    text = decode_utf8(data, path=path) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    if suffix == ".json":
        raw, find_line = _parse_json(text, path=path)
    else:
        raw, find_line = _parse_yaml(text, path=path)
    if not isinstance(raw, dict):
        found = "nothing (an empty document)" if raw is None else type(raw).__name__
        detail = f"expected a mapping of issue fields, found {found}"
        raise IssueFormatError(path, find_line(()), detail)
    fields: dict[str, Any] = dict(raw)
    if date is not None:
        if "date" in fields:
            try:
                own = _DATE.validate_python(fields["date"])
            except ValidationError:
                own = None  # the model reports the bad value below
            if own is not None and own != date:
                raise IssueFormatError(
                    path,
                    find_line(("date",)),
                    f"date: the data says {own} but the file name or caller says {date}",
                )
        else:
            fields["date"] = date
    try:
        return Issue.model_validate(fields)
    except ValidationError as exc:
        first, *rest = validation_problems(exc)
        more = [(find_line(p.at), f"{format_loc(p.loc)}: {p.msg}") for p in rest]
        detail = f"{format_loc(first.loc)}: {first.msg}"
        raise IssueFormatError(path, find_line(first.at), detail, more=more) from exc


def dump_json(issue: Issue) -> str:
    """The issue's canonical JSON form: 2-space indent, UTF-8 text unescaped, no null fields."""
    return issue.model_dump_json(indent=2, exclude_none=True) + "\n"


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


class _LineFinder:
    """Maps a field path to a 1-based line; ``None`` where the form cannot tell."""

    def __init__(self, root: yaml.Node | None = None) -> None:
        self._root = root

    def __call__(self, loc: Loc) -> int | None:
        node = self._root
        if node is None:
            return None
        line = node.start_mark.line + 1
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


def _parse_json(text: str, *, path: str | Path) -> tuple[object, _LineFinder]:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    _check_json_nesting(text, path=path)
    try:
        return json.loads(text, object_pairs_hook=no_duplicates), _LineFinder()
    except json.JSONDecodeError as exc:
        raise IssueFormatError(
            path, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})"
        ) from exc
    except ValueError as exc:
        raise IssueFormatError(path, None, f"not valid JSON: {exc}") from exc
    except RecursionError as exc:  # a guard: _check_json_nesting stops such files first
        raise IssueFormatError(path, None, _too_deep()) from exc


# A JSON string (so brackets inside it are not counted) or one bracket.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _check_json_nesting(text: str, *, path: str | Path) -> None:
    """Reject JSON nested deeper than MAX_NESTING, at the line where it gets too deep.

    One regex pass over strings and brackets, without parsing: invalid JSON is left for the
    parser to report (an unterminated string only makes this count a few brackets too many).
    """
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        char = token[0]
        if char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, token.start()) + 1
                raise IssueFormatError(path, line, _too_deep())
        elif char in "]}":
            depth -= 1


def _too_deep() -> str:
    return (
        f"nested too deeply: lists and mappings may nest at most {MAX_NESTING} levels "
        "(an issue needs 4)"
    )


class _IssueLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases and caps nesting while it composes.

    Aliases are what make "billion laughs" files and self-referencing data possible; an issue
    file has no use for them, so they are refused before anything is expanded. Values the safe
    constructor cannot build (``2026-02-30``, a 5000-digit number) become YAML errors at their
    line instead of a bare ValueError.
    """

    def __init__(self, text: str, *, path: str | Path) -> None:
        super().__init__(text)
        self.path = path
        self.depth = 0
        self.loc: list[str | int] = []  # the field path of the node being composed

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # stub lacks it
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
        if self.depth >= MAX_NESTING:
            raise IssueFormatError(self.path, line, _too_deep())
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
        stops at the 201st instead of being read whole (pure-Python YAML is slow)."""
        name = self.loc[-1] if self.loc else None
        cap = _LIST_CAPS.get(name, _MAX_LIST) if isinstance(name, str) else _MAX_LIST
        if index >= cap:
            loc = tuple(self.loc)
            raise IssueFormatError(
                self.path,
                line,
                f"{format_loc(loc)}: more than {cap} entries; at most {cap} are allowed "
                f"(the first one too many is {format_loc((*loc, cap))})",
            )

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as exc:
            shown = f" {_short(node.value)}" if isinstance(node, yaml.ScalarNode) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read the value{shown}: {exc}", node.start_mark
            ) from exc


def _short(value: str, limit: int = 40) -> str:
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


def _parse_yaml(text: str, *, path: str | Path) -> tuple[object, _LineFinder]:
    try:
        loader = _IssueLoader(text, path=path)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, raw in the file
        line = text.count("\n", 0, exc.position) + 1
        detail = f"not valid YAML: the character U+{exc.character:04X} is not allowed; remove it"
        raise IssueFormatError(path, line, detail) from exc
    try:
        node = loader.get_single_node()
        if node is None:
            return None, _LineFinder()
        _check_duplicate_keys(node, path=path)
        return loader.construct_document(node), _LineFinder(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "cannot be read"
        raise IssueFormatError(
            path, mark.line + 1 if mark else None, f"not valid YAML: {problem}"
        ) from exc
    except yaml.YAMLError as exc:
        raise IssueFormatError(path, None, f"not valid YAML: {exc}") from exc
    except RecursionError as exc:  # a guard: _IssueLoader caps nesting before this can happen
        raise IssueFormatError(path, None, _too_deep()) from exc
    except (ValueError, TypeError, OverflowError) as exc:  # a guard, as construct_object wraps
        raise IssueFormatError(path, None, f"not valid YAML: {exc}") from exc
    finally:
        loader.dispose()


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


__all__ = [
    "MAX_NESTING",
    "Loc",
    "Problem",
    "StructuredSuffix",
    "decode_utf8",
    "dump_json",
    "dump_yaml",
    "format_loc",
    "load_structured",
    "validation_problems",
]
