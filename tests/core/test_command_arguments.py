"""A command's arguments are read once, from its declaration: words or typed option values."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from digest_core.commands.catalogue import BY_NAME
from digest_core.commands.requests import Request
from digest_core.errors import BadArgument

DAY = dt.date(2026, 11, 27)
GIVE_A_NUMBER = "请给出简讯编号，例如 /brief 2 / give a brief number"


def read(command: str, *words: str, values: Mapping[str, object] | None = None) -> Any:
    """The handler's values of ``/command words`` (or of typed ``values``), or the problem."""
    try:
        return BY_NAME[command].arguments(Request(command, words, values=values))
    except BadArgument as exc:
        return exc.problem


@pytest.mark.parametrize(
    ("command", "words", "expected"),
    [
        # a date
        ("issue", ("2026-11-27",), {"date": DAY}),
        ("issue", ("yesterday",), "“yesterday” 不是日期 / is not a date"),
        ("issue", ("x" * 50,), f"“{'x' * 39}…” 不是日期 / is not a date"),
        ("issue", (), "请给出日期 / give a date"),
        ("issue", ("2026-11-27", "x"), "请给出日期 / give a date"),  # the command's own text
        ("headline", (), {"date": None}),
        ("headline", ("2026-11-27", "x"), "参数太多 / too many arguments"),
        # a number that passes a word that is not one on to the date
        ("briefs", (), {"n": None, "date": None}),
        ("briefs", ("3",), {"n": 3, "date": None}),
        ("briefs", ("3", "2026-11-27"), {"n": 3, "date": DAY}),
        ("briefs", ("2026-11-27",), {"n": None, "date": DAY}),
        ("briefs", ("0",), {"n": 0, "date": None}),  # out of range: the handler says so
        ("briefs", ("12345",), "“12345” 不是日期 / is not a date"),
        ("briefs", ("²",), "“²” 不是日期 / is not a date"),
        ("briefs", ("x", "y"), GIVE_A_NUMBER),
        # a required number
        ("brief", ("2",), {"n": 2, "date": None}),
        ("brief", ("two",), GIVE_A_NUMBER),
        ("brief", ("-1",), GIVE_A_NUMBER),
        ("brief", (), GIVE_A_NUMBER),
        ("brief", ("2", "someday"), "“someday” 不是日期 / is not a date"),
        # a flag, anywhere and in any case
        ("repost", (), {"date": None, "force": False, "target": None}),
        ("repost", ("force", "2026-11-27"), {"date": DAY, "force": True, "target": None}),
        ("repost", ("2026-11-27", "FORCE"), {"date": DAY, "force": True, "target": None}),
        # one target (the dashboard's per-target button): words only, after the date
        (
            "repost",
            ("2026-11-27", "telegram:-100"),
            {"date": DAY, "force": False, "target": ("telegram", "-100")},
        ),
        ("repost", ("force", "2026-11-27", "a", "b"), "参数太多 / too many arguments"),
        # the rest of the line
        ("search", ("KV", "缓存"), {"keyword": "KV 缓存"}),
        ("search", (), "请给出关键词 / give a keyword"),
        ("search", ("y" * 65,), "关键词太长（最多 64 个字符）/ keyword too long (64 max)"),
        ("follow", ("Two", "Words"), {"word": "two words"}),
        ("follow", ("w" * 65,), "关键词太长（最多 64 个字符）/ keyword too long"),
        ("follow", ("a\u200bb",), "“a\\u200bb” 含有不可见字符 / holds an invisible character"),
        # any order
        ("subscribe", (), {"time": None, "format": None}),
        ("subscribe", ("FULL", "7:05"), {"time": dt.time(7, 5), "format": "full"}),
        ("subscribe", ("07:00", "compact"), {"time": dt.time(7), "format": "compact"}),
        ("subscribe", ("25:00",), "“25:00” 不是时间或格式 / is not a time or format"),
        (
            "subscribe",
            ("07:00", "full", "08:00"),
            "“08:00” 不是时间或格式 / is not a time or format",
        ),
        # a checked text, required as an option only
        ("zone", (), {"name": None}),
        ("zone", ("Europe/Berlin",), {"name": "Europe/Berlin"}),
        (
            "zone",
            ("Mars/Olympus",),
            "“Mars/Olympus” 不是时区，例如 Europe/Berlin / is not a zone name",
        ),
        ("zone", ("a", "b"), "参数太多 / too many arguments"),
        # a target, and a hidden argument (no typed option)
        ("reactivate", ("telegram:42",), {"target": ("telegram", "42")}),
        ("reactivate", ("42",), {"target": ("", "42")}),
        # a forum topic's target holds a ':' of its own
        ("reactivate", ("-1001234:42",), {"target": ("", "-1001234:42")}),
        ("reactivate", ("telegram:-1001234:42",), {"target": ("telegram", "-1001234:42")}),
        ("reactivate", ("@forum:7",), {"target": ("", "@forum:7")}),
        ("reactivate", (), "请给出目标 ID / give the target id"),
        ("approve", ("2026-11-27", "r1"), {"date": DAY, "revision": "r1"}),
        ("approve", ("r1",), "“r1” 不是日期 / is not a date"),
        ("approve", ("a", "b", "c"), "参数太多 / too many arguments"),
        # no arguments: refused, or ignored where the command is lenient
        ("today", ("x",), "/today 不需要参数 / takes no argument"),
        ("settings", ("x",), "/settings 不需要参数 / takes no argument"),
        ("help", ("x", "y"), {}),
        ("status", ("x",), {}),
    ],
)
def test_words_are_read_by_the_declared_kinds(
    command: str, words: tuple[str, ...], expected: object
) -> None:
    assert read(command, *words) == expected


@pytest.mark.parametrize(
    ("command", "values", "expected"),
    [
        ("briefs", {"n": 3, "date": None}, {"n": 3, "date": None}),
        ("briefs", {"n": None, "date": " 2026-11-27 "}, {"n": None, "date": DAY}),
        ("briefs", {"n": 3, "date": "soon"}, "“soon” 不是日期 / is not a date"),
        ("issue", {"date": None}, "请给出日期 / give a date"),
        ("repost", {"date": None, "force": True}, {"date": None, "force": True, "target": None}),
        ("reactivate", {"target": "discord:42"}, {"target": ("discord", "42")}),
        ("search", {"keyword": "KV  缓存"}, {"keyword": "KV  缓存"}),  # one value, as typed
        ("subscribe", {"time": "25:00"}, "“25:00” 不是时间或格式 / is not a time or format"),
        ("subscribe", {"time": "07:00", "format": "full"}, {"time": dt.time(7), "format": "full"}),
        ("approve", {"date": "2026-11-27"}, {"date": DAY, "revision": None}),
    ],
)
def test_typed_values_are_taken_as_given(
    command: str, values: dict[str, object], expected: object
) -> None:
    assert read(command, values=values) == expected


def test_a_typed_value_for_no_option_is_a_bug() -> None:
    with pytest.raises(TypeError, match="revision"):
        read("approve", values={"revision": "r1"})  # hidden: words only


@given(
    day=st.dates(dt.date(2000, 1, 1), dt.date(2099, 12, 31)),
    n=st.integers(1, 99),
    force=st.booleans(),
)
def test_words_and_typed_values_give_the_same_values(day: dt.date, n: int, force: bool) -> None:
    iso = day.isoformat()
    assert read("briefs", str(n), iso) == read("briefs", values={"n": n, "date": iso})
    assert read("briefs", iso) == read("briefs", values={"date": iso}) == {"n": None, "date": day}
    words = [iso, *(["force"] if force else [])]
    typed = read("repost", values={"date": iso, "force": force})
    assert typed == {"date": day, "force": force, "target": None}
    for order in itertools.permutations(words):
        assert read("repost", *order) == typed


@given(
    at=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
    fmt=st.sampled_from(["full", "compact", "headline"]),
)
def test_any_order_is_any_order(at: dt.time, fmt: str) -> None:
    hhmm = f"{at:%H:%M}"
    assert read("subscribe", hhmm, fmt) == read("subscribe", fmt.upper(), hhmm)
    assert read("subscribe", hhmm, fmt) == {"time": at, "format": fmt}


def _is_date(word: str) -> bool:
    try:
        dt.date.fromisoformat(word)
    except ValueError:
        return False
    return True


@given(st.text(st.characters(blacklist_categories=["Zs", "Cc"]), min_size=1, max_size=80))
def test_a_word_that_is_no_date_is_told_quoted_and_short(word: str) -> None:
    assume(not _is_date(word.strip()))
    problem = read("issue", word)
    assert isinstance(problem, str) and problem.endswith("” 不是日期 / is not a date")
    assert len(problem) <= len("“” 不是日期 / is not a date") + 40 * 6  # escapes count
