"""Web archive benchmark: the site of 5, 365 and 3,650 issues, what a reader downloads per search,
and what a new day costs a live site.

Run ``python -m benchmarks.site`` (``--runs``, ``--issues N …``; ``--baseline DIR`` also runs
the same measures on the ``digest_core`` checked out in DIR and prints old, new and new/old).
For each archive size (the bundled issues, re-dated, taken in turn), in a fresh process:

- the median time of :func:`build_site` from nothing (target 2 s for a year of issues);
- the site's size and number of files, and the size of its search index (``search/``);
- what one search downloads, raw and gzip-compressed, as the page's script fetches it (the
  format's own rules, v2 or v3, replayed in Python until the first page: 30 hits, and in v3
  at most 5 days' files, or the end): a common two-character word (模型, in most issues), a
  word in no issue, a longer word and a single common character; target 100 kB at ten years;
- a live site (``[http] site``): one check when nothing changed, and the rebuild when a new
  day is published (a new file in the archive), target 1 s at ten years.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from benchmarks.archive import ROOT, TODAY, make_archive
from digest_core.archive import Archive
from digest_core.publishing.embargo import Embargo
from digest_core.site.build import SiteConfig, build_site
from digest_core.site.live import LiveSite, published_issues
from digest_core.site.published import FixedClock
from digest_core.site.search import shard
from digest_core.testing import ManualClock

ZONE = ZoneInfo("Asia/Shanghai")
NOW = dt.datetime.combine(TODAY, dt.time(9), tzinfo=ZONE)
TARGET_YEAR_S = 2.0
TARGET_SEARCH_KB = 100.0
TARGET_NEW_DAY_S = 1.0
PAGE = 30
DAYS = 5  # search.js: a page reads at most this many days' files
WORDS = ("模型", "量子纠缠", "推理服务", "的")


def _grams(query: str) -> list[str]:
    chars = list(query)
    return chars if len(chars) == 1 else [a + b for a, b in itertools.pairwise(chars)]


def fetched_v3(site: dict[str, bytes], query: str) -> list[str]:
    """The files the v3 script loads for ``query`` until a page of hits (search.js)."""
    meta = json.loads(site["search/meta.json"])
    wanted = list(dict.fromkeys(_grams(query)))
    if len(wanted) > 3:
        wanted = [wanted[0], wanted[len(wanted) // 2], wanted[-1]]
    out = ["search/meta.json"]
    lists = []
    for gram in wanted:
        out.append(f"search/grams/{shard(gram, meta['shards'])}.json")
        lists.append(set(json.loads(site[out[-1]]).get(gram, [])))
    shards = dict(meta["years"])
    hits = read = 0
    for year in sorted(set.intersection(*lists), reverse=True):
        days = None
        for gram in wanted:
            out.append(f"search/grams/{2000 + year}/{shard(gram, shards[2000 + year])}.json")
            posting = json.loads(site[out[-1]]).get(gram)
            found = set() if posting is None else set(_decode(posting))
            days = found if days is None else days & found
        for day in sorted(days or (), reverse=True):
            if read >= DAYS:  # the page is full: "more" goes on
                return out
            read += 1
            date = dt.date(2000 + year, 1, 1) + dt.timedelta(days=day)
            out.append(f"search/days/{date.isoformat()}.json")
            docs = json.loads(site[out[-1]])["d"]
            hits += sum(query in d[2].lower() for d in docs)
            if hits >= PAGE:
                return out
    return out


def _decode(posting: Any) -> list[int]:
    try:
        from digest_core.testing import decode_days
    except ImportError:  # a --baseline from before it moved there
        from digest_core.site.search import decode_days  # type: ignore[attr-defined,no-redef]

    return decode_days(posting)


def fetched_v2(site: dict[str, bytes], query: str) -> list[str]:
    """The files the v2 script (before issue 24) loaded for ``query``: every gram's shard,
    then month files of candidates until a page of hits."""
    meta = json.loads(site["search/meta.json"])
    out = ["search/meta.json"]
    postings = []
    for gram in _grams(query):
        out.append(f"search/grams/{shard(gram, meta['shards'])}.json")
        postings.append(set(json.loads(site[out[-1]]).get(gram, [])))
    months = meta["months"]
    hits = 0
    for number in sorted(set.intersection(*postings)):
        month = max((m for m in months if m[1] <= number), key=lambda m: m[1])
        out.append(f"search/docs/{month[0]}.json")
        doc = json.loads(site[out[-1]])[number - month[1]]
        hits += query in doc[4].lower()
        if hits >= PAGE:
            break
    return out


def measure(files: int, runs: int) -> dict[str, float]:
    rule = Embargo(zone=ZONE, post_time=dt.time(8), clock=FixedClock(NOW))
    config = SiteConfig(rule=rule, base_url="https://x.example/")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_archive(folder, files)
        issues = published_issues(Archive(folder, index=False), rule)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            site = build_site(issues, config)
            times.append(time.perf_counter() - t0)
        out["build from nothing (s)"] = statistics.median(times)
        out["site (MB)"] = sum(len(v) for v in site.values()) / 1e6
        out["site files"] = len(site)
        out["search index (MB)"] = (
            sum(len(v) for k, v in site.items() if k.startswith("search/")) / 1e6
        )
        replay = fetched_v3 if json.loads(site["search/meta.json"])["v"] >= 3 else fetched_v2
        for word in WORDS:
            paths = list(dict.fromkeys(replay(site, word)))  # each file is fetched once
            out[f"search {word} (kB)"] = sum(len(site[p]) for p in paths) / 1e3
            out[f"search {word} gzip (kB)"] = (
                sum(len(gzip.compress(site[p], 6)) for p in paths) / 1e3
            )
        out.update(_live(folder, rule, runs))
    return out


def _live(folder: Path, rule: Embargo, runs: int) -> dict[str, float]:
    """A live site: a check when nothing changed; a rebuild when a new day appears."""
    newest = folder / f"{TODAY.isoformat()}.txt"
    text = newest.read_bytes()
    checks, rebuilds = [], []
    for _ in range(runs):
        newest.unlink()
        live = LiveSite(Archive(folder, index=False), rule=rule, clock=ManualClock(NOW),
                        check_seconds=0)  # fmt: skip
        live.files()
        t0 = time.perf_counter()
        live.files()
        checks.append(time.perf_counter() - t0)
        newest.write_bytes(text)  # today's issue is published
        t0 = time.perf_counter()
        site = live.files()
        rebuilds.append(time.perf_counter() - t0)
        assert f"{TODAY:%Y/%m/%d}/index.html" in site
    return {
        "live check, unchanged (ms)": statistics.median(checks) * 1e3,
        "live rebuild, new day (s)": statistics.median(rebuilds),
    }


TARGETS = {"search 模型 (kB)": TARGET_SEARCH_KB, "search 量子纠缠 (kB)": TARGET_SEARCH_KB,
           "search 推理服务 (kB)": TARGET_SEARCH_KB, "search 的 (kB)": TARGET_SEARCH_KB,
           "live rebuild, new day (s)": TARGET_NEW_DAY_S}  # fmt: skip


def _child(code: Path, files: int, runs: int) -> dict[str, float]:
    """:func:`measure` in a fresh process on the ``digest_core`` in ``code``."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "benchmarks").symlink_to(ROOT / "benchmarks")
        Path(tmp, "digest_core").symlink_to(code / "digest_core")
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.site", "--child", str(files), f"--runs={runs}"],
            cwd=tmp, env={**os.environ, "PYTHONPATH": tmp}, capture_output=True, text=True,
            check=True,
        )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--issues", type=int, nargs="+", default=[5, 365, 3650])
    parser.add_argument("--baseline", help="a checkout of the old code to compare with")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child, args.runs)))
        return
    for files in args.issues:
        new = _child(ROOT, files, args.runs)
        old = _child(Path(args.baseline).resolve(), files, args.runs) if args.baseline else None
        print(f"{files} issues (median of {args.runs})")
        print(f"  {'figure':<28}{'old' if old else '':>10}{'new':>10}{'new/old' if old else '':>9}"
              "  target")  # fmt: skip
        for key, value in new.items():
            line = f"  {key:<{28 - sum(ord(c) > 0x2E80 for c in key)}}"
            line += f"{old[key]:>10.2f}" if old and key in old else " " * 10
            line += f"{value:>10.2f}"
            line += f"{value / old[key]:>9.3f}" if old and old.get(key) else " " * 9
            target = TARGETS.get(key)
            if key == "build from nothing (s)" and files == 365:
                target = TARGET_YEAR_S
            if target is not None and (files == 3650 or key.startswith("build")):
                line += f"  <= {target:g}: {value / target:.2f} of target"
            print(line)


if __name__ == "__main__":
    main()
