"""The structured forms of an issue (.json, .yaml): load with file:line errors, dump canonically.

The YAML specifics (libyaml's parser when present, the checks while composing) are in
:mod:`digest_core.loading.yamlform`, imported with the first YAML file.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import ConfigDict, TypeAdapter, ValidationError

from digest_core.errors import IssueFormatError
from digest_core.loading.shape import LIST_CAPS as LIST_CAPS
from digest_core.loading.shape import MAX_LIST as MAX_LIST
from digest_core.loading.shape import MAX_NESTING as MAX_NESTING
from digest_core.loading.shape import Loc as Loc
from digest_core.loading.shape import format_loc as format_loc
from digest_core.loading.shape import too_deep as too_deep
from digest_core.models import Issue

log = logging.getLogger(__name__)

StructuredSuffix = Literal[".json", ".yaml", ".yml"]

#: deferred: built at the first file with a date of its own, not when the module is imported
_DATE = TypeAdapter(dt.date, config=ConfigDict(defer_build=True))


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
        from digest_core.loading.yamlform import parse_yaml  # YAML only for YAML files

        raw, find_line = parse_yaml(text, path=path)
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
    from digest_core.loading import yamlform

    return yamlform.dump_yaml(issue)


def _no_line(loc: Loc) -> int | None:
    """Where a field is in JSON: not known (only its syntax errors have lines)."""
    return None


def _parse_json(text: str, *, path: str | Path) -> tuple[object, Callable[[Loc], int | None]]:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    _check_json_nesting(text, path=path)
    try:
        return json.loads(text, object_pairs_hook=no_duplicates), _no_line
    except json.JSONDecodeError as exc:
        raise IssueFormatError(
            path, exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})"
        ) from exc
    except ValueError as exc:
        raise IssueFormatError(path, None, f"not valid JSON: {exc}") from exc
    except RecursionError as exc:  # a guard: _check_json_nesting stops such files first
        raise IssueFormatError(path, None, too_deep()) from exc


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
                raise IssueFormatError(path, line, too_deep())
        elif char in "]}":
            depth -= 1


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
