"""Loading benchmark: issue files at and far past the caps, in every format (issue #8).

Run ``python -m benchmarks.loading`` (``--runs``). For each case it writes one issue file to a
temporary directory and prints the median time :func:`load_issue` takes to load or refuse it,
the outcome, and the ratio to the 1 s budget (a bot that spends longer on one file looks
frozen). The 200-brief rows show the work is linear: time per brief stays flat from 50 to 200.
The "full" rows are the largest issue the caps allow (200 briefs of 200 paragraphs each).
Before issue #8, a 189 KB text file with 20,000 briefs took 31-34 s (``list.index`` per brief).

YAML is read with libyaml's parser when PyYAML has it (issue #24, item 7); each YAML row also
shows the time with PyYAML's pure-Python loader (how YAML was read before, and still is
without libyaml), and the last lines compare the full YAML issue with the same issue as text
(7.4x with the pure-Python loader when the issue was filed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from digest_core.errors import IssueFormatError
from digest_core.loading import load_issue, yamlform
from digest_core.models import MAX_BRIEFS, MAX_PARAGRAPHS

BUDGET_MS = 1000.0


def text_issue(briefs: int) -> str:
    """Briefs with identical titles, the worst case of the old ``list.index`` lookup."""
    lines = ["AI 技术日报", "重点", "头条", "正文。", "https://example.org/h", "简讯"]
    for n in range(briefs):
        lines += ["同一个标题", "正文。", f"https://example.org/{n}"]
    return "\n".join(lines) + "\n"


def small_text_issue(briefs: int) -> str:
    """As small as a brief gets (the issue's 189 KB / 20,000-brief shape)."""
    return "D\n重点\nH\np\n简讯\n" + "t\np\n\n" * briefs


def data_issue(briefs: int) -> dict[str, object]:
    return {
        "date": "2026-03-02",
        "headline": {"title": "头条", "paragraphs": ["正文。"]},
        "briefs": [{"title": "t", "paragraphs": ["p"]} for _ in range(briefs)],
    }


def yaml_issue(briefs: int) -> str:
    head = "date: 2026-03-02\nheadline:\n  title: 头条\n  paragraphs: [正文。]\nbriefs:\n"
    return head + "- {title: t, paragraphs: [p]}\n" * briefs


def full_yaml(briefs: int) -> str:
    """Every brief with MAX_PARAGRAPHS one-letter paragraphs: the most YAML nodes the caps allow."""
    head = "date: 2026-03-02\nheadline:\n  title: 头条\n  paragraphs: [正文。]\nbriefs:\n"
    paragraphs = ", ".join(["p"] * MAX_PARAGRAPHS)
    return head + f"- {{title: t, paragraphs: [{paragraphs}]}}\n" * briefs


def full_text(briefs: int) -> str:
    """The text form of :func:`full_yaml`."""
    body = "t\n" + "p\n" * MAX_PARAGRAPHS + "\n"
    return "D\n重点\nH\np\n简讯\n" + body * briefs


CASES: list[tuple[str, str, Callable[[], str]]] = [
    ("txt, 50 briefs", ".txt", lambda: text_issue(50)),
    ("txt, 100 briefs", ".txt", lambda: text_issue(100)),
    (f"txt, {MAX_BRIEFS} briefs (cap)", ".txt", lambda: text_issue(MAX_BRIEFS)),
    (f"json, {MAX_BRIEFS} briefs", ".json", lambda: json.dumps(data_issue(MAX_BRIEFS))),
    (f"yaml, {MAX_BRIEFS} briefs", ".yaml", lambda: yaml_issue(MAX_BRIEFS)),
    ("txt, 20,000 briefs", ".txt", lambda: small_text_issue(20_000)),
    ("txt, 60,000 briefs", ".txt", lambda: small_text_issue(60_000)),
    ("json, 20,000 briefs", ".json", lambda: json.dumps(data_issue(20_000))),
    ("yaml, 20,000 briefs", ".yaml", lambda: yaml_issue(20_000)),
    (f"txt, {MAX_BRIEFS} full briefs", ".txt", lambda: full_text(MAX_BRIEFS)),
    (f"yaml, {MAX_BRIEFS} full briefs", ".yaml", lambda: full_yaml(MAX_BRIEFS)),
]


def measure(path: Path, runs: int) -> tuple[float, str]:
    times, outcome = [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            issue = load_issue(path)
            outcome = f"loaded, {len(issue.briefs)} briefs"
        except IssueFormatError as exc:
            outcome = f"refused at line {exc.line}" if exc.line else "refused"
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), outcome


def measure_pure(path: Path, runs: int) -> float:
    """:func:`measure` with PyYAML's pure-Python loader alone (as without libyaml)."""
    fast, yamlform._CLoader = yamlform._CLoader, None
    try:
        return measure(path, runs)[0]
    finally:
        yamlform._CLoader = fast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, help="timed runs per case")
    args = parser.parse_args()
    print(f"load_issue, median of {args.runs} runs; budget {BUDGET_MS:.0f} ms per file")
    print(f"YAML parser: {yamlform.PARSER} (pure-Python ms: PyYAML's own loader)")
    print(f"{'case':<26}{'KB':>7}{'ms':>9}{'µs/brief':>10}{'/budget':>9}{'pure ms':>9}  outcome")
    full: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, suffix, make in CASES:
            path = Path(tmp) / f"2026-03-02{suffix}"
            path.write_text(make(), encoding="utf-8")
            ms, outcome = measure(path, args.runs)
            pure = measure_pure(path, args.runs) if suffix == ".yaml" else ms
            briefs = int(name.split(", ")[1].split()[0].replace(",", ""))
            per = f"{ms * 1000 / min(briefs, MAX_BRIEFS + 1):.1f}"
            kb = path.stat().st_size / 1024
            shown = f"{pure:>9.2f}" if suffix == ".yaml" else " " * 9
            print(
                f"{name:<26}{kb:>7.0f}{ms:>9.2f}{per:>10}{ms / BUDGET_MS:>9.3f}{shown}  {outcome}"
            )
            if "full" in name:
                full[suffix], full["pure"] = ms, pure
    print(
        f"{MAX_BRIEFS} full briefs, YAML / text: {full['.yaml'] / full['.txt']:.1f}x with "
        f"{yamlform.PARSER}, {full['pure'] / full['.txt']:.1f}x with the pure-Python loader "
        f"(7.4x when issue #24 was filed)"
    )


if __name__ == "__main__":
    main()
