"""Web archive benchmark: building the site of 5, 365 and 3,650 issues, and what a reader loads.

Run ``python -m benchmarks.site`` (``--runs``). For each archive size (the bundled issues,
re-dated, taken in turn) it prints the median time of :func:`build_site` against a target of
2 s for a year of issues, the size of the whole search index (``search/``), and what one
search for a common two-character word (模型, in every issue) downloads, raw and
gzip-compressed (the meta file, its pair's shard and the newest month file: the first page of
hits), and the size of ``feed.xml``, and the time one rebuild
check of a live site takes when nothing changed (what ``[http] site`` pays per request at most
every few seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from benchmarks.archive import TODAY, make_archive
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
WORD = "模型"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rule = Embargo(zone=ZONE, post_time=dt.time(8), clock=FixedClock(NOW))
    config = SiteConfig(rule=rule, base_url="https://x.example/")
    for files in (5, 365, 3650):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            make_archive(folder, files)
            archive = Archive(folder, index=False)
            issues = published_issues(archive, rule)
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                site = build_site(issues, config)
                times.append(time.perf_counter() - t0)
            build = statistics.median(times)
            index = sum(len(v) for k, v in site.items() if k.startswith("search/"))
            meta = json.loads(site["search/meta.json"])
            query = [
                site["search/meta.json"],
                site[f"search/grams/{shard(WORD, meta['shards'])}.json"],
                site[f"search/docs/{meta['months'][0][0]}.json"],
            ]
            one = sum(len(q) for q in query)
            packed = sum(len(gzip.compress(q, 6)) for q in query)
            live = LiveSite(archive, rule=rule, clock=ManualClock(NOW), check_seconds=0)
            live.files()
            checks = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                live.files()
                checks.append(time.perf_counter() - t0)
            total = sum(len(v) for v in site.values())
            check_ms = statistics.median(checks) * 1e3
            print(
                f"{files:5d} issues: build {build:6.2f} s"
                + (f" ({build / TARGET_YEAR_S:.2f}x the {TARGET_YEAR_S:.0f} s target)"
                   if files == 365 else "")
                + f"; site {total / 1e6:6.1f} MB in {len(site)} files; search index "
                f"{index / 1e6:6.2f} MB, one search reads {one / 1e3:5.0f} kB "
                f"({packed / 1e3:4.0f} kB gzip); feed.xml "
                f"{len(site['feed.xml']) / 1e3:4.0f} kB; live check {check_ms:5.1f} ms"
            )  # fmt: skip


if __name__ == "__main__":
    main()
