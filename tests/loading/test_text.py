"""The published text format: every FORMAT.md rule, exact errors, canonical round trips."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from digest_core.errors import IssueFormatError
from digest_core.loading import dump_text, load_issue, parse_text, question_marker
from digest_core.models import (
    MAX_BRIEFS,
    MAX_LINKS,
    MAX_PARAGRAPH_CHARS,
    MAX_PARAGRAPHS,
    MAX_TITLE_CHARS,
    QUESTION_MARKER,
    Issue,
    Item,
    url_problem,
)
from tests.quick import examples

DATA = Path(__file__).parent / "data"
SEED = Path(__file__).resolve().parents[2] / ".." / "shared" / "seeds" / "000_2e92f0f1f4d646fc.txt"
DAY = dt.date(2026, 3, 2)


def text_of(*lines: str) -> str:
    return "\n".join(lines) + "\n"


# A small valid issue whose lines the error table below varies.
GOOD = (
    "AI 技术日报",  # 1
    "本期重点：一句话。",  # 2
    "重点",  # 3
    "标题甲",  # 4
    "段落甲。",  # 5
    "https://example.org/a",  # 6
    "简讯",  # 7
    "标题乙",  # 8
    "段落乙。",  # 9
    "https://example.org/b",  # 10
    "经典回顾",  # 11
    "标题丙",  # 12
    "段落丙。",  # 13
)


def good_with(changes: dict[int, str | None]) -> str:
    """GOOD with line n replaced (a str, which may hold several lines) or removed (None)."""
    lines = [changes.get(n, line) for n, line in enumerate(GOOD, start=1)]
    return text_of(*(line for line in lines if line is not None))


# --- the fixtures ---------------------------------------------------------------------------


def test_chinese_fixture_is_read_as_written() -> None:
    issue = load_issue(DATA / "2026-03-02.txt")
    assert issue.date == DAY
    assert issue.masthead == "AI 技术日报"
    assert issue.lede is not None and issue.lede.startswith("稀疏注意力")
    assert issue.headline.title.startswith("块稀疏注意力")
    assert len(issue.headline.paragraphs) == 3
    assert issue.headline.links == (
        "https://example.org/papers/block-sparse-attention",
        "https://example.org/code/block-sparse-attention",
    )
    assert [len(b.links) for b in issue.briefs] == [1, 1, 0, 2]
    assert "<cost> & <memory>" in issue.briefs[1].title
    assert "*cost_mem*" in issue.briefs[1].paragraphs[0]
    assert "@everyone" in issue.briefs[2].title
    assert issue.briefs[3].title.startswith("数据管线：用 ~|~")
    assert issue.classic is not None
    assert issue.classic.question == "如果梯度本身不会下溢，损失缩放还有必要吗？"
    assert not any(p.startswith(QUESTION_MARKER) for p in issue.classic.paragraphs)


def test_canonical_fixture_round_trips_byte_for_byte() -> None:
    text = (DATA / "2026-03-02.txt").read_text(encoding="utf-8")
    assert dump_text(parse_text(text, date=DAY)) == text


def test_english_fixture_reads_english_labels_half_width_lede_and_question() -> None:
    issue = load_issue(DATA / "2026-03-03.txt")
    assert issue.masthead == "AI Tech Daily"
    assert issue.lede is not None and issue.lede.startswith("Smaller draft models")
    assert len(issue.headline.paragraphs) == 2
    assert len(issue.briefs) == 2
    assert "<unk> & control" in issue.briefs[0].title
    assert issue.classic is not None and issue.classic.question is not None
    assert issue.classic.question.startswith("which parts")
    # written back canonically: Chinese labels, English marker for the English item
    text = dump_text(issue)
    assert "\n简讯\n" in text and "\nBriefs\n" not in text
    assert "\nA question to read with: which parts" in text


def test_loose_fixture_whitespace_blank_lines_half_width_marker_and_mid_line_question() -> None:
    issue = load_issue(DATA / "2026-03-04.txt")
    assert issue.lede == "本期关注推理服务的排队问题。"
    assert len(issue.headline.paragraphs) == 2
    first, second = issue.briefs
    assert first.question == "按通道缩放会增加多少推理开销？"
    assert first.links == ("https://example.org/quant/per-channel",)
    # a new item starts at the first non-link line after links, and a linkless item is allowed
    # when a blank line follows it
    assert second.title == "数据标注平台开放审校记录"
    assert second.links == ()
    assert issue.classic is not None
    assert issue.classic.paragraphs[-1].endswith("推理时使用完整网络并按比例缩放。")
    assert issue.classic.question == "为什么现在的大模型预训练常常把 dropout 关掉？"


@pytest.mark.parametrize("name", ["2026-03-02.txt", "2026-03-03.txt", "2026-03-04.txt"])
def test_dump_of_any_fixture_is_canonical(name: str) -> None:
    issue = load_issue(DATA / name)
    text = dump_text(issue)
    assert parse_text(text, date=issue.date) == issue
    assert dump_text(parse_text(text, date=issue.date)) == text
    assert text.endswith("\n") and "\r" not in text


# --- the rules one by one ------------------------------------------------------------------


def test_bom_crlf_and_lone_cr_are_tolerated() -> None:
    text = (DATA / "2026-03-02.txt").read_text(encoding="utf-8")
    expected = parse_text(text, date=DAY)
    assert parse_text("\ufeff" + text.replace("\n", "\r\n"), date=DAY) == expected
    assert parse_text(text.replace("\n", "\r"), date=DAY) == expected


def test_bom_crlf_file_from_disk(tmp_path: Path) -> None:
    text = (DATA / "2026-03-02.txt").read_text(encoding="utf-8")
    path = tmp_path / "2026-03-02.txt"
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    assert load_issue(path) == parse_text(text, date=DAY)


def test_section_labels_in_english_and_with_surrounding_whitespace() -> None:
    text = text_of(
        "Digest", "  Headline ", "H", "p", "\tBriefs", "B", "p", "Classic\u3000", "C", "p"
    )
    issue = parse_text(text, date=DAY)
    assert issue.headline.title == "H"
    assert [b.title for b in issue.briefs] == ["B"]
    assert issue.classic is not None and issue.classic.title == "C"


def test_labels_are_case_sensitive_so_a_lowercase_word_is_text() -> None:
    issue = parse_text(text_of("D", "重点", "headline", "briefs"), date=DAY)
    assert issue.headline.title == "headline"
    assert issue.headline.paragraphs == ("briefs",)


def test_lede_is_optional_and_takes_either_colon() -> None:
    without = parse_text(good_with({2: None}), date=DAY)
    half = parse_text(good_with({2: "本期重点:  一句话。 "}), date=DAY)
    assert without.lede is None
    assert half.lede == "一句话。"
    assert half == parse_text(good_with({}), date=DAY)


def test_lede_prefix_inside_a_section_is_ordinary_text() -> None:
    issue = parse_text(good_with({4: "本期重点：也可以是标题"}), date=DAY)
    assert issue.headline.title == "本期重点：也可以是标题"


def test_item_body_lines_are_paragraphs_and_link_lines_are_links() -> None:
    text = good_with({5: "第一段。\n第二段 https://example.org/inline 不是链接行。"})
    issue = parse_text(text, date=DAY)
    assert issue.headline.paragraphs == (
        "第一段。",
        "第二段 https://example.org/inline 不是链接行。",
    )
    assert issue.headline.links == ("https://example.org/a",)


def test_new_brief_starts_at_first_non_link_line_after_links() -> None:
    text = good_with({10: "https://example.org/b\nhttp://example.org/b2\n标题丁\n段落丁。"})
    issue = parse_text(text, date=DAY)
    assert [(b.title, b.links) for b in issue.briefs] == [
        ("标题乙", ("https://example.org/b", "http://example.org/b2")),
        ("标题丁", ()),
    ]


def test_linkless_brief_ends_only_at_a_blank_line_or_label() -> None:
    separated = parse_text(good_with({10: "\n标题丁\n段落丁。"}), date=DAY)
    run_on = parse_text(good_with({10: "标题丁\n段落丁。"}), date=DAY)
    assert [b.title for b in separated.briefs] == ["标题乙", "标题丁"]
    # without the blank line the next "title" cannot be told from a paragraph: it is one
    assert [b.paragraphs for b in run_on.briefs] == [("段落乙。", "标题丁", "段落丁。")]


def test_briefs_and_classic_are_optional_but_headline_is_required() -> None:
    issue = parse_text(text_of("D", "重点", "H", "p"), date=DAY)
    assert issue.briefs == () and issue.classic is None


# The line where the 重点 section was expected (it had none before issue #8).
NO_HEADLINE = [
    (
        text_of("D", "简讯", "B", "p"),
        2,
        "no headline: the issue needs a 重点 section; "
        "expected it before the 简讯 section, which opens here",
    ),
    (
        text_of("D", "本期重点：一句话。", "", "经典回顾", "C", "p", "简讯", "B", "p"),
        4,
        "no headline: the issue needs a 重点 section; "
        "expected it before the 经典回顾 section, which opens here",
    ),
    (
        text_of("D", "本期重点：一句话。"),
        3,
        "no headline: the issue needs a 重点 section; "
        "expected it after the masthead and lede, but the file ends here",
    ),
    (
        "D\r\n\r\n",
        3,
        "no headline: the issue needs a 重点 section; "
        "expected it after the masthead and lede, but the file ends here",
    ),
]


@pytest.mark.parametrize(("text", "line", "detail"), NO_HEADLINE)
def test_a_missing_headline_names_the_line_where_it_was_expected(
    text: str, line: int, detail: str
) -> None:
    with pytest.raises(IssueFormatError) as exc:
        parse_text(text, path="2026-03-02.txt", date=DAY)
    assert (exc.value.line, exc.value.detail) == (line, detail)
    assert str(exc.value) == f"2026-03-02.txt:{line}: {detail}"


def test_question_line_becomes_the_question_in_every_marker_form() -> None:
    for marker in ("带着一个问题读：", "带着一个问题读:", "A question to read with:"):
        issue = parse_text(good_with({13: f"段落丙。\n{marker}  为什么？ "}), date=DAY)
        assert issue.classic is not None
        assert issue.classic.paragraphs == ("段落丙。",)
        assert issue.classic.question == "为什么？"


def test_marker_inside_the_last_paragraph_splits_off_the_question() -> None:
    issue = parse_text(good_with({13: "前一段。\n段落丙。带着一个问题读：为什么？"}), date=DAY)
    assert issue.classic is not None
    assert issue.classic.paragraphs == ("前一段。", "段落丙。")
    assert issue.classic.question == "为什么？"


def test_marker_inside_an_earlier_paragraph_is_left_alone() -> None:
    text = good_with({13: "引用“带着一个问题读：”这个栏目。\n最后一段。"})
    issue = parse_text(text, date=DAY)
    assert issue.classic is not None
    assert issue.classic.paragraphs == ("引用“带着一个问题读：”这个栏目。", "最后一段。")
    assert issue.classic.question is None


def test_special_characters_are_kept_verbatim() -> None:
    title = "<b>粗体</b> & *_~| @everyone"
    issue = parse_text(good_with({8: title, 9: "a<b && c*_~|d @here @everyone"}), date=DAY)
    assert issue.briefs[0].title == title
    assert issue.briefs[0].paragraphs == ("a<b && c*_~|d @here @everyone",)


# --- errors: exact line and message --------------------------------------------------------

BAD: list[tuple[str, str, int | None, str]] = [
    ("empty file", "", 1, "the file is empty; expected the masthead (e.g. AI 技术日报)"),
    (
        "only a BOM and blanks",
        "\ufeff\n \n",
        1,
        "the file is empty; expected the masthead (e.g. AI 技术日报)",
    ),
    (
        "no masthead",
        text_of(*GOOD[2:]),
        1,
        'line 1 must be the masthead (e.g. AI 技术日报) but it is the section label "重点"',
    ),
    (
        "blank first line",
        "\n" + good_with({}),
        1,
        "line 1 must be the masthead (e.g. AI 技术日报) but it is a blank line",
    ),
    (
        "text before any section, no lede yet",
        good_with({2: "今天的新闻"}),
        2,
        "expected the lede (本期重点：…) or a section label (重点, 简讯 or 经典回顾) "
        'but found "今天的新闻"',
    ),
    (
        "text before any section after the lede",
        good_with({2: "本期重点：一句话。\n\n多出来的一行"}),
        4,
        'expected a section label (重点, 简讯 or 经典回顾) but found "多出来的一行"',
    ),
    (
        "second lede",
        good_with({2: "本期重点：一句话。\n本期重点：又一句。"}),
        3,
        "a second lede line; the first is on line 2",
    ),
    ("empty lede", good_with({2: "本期重点： "}), 2, "the lede line has no text after 本期重点："),
    (
        "brief title then a link",
        good_with({9: None}),
        8,
        'brief "标题乙" has a title but no body',
    ),
    (
        "brief title then a blank line",
        good_with({8: "标题乙\n"}),
        8,
        'brief "标题乙" has a title but no body',
    ),
    (
        "classic title at the end of the file",
        good_with({13: None}),
        12,
        'classic review "标题丙" has a title but no body',
    ),
    (
        "second headline item",
        good_with({6: "https://example.org/a\n另一个标题\n另一段。"}),
        7,
        'the headline section holds exactly one item, found a second: "另一个标题"',
    ),
    (
        "second classic item after a blank line",
        good_with({13: "段落丙。\n\n标题丁\n段落丁。"}),
        15,
        'the classic section holds exactly one item, found a second: "标题丁"',
    ),
    (
        "a link where a title belongs",
        good_with({8: None, 9: None}),
        8,
        'expected the title of a brief but found the link "https://example.org/b"; '
        "links go after an item's body",
    ),
    (
        "a section twice",
        good_with({11: "简讯"}),
        11,
        "a second 简讯 section; it was opened on line 7",
    ),
    (
        "an empty section",
        good_with({8: None, 9: None, 10: None}),
        7,
        "the 简讯 section has no item; add one or remove the label",
    ),
    (
        "text after the question without a blank line",
        good_with({9: "段落乙。\n带着一个问题读：为什么？\n标题丁\n段落丁。"}),
        11,
        'brief "标题乙": only links may follow the reading question (line 10), found "标题丁"; '
        "end the item with a blank line",
    ),
    (
        "question after the links",
        good_with({10: "https://example.org/b\n带着一个问题读：为什么？"}),
        11,
        'expected the title of a brief but found a reading question of brief "标题乙"; '
        "the question goes after the body, before the links",
    ),
    (
        "empty question line",
        good_with({9: "段落乙。\n带着一个问题读："}),
        10,
        'brief "标题乙" has an empty reading question after 带着一个问题读：',
    ),
    (
        "empty question inside the last paragraph",
        good_with({13: "段落丙。带着一个问题读： "}),
        13,
        'classic review "标题丙" has an empty reading question after 带着一个问题读：',
    ),
    (
        "a question but no body",
        good_with({9: "带着一个问题读：为什么？"}),
        8,
        'brief "标题乙" has a reading question but no body',
    ),
    (
        "long titles are shortened in messages",
        good_with({9: None, 8: "一" * 60}),
        8,
        f'brief "{"一" * 39}…" has a title but no body',
    ),
]


@pytest.mark.parametrize(("case", "text", "line", "detail"), BAD, ids=[b[0] for b in BAD])
def test_bad_file_reports_path_line_and_detail(
    tmp_path: Path, case: str, text: str, line: int | None, detail: str
) -> None:
    path = tmp_path / "2026-03-02.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    assert (exc.value.line, exc.value.detail) == (line, detail), case
    assert str(exc.value) == f"{path}:{line}: {detail}"


def test_bad_line_numbers_count_crlf_lines_once() -> None:
    text = good_with({9: None}).replace("\n", "\r\n")
    with pytest.raises(IssueFormatError) as exc:
        parse_text(text, path="2026-03-02.txt", date=DAY)
    assert str(exc.value) == '2026-03-02.txt:8: brief "标题乙" has a title but no body'


def test_non_utf8_file_reports_the_line_of_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-02.txt"
    path.write_bytes(good_with({}).encode("utf-8").replace("段落乙".encode(), b"ab\xff"))
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    assert exc.value.line == 9
    assert exc.value.detail == "not valid UTF-8 (byte 0xff at column 3); save the file as UTF-8"


# --- writing -------------------------------------------------------------------------------


def _item(**changes: object) -> Item:
    fields: dict[str, object] = {"title": "标题", "paragraphs": ("段落。",), "links": ()}
    fields.update(changes)
    return Item.model_validate(fields)


def test_question_marker_follows_the_item_language() -> None:
    assert question_marker(_item(question="为什么？")) == QUESTION_MARKER
    english = _item(title="Title", paragraphs=("Body, with GPU & <b>.",), question="Why?")
    assert question_marker(english) == "A question to read with: "


def test_dump_separates_a_linkless_brief_from_the_next_by_one_blank_line() -> None:
    issue = Issue(
        date=DAY,
        headline=_item(links=("https://example.org/h",)),
        briefs=(_item(title="甲"), _item(title="乙", links=("https://example.org/b",)), _item()),
    )
    lines = dump_text(issue).split("\n")
    assert lines[lines.index("甲") : lines.index("甲") + 4] == ["甲", "段落。", "", "乙"]
    # "乙" has links, so the third brief follows it directly
    assert dump_text(issue).count("\n\n") == 1
    assert parse_text(dump_text(issue), date=DAY) == issue


UNREPRESENTABLE: list[tuple[str, Issue, str]] = [
    (
        "masthead is a label",
        Issue(date=DAY, masthead="简讯", headline=_item()),
        'masthead: "简讯" would not read back as the masthead; the text format cannot hold it',
    ),
    (
        "title is a label",
        Issue(date=DAY, headline=_item(), briefs=(_item(title="Classic"),)),
        'brief 1 "Classic": the title is the section label "Classic"; '
        "the text format cannot hold it",
    ),
    (
        "paragraph is a URL",
        Issue(date=DAY, headline=_item(paragraphs=("https://example.org",))),
        'headline "标题": paragraph 1 starts with a link, so it would read back as a link line; '
        "the text format cannot hold it",
    ),
    (
        "paragraph starts with a marker",
        Issue(date=DAY, headline=_item(paragraphs=("a", "带着一个问题读:b"))),
        'headline "标题": paragraph 2 starts with a question marker; '
        "the text format cannot hold it",
    ),
    (
        "title starts with a marker",
        Issue(date=DAY, headline=_item(), classic=_item(title="A question to read with: x")),
        'classic review "A question to read with: x": the title starts with a question marker; '
        "the text format cannot hold it",
    ),
    (
        "marker in the last paragraph and no question",
        Issue(date=DAY, headline=_item(paragraphs=("问：带着一个问题读：为何",))),
        'headline "标题": its last paragraph holds a question marker but it has no question; '
        "the text format cannot hold it",
    ),
]


@pytest.mark.parametrize(
    ("case", "issue", "detail"), UNREPRESENTABLE, ids=[u[0] for u in UNREPRESENTABLE]
)
def test_dump_refuses_what_would_not_read_back(case: str, issue: Issue, detail: str) -> None:
    with pytest.raises(IssueFormatError) as exc:
        dump_text(issue)
    assert exc.value.line is None
    assert str(exc.value) == f"<issue {DAY}>: {detail}", case


def test_marker_in_last_paragraph_is_fine_when_the_item_has_a_question() -> None:
    issue = Issue(date=DAY, headline=_item(paragraphs=("问：带着一个问题读：为何",), question="q"))
    assert parse_text(dump_text(issue), date=DAY) == issue


# --- properties ----------------------------------------------------------------------------

# Pieces that sit near the format's boundaries, mixed into arbitrary text.
_TRICKY = [
    "<b>", "&amp;", "*_~|", "@everyone", "本期重点：", "重点", "Briefs", "带着一个问题读：",
    "A question to read with:", "https://", "：", " ", "\u3000", "\t", "\u2028", "\ufeff",
]  # fmt: skip
# Any character the model accepts: no controls (tab aside) and no bidi controls (issue #8).
_chars = st.characters(
    exclude_categories=["Cs", "Cc"],
    exclude_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
)
_plain = st.text(_chars, min_size=1, max_size=8)
_line = st.lists(
    st.one_of(_plain, _plain, _plain, st.sampled_from(_TRICKY)), min_size=1, max_size=4
).map(lambda parts: "".join(parts).strip() or "x")
_url = st.builds(
    "{}://{}{}{}".format,
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z0-9][a-z0-9.-]{0,12}", fullmatch=True),
    st.sampled_from(["", ":8080"]),
    st.text(
        st.characters(exclude_categories=("Z", "C"), exclude_characters='"`<>\\'), max_size=15
    ).map("/{}".format),
).filter(lambda u: url_problem(u) is None)
_items = st.builds(
    Item,
    title=_line,
    paragraphs=st.lists(_line, min_size=1, max_size=3).map(tuple),
    links=st.lists(_url, max_size=2).map(tuple),
    question=st.none() | _line,
)
issues = st.builds(
    Issue,
    date=st.dates(),
    masthead=_line,
    lede=st.none() | _line,
    headline=_items,
    briefs=st.lists(_items, max_size=4).map(tuple),
    classic=st.none() | _items,
)


@settings(max_examples=examples(200))
@given(issues)
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_text_round_trip_for_any_writable_issue(issue: Issue) -> None:
    try:
        text = dump_text(issue)
    except IssueFormatError:
        reject()
    assert parse_text(text, date=issue.date) == issue
    assert dump_text(parse_text(text, date=issue.date)) == text


@settings(max_examples=examples(100))
@given(issues, st.sampled_from(["\n", "\r\n"]), st.booleans())
@pytest.mark.slow  # over 0.25 s: left out of make check
def test_line_endings_and_bom_do_not_change_the_issue(issue: Issue, eol: str, bom: bool) -> None:
    try:
        text = dump_text(issue)
    except IssueFormatError:
        reject()
    variant = ("\ufeff" if bom else "") + text.replace("\n", eol)
    assert parse_text(variant, date=issue.date) == issue


# --- the published seed issue --------------------------------------------------------------


@pytest.mark.skipif(not SEED.exists(), reason="the shared seed issue is not checked out")
def test_seed_issue_loads_completely() -> None:
    raw = SEED.read_text(encoding="utf-8")
    issue = load_issue(SEED, date=dt.date(2026, 10, 27))
    assert issue.headline.paragraphs
    assert len(issue.briefs) == 6
    assert issue.classic is not None and issue.classic.question
    assert not any(m in issue.classic.paragraphs[-1] for m in ("带着一个问题读",))
    urls = re.findall(r"https?://\S+", raw)
    kept = [url for _, item in issue.items() for url in item.links]
    assert kept == urls
    assert parse_text(dump_text(issue), date=issue.date) == issue


# --- issue #8: caps, linear loading, characters, links --------------------------------------


def briefs_file(n: int, *, title: str = "同一个标题") -> str:
    """An issue with ``n`` briefs, all with the same title: brief k's title is on line 3k + 4."""
    lines = ["AI 技术日报", "重点", "头条", "正文。", "https://example.org/h", "简讯"]
    for k in range(n):
        lines += [title, "正文。", f"https://example.org/b/{k}"]
    return text_of(*lines)


def test_the_201st_brief_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "2026-03-02.txt"
    path.write_text(briefs_file(MAX_BRIEFS + 1), encoding="utf-8")
    with pytest.raises(IssueFormatError) as exc:
        load_issue(path)
    line = 3 * (MAX_BRIEFS + 1) + 4
    assert str(exc.value) == (
        f"{path}:{line}: too many briefs: an issue holds at most 200, "
        'and this line starts brief 201 ("同一个标题")'
    )


def test_a_huge_file_stops_at_the_cap_instead_of_reading_everything() -> None:
    # the issue's 60,000-brief file: refused at the 201st brief (before: minutes of list.index)
    with pytest.raises(IssueFormatError) as exc:
        parse_text(briefs_file(60_000), path="big.txt", date=DAY)
    assert exc.value.line == 3 * 201 + 4


def test_200_briefs_with_identical_titles_load_in_order_and_round_trip() -> None:
    issue = parse_text(briefs_file(MAX_BRIEFS), date=DAY)
    assert len(issue.briefs) == MAX_BRIEFS
    assert {b.title for b in issue.briefs} == {"同一个标题"}
    assert [b.links[0] for b in issue.briefs] == [
        f"https://example.org/b/{k}" for k in range(MAX_BRIEFS)
    ]
    assert parse_text(dump_text(issue), date=DAY) == issue


def _cap_cases() -> list[tuple[str, str, int, str]]:
    many_paragraphs = "\n".join(f"段落{k}。" for k in range(MAX_PARAGRAPHS + 1))
    many_links = "\n".join(f"https://example.org/{k}" for k in range(MAX_LINKS + 1))
    return [
        (
            "201 paragraphs",
            good_with({9: many_paragraphs}),
            9 + MAX_PARAGRAPHS,
            f'brief "标题乙" has more than {MAX_PARAGRAPHS} paragraphs; at most '
            f"{MAX_PARAGRAPHS} are allowed (one line is one paragraph)",
        ),
        (
            "21 links",
            good_with({10: many_links}),
            10 + MAX_LINKS,
            f'brief "标题乙" has more than {MAX_LINKS} links; at most {MAX_LINKS} allowed',
        ),
        (
            "long title",
            good_with({8: "题" * (MAX_TITLE_CHARS + 1)}),
            8,
            f'the title of brief "{"题" * 39}…" is {MAX_TITLE_CHARS + 1} characters long; '
            f"at most {MAX_TITLE_CHARS} are allowed (starts '{'题' * 39}…')",
        ),
        (
            "long paragraph",
            good_with({9: "字" * (MAX_PARAGRAPH_CHARS + 1)}),
            9,
            f'brief "标题乙": the paragraph is {MAX_PARAGRAPH_CHARS + 1} characters long; '
            f"at most {MAX_PARAGRAPH_CHARS} are allowed (starts '{'字' * 39}…')",
        ),
        (
            "long question",
            good_with({9: "段落乙。\n带着一个问题读：" + "问" * (MAX_PARAGRAPH_CHARS + 1)}),
            10,
            f'brief "标题乙": the reading question is {MAX_PARAGRAPH_CHARS + 1} characters '
            f"long; at most {MAX_PARAGRAPH_CHARS} are allowed (starts '{'问' * 39}…')",
        ),
        (
            "long lede",
            good_with({2: "本期重点：" + "句" * (MAX_PARAGRAPH_CHARS + 1)}),
            2,
            f"the lede is {MAX_PARAGRAPH_CHARS + 1} characters long; "
            f"at most {MAX_PARAGRAPH_CHARS} are allowed (starts '{'句' * 39}…')",
        ),
        (
            "long masthead",
            good_with({1: "刊" * (MAX_TITLE_CHARS + 1)}),
            1,
            f"the masthead is {MAX_TITLE_CHARS + 1} characters long; "
            f"at most {MAX_TITLE_CHARS} are allowed (starts '{'刊' * 39}…')",
        ),
    ]


@pytest.mark.parametrize(("case", "text", "line", "detail"), _cap_cases(), ids=lambda c: c)
def test_caps_are_refused_at_the_line_that_passes_them(
    case: str, text: str, line: int, detail: str
) -> None:
    with pytest.raises(IssueFormatError) as exc:
        parse_text(text, path="2026-03-02.txt", date=DAY)
    assert (exc.value.line, exc.value.detail) == (line, detail), case


def test_everything_at_its_cap_loads() -> None:
    text = good_with(
        {
            1: "刊" * MAX_TITLE_CHARS,
            8: "题" * MAX_TITLE_CHARS,
            9: "\n".join(["字" * MAX_PARAGRAPH_CHARS] * MAX_PARAGRAPHS),
            10: "\n".join(f"https://example.org/{k}" for k in range(MAX_LINKS)),
        }
    )
    issue = parse_text(text, date=DAY)
    assert len(issue.briefs[0].paragraphs) == MAX_PARAGRAPHS
    assert len(issue.briefs[0].links) == MAX_LINKS
    assert parse_text(dump_text(issue), date=DAY) == issue


FORBIDDEN_CHARS = [
    ("NUL", "\x00", "U+0000 (NUL)"),
    ("bell", "\x07", "U+0007"),
    ("ANSI colour", "\x1b[31m", "U+001B (ESC, which starts terminal escape sequences)"),
    ("DEL", "\x7f", "U+007F (DEL)"),
    ("C1 CSI", "\x9b31m", "U+009B (CSI, which starts terminal escape sequences)"),
    ("vertical tab", "\x0b", "U+000B"),
]
BIDI_CHARS = [
    ("RLO", "\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("LRE", "\u202a", "U+202A (LEFT-TO-RIGHT EMBEDDING)"),
    ("RLI", "\u2067", "U+2067 (RIGHT-TO-LEFT ISOLATE)"),
    ("PDI", "\u2069", "U+2069 (POP DIRECTIONAL ISOLATE)"),
]


@pytest.mark.parametrize(("name", "chars", "named"), FORBIDDEN_CHARS + BIDI_CHARS, ids=lambda c: c)
@pytest.mark.parametrize("line", [1, 2, 4, 5, 8, 9, 13])
def test_control_and_bidi_characters_are_refused_at_their_line(
    name: str, chars: str, named: str, line: int
) -> None:
    text = good_with({line: GOOD[line - 1][:2] + chars + GOOD[line - 1][2:]})
    with pytest.raises(IssueFormatError) as exc:
        parse_text(text, path="2026-03-02.txt", date=DAY)
    kind = "bidi control" if chars >= "\u2000" else "control character"
    assert exc.value.line == line
    assert exc.value.detail == f"the line holds the {kind} {named} at column 3; remove it"
    assert str(exc.value).isprintable(), "the message itself never carries the character"


def test_a_control_character_in_a_link_line_is_refused_at_its_line() -> None:
    with pytest.raises(IssueFormatError) as exc:
        parse_text(good_with({10: "https://example.org/b\x1b]8;;"}), date=DAY)
    assert exc.value.line == 10
    assert "U+001B" in exc.value.detail and str(exc.value).isprintable()


def test_tab_reads_as_a_space_and_surrounding_tabs_are_whitespace() -> None:
    issue = parse_text(good_with({8: "\t标题\t乙\t", 9: "段落\t\t乙。"}), date=DAY)
    assert issue.briefs[0].title == "标题 乙"
    assert issue.briefs[0].paragraphs == ("段落  乙。",)


def test_other_invisible_characters_are_kept() -> None:
    # zero-width space, LRM/RLM marks, line separator and no-break space are text, not controls
    title = "标题\u200b\u200e\u200f\u2028\u00a0乙"
    assert parse_text(good_with({8: title}), date=DAY).briefs[0].title == title


BAD_LINKS = [
    (
        "markup after a quote",
        'https://example.org/"><script>alert(1)</script>',
        """it holds the character '"': 'https://example.org/"><script>alert(1)</script>'""",
    ),
    (
        "user info",
        "https://user@evil.example/",
        "it has user info before an @ in the host part, which disguises where the link goes: "
        "'https://user@evil.example/'",
    ),
    (
        "a trusted name as user info",
        "https://bank.example.com@evil.example/login",
        "it has user info before an @ in the host part, which disguises where the link goes: "
        "'https://bank.example.com@evil.example/login'",
    ),
    ("a space", "https://example.org/a b", "it holds a space: 'https://example.org/a b'"),
    (
        "a full-width space",
        "https://example.org/a\u3000b",
        "it holds a space: 'https://example.org/a\\\\u3000b'",
    ),
    (
        "angle brackets",
        "https://example.org/<x>",
        "it holds the character '<': 'https://example.org/<x>'",
    ),
    (
        "backslash",
        "https://example.org\\@x.org",
        "it holds the character '\\\\': 'https://example.org\\\\@x.org'",
    ),
    (
        "a soft hyphen",
        "https://exam\u00adple.org/",
        "it holds the character '\\\\xad': 'https://exam\\\\xadple.org/'",
    ),
    (
        "a zero-width space",
        "https://exam\u200bple.org/",
        "it holds the character '\\\\u200b': 'https://exam\\\\u200bple.org/'",
    ),
    (
        "an apostrophe (an attribute breaks out with it)",
        "https://example.org/a'onmouseover='x",
        'it holds the character "\'" (write an apostrophe as %27): '
        "\"https://example.org/a'onmouseover='x\"",
    ),
    ("no host", "https:///path", "it has no valid host: 'https:///path'"),
    ("bare scheme", "http://", "it has no valid host: 'http://'"),
    (
        "bad port",
        "https://example.org:99999/",
        "(Port out of range 0-65535): 'https://example.org:99999/'",
    ),
    ("bad IPv6", "https://[::1/", "(Invalid IPv6 URL): 'https://[::1/'"),
    (
        "long and bad: quoted short",
        "https://example.org/" + "a" * 100 + " tail",
        "it holds a space: 'https://example.org/" + "a" * 39 + "…'",
    ),
]


@pytest.mark.parametrize(("case", "link", "why"), BAD_LINKS, ids=[b[0] for b in BAD_LINKS])
def test_a_bad_link_line_is_an_error_at_its_line(case: str, link: str, why: str) -> None:
    with pytest.raises(IssueFormatError) as exc:
        parse_text(good_with({10: link}), path="2026-03-02.txt", date=DAY)
    assert exc.value.line == 10, case
    detail = exc.value.detail
    assert detail.startswith('brief "标题乙": the link on line 10 is not an http(s) URL'), detail
    assert detail.endswith(why), detail
    assert str(exc.value).isprintable()


@pytest.mark.parametrize(
    "link",
    [
        "https://例子.测试/路径?q=一&lang=zh#节",
        "https://[2001:db8::1]:8443/x",
        "https://en.wikipedia.org/wiki/Ohm%27s_law",
        "http://example.org/@everyone?u=@here",
        "https://example.org/a_(b)*c~|{}^",
        "https://sub-domain.example.org:8080/",
    ],
)
def test_good_links_pass(link: str) -> None:
    assert parse_text(good_with({10: link}), date=DAY).briefs[0].links == (link,)


def test_a_line_starting_with_a_link_is_a_link_line_not_body_text() -> None:
    # before issue #8 this was a paragraph holding a broken link
    with pytest.raises(IssueFormatError) as exc:
        parse_text(good_with({9: "段落乙。\nhttps://example.org/b 这是说明"}), date=DAY)
    assert exc.value.line == 10
    assert "it holds a space" in exc.value.detail
    # a link inside a line stays body text
    issue = parse_text(good_with({9: "见 https://example.org/b 这是说明"}), date=DAY)
    assert issue.briefs[0].paragraphs == ("见 https://example.org/b 这是说明",)


def test_quoted_titles_in_messages_are_escaped() -> None:
    # U+3000 is allowed text but not printable: the message spells it out
    with pytest.raises(IssueFormatError) as exc:
        parse_text(good_with({9: None, 8: "标题\u3000乙"}), date=DAY)
    assert exc.value.detail == 'brief "标题\\u3000乙" has a title but no body'
