"""The structured forms (JSON, YAML) and load_issue: validation errors, dates, round trips."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings

from digest_core.errors import IssueFormatError
from digest_core.loading import (
    MAX_ISSUE_BYTES,
    date_from_name,
    dump_json,
    dump_text,
    dump_yaml,
    load_issue,
    load_structured,
    parse_text,
    shape,
    structured,
)
from digest_core.loading.structured import MAX_NESTING, StructuredSuffix
from digest_core.models import (
    MAX_BRIEFS,
    MAX_LINKS,
    MAX_PARAGRAPH_CHARS,
    MAX_PARAGRAPHS,
    MAX_TITLE_CHARS,
    Issue,
    issue_json_schema,
)
from tests.loading.test_text import issues
from tests.quick import examples

DATA = Path(__file__).parent / "data"
TEXT_FIXTURES = sorted(DATA.glob("*.txt"))
ALL_FIXTURES = sorted(DATA.glob("2*.*"))
DAY = dt.date(2026, 3, 6)


def test_json_fixture_loads_with_its_own_date() -> None:
    issue = load_issue(DATA / "2026-03-05.json")
    assert issue.date == dt.date(2026, 3, 5)
    assert issue.lede == "检索增强生成的瓶颈常在检索，不在生成。"
    assert len(issue.headline.paragraphs) == 2
    assert issue.briefs[0].title == "向量数据库支持 <filter> & 排序组合查询"
    assert issue.classic is None


def test_yaml_fixture_loads_an_unquoted_date_and_a_question() -> None:
    issue = load_issue(DATA / "2026-03-06.yaml")
    assert issue.date == DAY
    assert issue.lede is None
    assert issue.briefs[0].links == ()
    assert issue.classic is not None
    assert issue.classic.question == "残差连接在 Transformer 里扮演了同样的角色吗？"


@pytest.mark.parametrize("path", TEXT_FIXTURES, ids=lambda p: p.name)
def test_text_to_json_to_text_and_text_to_yaml_to_text(path: Path) -> None:
    issue = load_issue(path)
    text = dump_text(issue)
    via_json = load_structured(dump_json(issue), suffix=".json")
    via_yaml = load_structured(dump_yaml(issue), suffix=".yaml")
    assert via_json == issue and via_yaml == issue
    assert dump_text(via_json) == text and dump_text(via_yaml) == text
    assert via_json.revision == issue.revision


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_every_fixture_survives_every_conversion(path: Path) -> None:
    issue = load_issue(path)
    assert parse_text(dump_text(issue), date=issue.date) == issue
    assert load_structured(dump_yaml(issue), suffix=".yaml") == issue
    assert load_structured(dump_json(issue).encode("utf-8"), suffix=".json") == issue


def test_dumps_are_readable_utf8_without_nulls() -> None:
    issue = load_issue(DATA / "2026-03-05.json")
    text = dump_json(issue)
    assert "检索增强" in text and "\\u" not in text and "null" not in text
    assert json.loads(text)["date"] == "2026-03-05"
    assert "date: 2026-03-05\n" in dump_yaml(issue)  # a YAML date, not a quoted string
    assert yaml.safe_load(dump_yaml(issue))["date"] == dt.date(2026, 3, 5)


def test_strings_that_look_like_other_yaml_types_or_hold_yaml_line_breaks_stay_strings() -> None:
    base = json.loads(dump_json(load_issue(DATA / "2026-03-05.json")))
    base["headline"]["title"] = "yes"
    base["headline"]["paragraphs"] = ["2026-01-01", "null", "0x10", "- dash", "a\u2028b\u2029c"]
    issue = Issue.model_validate(base)
    assert load_structured(dump_yaml(issue), suffix=".yaml") == issue


@settings(max_examples=examples(150))
@given(issues)
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_json_and_yaml_round_trip_any_issue(issue: Issue) -> None:
    assert load_structured(dump_json(issue), suffix=".json") == issue
    assert load_structured(dump_yaml(issue), suffix=".yaml") == issue


# --- errors --------------------------------------------------------------------------------

YAML_OK = """\
date: 2026-03-06
headline:
  title: 标题
  paragraphs:
    - 段落。
  links:
    - https://example.org/a
briefs:
  - title: 简讯一
    paragraphs: [一段。]
  - title: 简讯二
    paragraphs: [一段。]
  - title: 简讯三
    paragraphs: [一段。]
    links:
      - https://example.org/b
      - ftp://example.org/c
"""

X_FTP = (
    "briefs.2.links.1: is not an http(s) URL (it must start with http:// or https://): "
    "'ftp://example.org/c'"
)
STRUCTURED_BAD: list[tuple[str, str, str, int | None, str]] = [
    (
        "bad URL in YAML",
        ".yaml",
        YAML_OK,
        17,
        X_FTP,
    ),
    (
        "missing paragraphs in YAML",
        ".yaml",
        YAML_OK.replace("    paragraphs: [一段。]\n  - title: 简讯三", "  - title: 简讯三"),
        11,
        "briefs.1.paragraphs: required but missing; " + X_FTP,
    ),
    (
        "unknown field in YAML",
        ".yaml",
        YAML_OK.replace("  title: 标题\n", "  title: 标题\n  summary: 多余\n"),
        4,
        "headline.summary: unknown field (not part of the issue schema); " + X_FTP,
    ),
    (
        "two-line title in YAML",
        ".yaml",
        YAML_OK.replace("  title: 标题\n", '  title: "第一行\\n第二行"\n').replace(
            "ftp:", "https:"
        ),
        3,
        "headline.title: must be a single line (the text format is one line per paragraph)",
    ),
    (
        "YAML syntax error",
        ".yaml",
        YAML_OK.replace("  title: 标题\n", "  title: [标题\n"),
        4,
        "not valid YAML: expected ',' or ']', but got ':'",
    ),
    (
        "duplicate key in YAML",
        ".yaml",
        YAML_OK.replace("briefs:\n", "masthead: 甲\nmasthead: 乙\nbriefs:\n"),
        9,
        "duplicate key 'masthead' (first at line 8)",
    ),
    (
        "empty YAML",
        ".yaml",
        "# nothing\n",
        None,
        "expected a mapping of issue fields, found nothing (an empty document)",
    ),
    ("YAML list", ".yaml", "- a\n- b\n", 1, "expected a mapping of issue fields, found list"),
    (
        "JSON syntax error",
        ".json",
        '{\n  "date": "2026-03-06",\n  "masthead": "AI 技术日报",\n}\n',
        4,
        "not valid JSON: Expecting property name enclosed in double quotes (column 1)",
    ),
    (
        "duplicate key in JSON",
        ".json",
        '{"date": "2026-03-06", "date": "2026-03-07"}',
        None,
        "not valid JSON: duplicate key 'date'",
    ),
    (
        "bad date in JSON",
        ".json",
        '{"date": "2026-02-30", "headline": {"title": "t", "paragraphs": ["p"]}}',
        None,
        "date: Input should be a valid date or datetime, day value is outside expected range",
    ),
    (
        "no paragraphs in JSON",
        ".json",
        '{"date": "2026-03-06", "headline": {"title": "t", "paragraphs": []}}',
        None,
        "headline.paragraphs: Tuple should have at least 1 item after validation, not 0",
    ),
]


@pytest.mark.parametrize(
    ("case", "suffix", "data", "line", "detail"), STRUCTURED_BAD, ids=[b[0] for b in STRUCTURED_BAD]
)
def test_structured_errors_name_the_field_and_line(
    case: str, suffix: str, data: str, line: int | None, detail: str
) -> None:
    with pytest.raises(IssueFormatError) as exc:
        load_structured(data, path=f"x{suffix}", suffix=".yaml" if suffix == ".yaml" else ".json")
    # the first problem, then the others (each with its own line: IssueFormatError.lines)
    details = "; ".join([exc.value.detail, *(d for _, d in exc.value.more)])
    assert (exc.value.line, details) == (line, detail), case
    assert str(exc.value).startswith(f"x{suffix}:{line}: " if line else f"x{suffix}: ")


def test_the_valid_yaml_above_really_is_valid_once_the_link_is_fixed() -> None:
    issue = load_structured(YAML_OK.replace("ftp:", "https:"), suffix=".yaml")
    assert [b.title for b in issue.briefs] == ["简讯一", "简讯二", "简讯三"]


# --- dates and files -----------------------------------------------------------------------


def test_date_from_name() -> None:
    assert date_from_name("2026-10-27.txt") == dt.date(2026, 10, 27)
    assert date_from_name(Path("a/2026-10-27-fix.json")) == dt.date(2026, 10, 27)
    assert date_from_name("2026-10-270.txt") is None
    assert date_from_name("issue.txt") is None
    with pytest.raises(IssueFormatError) as exc:
        date_from_name("2026-02-30.txt")
    assert exc.value.detail == (
        "the file name's date 2026-02-30 is not a calendar day: day is out of range for month"
    )


def test_structured_date_comes_from_the_argument_when_the_data_has_none() -> None:
    data = json.loads(dump_json(load_issue(DATA / "2026-03-05.json")))
    del data["date"]
    issue = load_structured(json.dumps(data), suffix=".json", date=dt.date(2026, 3, 9))
    assert issue.date == dt.date(2026, 3, 9)
    with pytest.raises(IssueFormatError) as exc:
        load_structured(json.dumps(data), path="d.json", suffix=".json")
    assert str(exc.value) == "d.json: date: required but missing"


def test_structured_date_that_contradicts_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-07.yaml"
    path.write_text((DATA / "2026-03-06.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    assert exc.value.line == 2
    assert exc.value.detail == (
        "date: the data says 2026-03-06 but the file name or caller says 2026-03-07"
    )


def test_text_file_date_from_name_argument_or_neither(tmp_path: Path) -> None:
    text = (DATA / "2026-03-02.txt").read_text(encoding="utf-8")
    named = tmp_path / "2026-03-02-fix.txt"
    unnamed = tmp_path / "draft.txt"
    named.write_text(text, encoding="utf-8")
    unnamed.write_text(text, encoding="utf-8")
    assert load_issue(named).date == dt.date(2026, 3, 2)
    assert load_issue(named, date=dt.date(2026, 3, 2)).date == dt.date(2026, 3, 2)
    assert load_issue(unnamed, date=dt.date(2026, 3, 8)).date == dt.date(2026, 3, 8)
    with pytest.raises(IssueFormatError) as exc:
        load_issue(unnamed)
    assert exc.value.detail.startswith("the issue's date is unknown: name the file YYYY-MM-DD.txt")
    with pytest.raises(IssueFormatError) as exc:
        load_issue(named, date=dt.date(2026, 3, 3))
    assert (
        exc.value.detail
        == "the file name says 2026-03-02 but the issue was given the date 2026-03-03"
    )


def test_unknown_suffix_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(IssueFormatError) as exc:
        load_issue(tmp_path / "2026-03-02.md")
    assert exc.value.detail == "unknown issue file type '.md'; expected .txt, .json, .yaml, .yml"
    folder = tmp_path / "2026-03-02.txt"
    folder.mkdir()
    with pytest.raises(IssueFormatError) as exc:
        load_issue(folder)
    assert exc.value.line is None
    assert exc.value.detail == "cannot read the file: Is a directory"


def test_non_utf8_json_reports_the_line(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-05.json"
    raw = (DATA / "2026-03-05.json").read_bytes()
    path.write_bytes(raw.replace("过滤".encode(), "过滤".encode("gbk")))
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    assert exc.value.line == 16
    assert exc.value.detail.startswith("not valid UTF-8 (byte 0xb9 at column")


def test_uppercase_suffix_and_bom_in_json(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-05.JSON"
    path.write_bytes(b"\xef\xbb\xbf" + (DATA / "2026-03-05.json").read_bytes())
    assert load_issue(path) == load_issue(DATA / "2026-03-05.json")


def load_error(text: str, suffix: StructuredSuffix) -> IssueFormatError:
    with pytest.raises(IssueFormatError) as exc:
        load_structured(text, path="f", date=DAY, suffix=suffix)
    return exc.value


TOO_DEEP = f"nested too deeply: lists and mappings may nest at most {MAX_NESTING} levels"


@pytest.mark.parametrize(
    ("text", "suffix", "line"),
    [
        ("[" * 100_000, ".json", 1),
        ('{"a":' * 100_000, ".json", 1),
        ('{\n"headline":\n' + "[" * 40, ".json", 3),
        ("[" * 100_000, ".yaml", 1),
        (
            "date: 2026-03-06\nheadline:\n" + "".join(f"{'  ' * n}- \n" for n in range(40)),
            ".yaml",
            34,  # the mapping is level 1, line 3 level 2, line 34 level 33
        ),
    ],
)
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_deep_nesting_is_a_format_error_at_its_line(
    text: str, suffix: StructuredSuffix, line: int
) -> None:
    err = load_error(text, suffix)
    assert (err.line, err.detail) == (line, f"{TOO_DEEP} (an issue needs 4)")


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_nesting_up_to_the_cap_reaches_the_schema_check(suffix: StructuredSuffix) -> None:
    inner = "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)
    fits = load_error(f'{{"headline": {inner}}}', suffix)
    assert fits.detail == "headline: Input should be a valid dictionary or instance of Item"
    deeper = load_error(f'{{"headline": [{inner}]}}', suffix)
    assert deeper.detail.startswith(TOO_DEEP)
    quoted = load_error(f'{{"headline": "{"[" * 100}"}}', suffix)  # brackets in a string
    assert quoted.detail == "headline: Input should be a valid dictionary or instance of Item"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_recursion_error_from_the_parser_is_a_format_error(
    suffix: StructuredSuffix, monkeypatch: pytest.MonkeyPatch
) -> None:
    # let the parser itself overflow (the JSON reader's cap, and the YAML reader's)
    monkeypatch.setattr(structured, "MAX_NESTING", 10**9)
    monkeypatch.setattr(shape, "MAX_NESTING", 10**9)
    err = load_error("[" * 100_000, suffix)
    assert err.detail.startswith("nested too deeply")
    assert isinstance(err.__cause__, RecursionError)


@pytest.mark.parametrize(
    ("text", "line", "found"),
    [
        ("a: &a [*a]\n", 1, "the anchor &a"),
        ("date: 2026-03-06\nheadline: *h\n", 2, "the alias *h"),
        ("date: 2026-03-06\nx:\n  - 1\n  - &n 2\n", 4, "the anchor &n"),
        ("base: {title: t}\nheadline:\n  <<: *base\n", 3, "the alias *base"),
    ],
)
def test_yaml_anchors_and_aliases_are_refused_at_their_line(
    text: str, line: int, found: str
) -> None:
    err = load_error(text, ".yaml")
    assert (err.line, err.detail) == (
        line,
        f"YAML anchors and aliases are not allowed in an issue file (found {found}); "
        "write the value out in full",
    )


def test_billion_laughs_yaml_is_refused_without_expanding_it(tmp_path: Path) -> None:
    lines = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]" for n in range(1, 9)]
    path = tmp_path / "2026-03-06.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    assert time.perf_counter() - started < 1  # expanding it would take minutes
    assert exc.value.line == 1 and "found the anchor &x0" in exc.value.detail


@pytest.mark.parametrize(
    ("text", "line", "detail"),
    [
        (
            "headline: {title: t, paragraphs: [p]}\ndate: 2026-02-30\n",
            2,
            "not valid YAML: cannot read the value '2026-02-30': day is out of range for month",
        ),
        (
            "date: 2026-03-06\nx: !!float nope\n",
            2,
            "not valid YAML: cannot read the value 'nope': ",
        ),
        (
            "date: 2026-03-06\n\nx: " + "9" * 5000 + "\n",
            3,
            "not valid YAML: cannot read the value '999",
        ),
    ],
)
def test_yaml_values_the_constructor_cannot_build_are_format_errors(
    text: str, line: int, detail: str
) -> None:
    err = load_error(text, ".yaml")
    assert err.line == line
    assert err.detail.startswith(detail)


def test_issue_files_are_at_most_1_mib(tmp_path: Path) -> None:
    text = dump_json(load_issue(DATA / "2026-03-05.json")).encode()
    path = tmp_path / "2026-03-05.json"
    path.write_bytes(text + b" " * (MAX_ISSUE_BYTES - len(text)))  # exactly the cap: fine
    assert load_issue(path).date == dt.date(2026, 3, 5)
    path.write_bytes(text + b" " * (MAX_ISSUE_BYTES - len(text) + 1))
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    assert str(exc.value) == f"{path}: the file is 1048577 bytes; an issue file is at most 1 MiB"
    big = tmp_path / "2026-03-06.txt"
    big.write_bytes(b"AI\n" * (3 * MAX_ISSUE_BYTES))
    with pytest.raises(IssueFormatError) as exc:
        load_issue(big)
    assert exc.value.detail == "the file is 9437184 bytes; an issue file is at most 1 MiB"


# --- issue #8: caps, characters and links in the structured forms --------------------------


def _issue_data(briefs: int) -> dict[str, object]:
    brief = {"title": "同一个标题", "paragraphs": ["一段。"], "links": ["https://example.org/b"]}
    return {
        "date": "2026-03-06",
        "headline": {"title": "标题", "paragraphs": ["段落。"]},
        "briefs": [brief] * briefs,
    }


def test_201_briefs_in_yaml_are_refused_at_the_201st() -> None:
    text = dump_yaml(load_structured(json.dumps(_issue_data(MAX_BRIEFS)), suffix=".json"))
    text += "- title: 多一条\n  paragraphs:\n  - 一段。\n"
    first_extra = text.count("\n", 0, text.index("- title: 多一条")) + 1
    with pytest.raises(IssueFormatError) as exc:
        load_structured(text, path="x.yaml", suffix=".yaml")
    assert exc.value.line == first_extra
    assert exc.value.detail == (
        "briefs: more than 200 entries; at most 200 are allowed "
        "(the first one too many is briefs.200)"
    )


def test_a_huge_yaml_list_is_refused_while_it_is_read() -> None:
    # 20,000 briefs: refused at the 201st entry instead of composing the whole file first
    head = "date: 2026-03-06\nheadline:\n  title: t\n  paragraphs: [p]\nbriefs:\n"
    text = head + "- {title: t, paragraphs: [p]}\n" * 20_000
    with pytest.raises(IssueFormatError) as exc:
        load_structured(text, path="x.yaml", suffix=".yaml")
    assert exc.value.line == 5 + 201
    assert exc.value.detail.startswith("briefs: more than 200 entries")


def test_201_briefs_in_json_name_the_json_location() -> None:
    with pytest.raises(IssueFormatError) as exc:
        load_structured(json.dumps(_issue_data(MAX_BRIEFS + 1)), path="x.json", suffix=".json")
    assert str(exc.value) == (
        "x.json: briefs: 201 entries; at most 200 are allowed (the first one too many is "
        "briefs.200)"
    )


def test_200_identical_briefs_load_from_json_and_yaml() -> None:
    issue = load_structured(json.dumps(_issue_data(MAX_BRIEFS)), suffix=".json")
    assert len(issue.briefs) == MAX_BRIEFS
    assert load_structured(dump_yaml(issue), suffix=".yaml") == issue
    assert parse_text(dump_text(issue), date=issue.date) == issue


YAML_CAPS = [
    (
        "paragraphs",
        "headline:\n  title: t\n  paragraphs:\n" + "  - p\n" * (MAX_PARAGRAPHS + 1),
        4 + MAX_PARAGRAPHS,
        "headline.paragraphs: more than 200 entries; at most 200 are allowed "
        "(the first one too many is headline.paragraphs.200)",
    ),
    (
        "links",
        "headline:\n  title: t\n  paragraphs: [p]\n  links:\n"
        + "  - https://example.org/\n" * (MAX_LINKS + 1),
        5 + MAX_LINKS,
        "headline.links: more than 20 entries; at most 20 are allowed "
        "(the first one too many is headline.links.20)",
    ),
    (
        "title length",
        f"headline:\n  title: {'t' * (MAX_TITLE_CHARS + 1)}\n  paragraphs: [p]\n",
        2,
        f"headline.title: is {MAX_TITLE_CHARS + 1} characters long; at most {MAX_TITLE_CHARS} "
        f"are allowed (starts '{'t' * 39}…')",
    ),
]


@pytest.mark.parametrize(("case", "text", "line", "detail"), YAML_CAPS, ids=lambda c: c)
def test_yaml_caps_name_the_field_and_line(case: str, text: str, line: int, detail: str) -> None:
    with pytest.raises(IssueFormatError) as exc:
        load_structured("date: 2026-03-06\n" + text, path="x.yaml", suffix=".yaml")
    assert (exc.value.line, exc.value.detail) == (line + 1, detail), case


STRUCTURED_CHARS = [
    (
        "ESC in a YAML title",
        ".yaml",
        'date: 2026-03-06\nheadline:\n  title: "a\\e[31mred"\n  paragraphs: [p]\n',
        3,
        "headline.title: holds the control character U+001B (ESC, which starts terminal escape "
        "sequences) at column 2; remove it",
    ),
    (
        "RLO in a JSON paragraph",
        ".json",
        '{"date": "2026-03-06", "headline": {"title": "t", "paragraphs": ["a\\u202eb"]}}',
        None,
        "headline.paragraphs.0: holds the bidi control U+202E (RIGHT-TO-LEFT OVERRIDE) at "
        "column 2; remove it",
    ),
    (
        "NUL in a JSON lede",
        ".json",
        '{"date": "2026-03-06", "lede": "x\\u0000", '
        '"headline": {"title": "t", "paragraphs": ["p"]}}',
        None,
        "lede: holds the control character U+0000 (NUL) at column 2; remove it",
    ),
    (
        "lone surrogate in a JSON title (no platform can encode it)",
        ".json",
        '{"date": "2026-03-06", "headline": {"title": "x\\ud800", "paragraphs": ["p"]}}',
        None,
        "headline.title: holds the lone surrogate U+D800 at column 2; remove it",
    ),
    (
        "C1 NEL in YAML",
        ".yaml",
        'date: 2026-03-06\nheadline:\n  title: t\n  paragraphs: ["a\\Nb"]\n',
        4,
        "headline.paragraphs.0: holds the control character U+0085 at column 2; remove it",
    ),
    (
        "user info in a JSON link",
        ".json",
        '{"date": "2026-03-06", "headline": {"title": "t", "paragraphs": ["p"], '
        '"links": ["https://user@evil.example/"]}}',
        None,
        "headline.links.0: is not an http(s) URL: it has user info before an @ in the host "
        "part, which disguises where the link goes: 'https://user@evil.example/'",
    ),
    (
        "markup in a YAML link",
        ".yaml",
        "date: 2026-03-06\nheadline:\n  title: t\n  paragraphs: [p]\n  links:\n"
        "  - 'https://x.org/\"><script>'\n",
        6,
        """headline.links.0: is not an http(s) URL: it holds the character '"': """
        """'https://x.org/"><script>'""",
    ),
    (
        "ANSI escape in a YAML link",
        ".yaml",
        'date: 2026-03-06\nheadline:\n  title: t\n  paragraphs: [p]\n  links: ["https://x.org/\\e[2J"]\n',
        5,
        "headline.links.0: is not an http(s) URL: it holds the character '\\\\x1b': "
        "'https://x.org/\\\\x1b[2J'",
    ),
]


@pytest.mark.parametrize(
    ("case", "suffix", "data", "line", "detail"),
    STRUCTURED_CHARS,
    ids=[c[0] for c in STRUCTURED_CHARS],
)
def test_structured_characters_and_links_name_the_field(
    case: str, suffix: str, data: str, line: int | None, detail: str
) -> None:
    with pytest.raises(IssueFormatError) as exc:
        load_structured(data, path=f"x{suffix}", suffix=".yaml" if suffix == ".yaml" else ".json")
    assert (exc.value.line, exc.value.detail) == (line, detail), case
    assert str(exc.value).isprintable()


def test_a_raw_control_character_in_yaml_is_refused_at_its_line() -> None:
    with pytest.raises(IssueFormatError) as exc:
        load_structured(
            "date: 2026-03-06\nheadline:\n  title: a\x1b[2Jb\n", path="x.yaml", suffix=".yaml"
        )
    assert (
        str(exc.value) == "x.yaml:3: not valid YAML: the character U+001B is not allowed; remove it"
    )


def test_an_unknown_key_with_control_characters_is_quoted_escaped() -> None:
    data = (
        '{"date": "2026-03-06", "headline": {"title": "t", "paragraphs": ["p"], "x\\u001b[2J": 1}}'
    )
    with pytest.raises(IssueFormatError) as exc:
        load_structured(data, path="x.json", suffix=".json")
    assert str(exc.value) == (
        "x.json: headline.x\\x1b[2J: unknown field (not part of the issue schema)"
    )


def test_a_tab_in_structured_text_becomes_a_space() -> None:
    data = '{"date": "2026-03-06", "headline": {"title": "a\\tb", "paragraphs": ["p\\t"]}}'
    issue = load_structured(data, suffix=".json")
    assert (issue.headline.title, issue.headline.paragraphs) == ("a b", ("p",))


def test_a_file_with_many_problems_lists_each_on_its_own_line() -> None:
    """Issue 20, item 6: every problem is kept (``lines()``: one each); ``str()`` stays one
    line, the first and how many more."""
    data = _issue_data(40)
    data["briefs"] = [{"title": "t", "paragraphs": ["p"], "links": ["ftp://x"]}] * 40
    with pytest.raises(IssueFormatError) as exc:
        load_structured(json.dumps(data), suffix=".json")
    lines = exc.value.lines()
    assert len(lines) == 40 and all("is not an http(s) URL" in line for line in lines)
    assert exc.value.detail.count("is not an http(s) URL") == 1
    assert str(exc.value).endswith("; and 39 more problems")


def test_the_schema_carries_the_caps() -> None:
    schema = issue_json_schema()
    item = schema["$defs"]["Item"]["properties"]
    assert schema["properties"]["briefs"]["maxItems"] == MAX_BRIEFS
    assert item["paragraphs"]["maxItems"] == MAX_PARAGRAPHS
    assert item["links"]["maxItems"] == MAX_LINKS
    assert item["title"]["maxLength"] == MAX_TITLE_CHARS
    assert item["paragraphs"]["items"]["maxLength"] == MAX_PARAGRAPH_CHARS
