"""Issue 24, item 7: YAML issues are read with libyaml's parser when PyYAML has it.

The C path must give the same data, the same lines and the same errors as PyYAML's pure-Python
loader (what every other test of the YAML form checks, whichever path PyYAML offers); these
tests compare the two paths directly, and check that a valid file never needs the second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from digest_core.errors import IssueFormatError
from digest_core.loading import dump_yaml, load_issue, load_structured, yamlform
from tests.loading.test_structured import STRUCTURED_BAD, STRUCTURED_CHARS, YAML_CAPS
from tests.samples import SAMPLE_ARCHIVE

DATA = Path(__file__).parent / "data"
needs_libyaml = pytest.mark.skipif(
    not yaml.__with_libyaml__, reason="PyYAML is built without libyaml here"
)

#: valid YAML: the fixture, every sample issue in its YAML form, scalars whose type or text a
#: parser could read differently (not a valid issue: the model refuses them), a BOM and ---
GOOD = [
    (DATA / "2026-03-06.yaml").read_text(encoding="utf-8"),
    *(dump_yaml(load_issue(p)) for p in sorted(SAMPLE_ARCHIVE.glob("*.txt"))),
    "date: 2026-03-06\nheadline:\n  title: 'yes'\n  paragraphs:\n  - |\n    一段\n    两行\n"
    '  - >\n    折叠\n    的行\n  - "a\\Nb\\u2028c\\x41"\n  - 0o17\n  - 1_000\n  - .5\n'
    "  - ~\n  - 2026-03-06 08:00:00+08:00\n  - on\nbriefs: [{title: 't: x', paragraphs: [p]}]\n",
    '\ufeff# a comment\n---\ndate: 2026-03-06\nheadline: {title: "\\t标题", paragraphs: [p]}\n',
]

#: refused YAML: each of the YAML cases of the other tests, and what only a parser catches
BAD = [
    *(case[2] for case in STRUCTURED_BAD if case[1] == ".yaml"),
    *(case[2] for case in STRUCTURED_CHARS if case[1] == ".yaml"),
    *("date: 2026-03-06\n" + case[1] for case in YAML_CAPS),
    "a: &a [*a]\n",
    "date: 2026-03-06\nheadline: *h\n",
    "[" * 100_000,
    "date: 2026-03-06\nheadline:\n  title: a\x1b[2Jb\n",
    "date: 2026-03-06\nheadline:\n  title: t\tx: y\n",
    "date: 2026-02-30\n",
    "date: 2026-03-06\n---\ndate: 2026-03-07\n",
    'date: "2026-03-06\n',
    "date: 2026-03-06\n  bad indent: 1\n",
    "%YAML 9.9\n---\ndate: 2026-03-06\n",
    "headline:\n  title: \ud800\n",
]


def _outcome(text: str) -> object:
    """What loading ``text`` gives: the issue, or the error's line, detail and the others."""
    try:
        return load_structured(text, path="x.yaml", suffix=".yaml")
    except IssueFormatError as exc:
        return (exc.line, exc.detail, exc.more)


@needs_libyaml
def test_the_c_parser_is_the_one_used_when_pyyaml_has_it() -> None:
    assert yamlform.PARSER == "libyaml"
    assert yamlform._CLoader is not None
    # the checks' composer (Python) comes before CParser's own, which would bypass them
    mro = yamlform._CLoader.__mro__
    assert mro.index(yamlform._Checks) < mro.index(yamlform.CParser)


@needs_libyaml
@pytest.mark.parametrize("text", GOOD, ids=range(len(GOOD)))
def test_valid_yaml_is_read_by_the_c_parser_alone(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = text.removeprefix("\ufeff")
    expected, _ = yamlform._parse_python(text, path="x.yaml")

    def second_reading(text: str, *, path: object) -> None:
        raise AssertionError("valid YAML was read a second time, by the pure-Python loader")

    monkeypatch.setattr(yamlform, "_parse_python", second_reading)
    data, _ = yamlform.parse_yaml(text, path="x.yaml")
    assert data == expected and isinstance(data, dict)


@needs_libyaml
@pytest.mark.parametrize("text", GOOD, ids=range(len(GOOD)))
def test_both_parsers_give_the_same_data_and_lines(text: str) -> None:
    text = text.removeprefix("\ufeff")
    read = [
        yamlform._read(loader(text, path="x.yaml"), path="x.yaml")
        for loader in (yamlform._CLoader, yamlform._PyLoader)
    ]
    (c_data, c_lines), (py_data, py_lines) = read
    assert json.dumps(c_data, default=str) == json.dumps(py_data, default=str)
    assert c_data == py_data
    for loc in _paths(py_data):
        assert c_lines(loc) == py_lines(loc), loc


def _paths(data: object, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every field path in ``data`` (mappings and lists, all the way down)."""
    out = [at]
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, (*at, str(key)))
    elif isinstance(data, list):
        for n, value in enumerate(data):
            out += _paths(value, (*at, n))
    return out


@pytest.mark.parametrize("text", [*GOOD, *BAD], ids=range(len(GOOD) + len(BAD)))
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_with_and_without_the_c_parser_the_outcome_is_the_same(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _outcome(text)
    monkeypatch.setattr(yamlform, "_CLoader", None)  # PyYAML without libyaml
    assert _outcome(text) == fast


@pytest.mark.slow  # over 0.25 s: left out of make check
def test_every_refused_case_is_refused() -> None:
    for text in BAD:
        assert isinstance(_outcome(text), tuple), text
