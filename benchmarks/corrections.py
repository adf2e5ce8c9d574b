"""Correction planning at scale: a posted day of N private chats, then a correction planned.

Run ``python -m benchmarks.corrections`` (``--help`` for knobs). A 3-part issue is planned to N
subscribers on a fresh SQLite file and recorded as sent (every row its own message id); then
``Ledger.plan_correction`` plans a new revision whose last part changed (N edits, 2N messages
unchanged), and plans it again once that correction is recorded done (the idle second run).
Figures (medians over ``--runs``): wall time of each plan (and, for scale on a loaded machine,
of the post's own ``Ledger.plan`` of the same day), and the event loop's longest stall during
it (a probe task sleeps 10 ms in a loop; the house target is at most 100 ms). Each correction
is planned inside ``frozen_heap()``, as :func:`digest_core.publishing.corrections.correct`
plans and runs it.

``--compact F``: a share F of the subscribers got the one-part compact variant instead (its
own engine run of the same delivery, as ``[telegram] subscriber_format = "compact"`` does), and
the correction changes it too: each target is planned against its own variant's digests.

``--db sqlite,postgresql`` (the default: both): PostgreSQL is a throwaway server started like
the tests' (``tests/pg.py``, as in benchmarks/scale.py), a fresh database per run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from sqlalchemy import update

from benchmarks.fanout import StallProbe, _timed
from digest_core.clock import SystemClock
from digest_core.delivery import Ledger, PartState
from digest_core.delivery.ledger import parts
from digest_core.heap import frozen_heap
from digest_core.models import IssueRef
from digest_core.testing import make_issue, make_messages, make_targets

STALL_TARGET_MS = 100.0
ROOT = Path(__file__).resolve().parent.parent


async def once(n: int, compact: float = 0.0, *, url: str = "") -> dict[str, float]:
    """One run on a fresh database (``url``, else a temporary SQLite file)."""
    clock = SystemClock()
    probe = StallProbe()
    n_compact = round(n * compact)
    with tempfile.TemporaryDirectory() as tmp:
        url = url or f"sqlite+aiosqlite:///{Path(tmp) / 'ledger.sqlite3'}"
        async with Ledger.open(url, clock=clock) as ledger:
            ref = make_issue().ref
            old = make_messages(3)
            targets = make_targets(n, platform="telegram")
            plan, post_s, _ = await _timed(
                probe, ledger.plan(ref, "telegram", targets[n_compact:], 3)
            )
            await ledger.record_digests(plan.delivery_id, [m.digest for m in old])
            old_compact = make_messages(1, label="compact")
            if n_compact:
                await ledger.plan(ref, "telegram", targets[:n_compact], 1, variant="compact")
                await ledger.record_digests(
                    plan.delivery_id, [m.digest for m in old_compact], variant="compact"
                )
            async with ledger._tx() as conn:  # as if every part had been sent
                await conn.execute(
                    update(parts).values(
                        state=PartState.SENT.value, message_id=parts.c.id.cast(parts.c.target.type)
                    )
                )
            new = [*old[:2], make_messages(3, label="corrected")[2]]
            corrected = IssueRef(date=ref.date, revision="corrected")
            new_compact = make_messages(1, label="compact corrected")
            digests = {
                "full": [m.digest for m in new],
                "compact": [m.digest for m in new_compact],
            }
            with frozen_heap():
                first, first_s, first_stall = await _timed(
                    probe, ledger.plan_correction(corrected, "telegram", digests)
                )
            assert first is not None and len(first.targets) == n
            assert first.unchanged == 2 * (n - n_compact)
            async with ledger._tx() as conn:  # as if the correction had run
                await conn.execute(
                    update(parts)
                    .where(parts.c.delivery_id == first.delivery_id)
                    .values(state=PartState.SENT.value)
                )
            with frozen_heap():
                idle, idle_s, idle_stall = await _timed(
                    probe, ledger.plan_correction(corrected, "telegram", digests)
                )
            assert idle is None
    return {
        "post_plan_s": post_s,
        "plan_s": first_s,
        "plan_stall_ms": first_stall,
        "idle_s": idle_s,
        "idle_stall_ms": idle_stall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subscribers", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--compact", type=float, default=0.0, help="share of subscribers in the compact variant"
    )
    parser.add_argument("--db", default="sqlite,postgresql", help="sqlite, postgresql or both")
    args = parser.parse_args()
    dbs = args.db.split(",")
    server = None
    if "postgresql" in dbs:
        sys.path.insert(0, str(ROOT))
        from tests.pg import PgServer

        server = PgServer.start()
    try:
        for db in dbs:
            results = []
            for i in range(args.runs):
                url = name = ""
                if server is not None and db == "postgresql":
                    name = server.create_database(f"corrections_{args.subscribers}_{i}")
                    url = server.url(name)
                results.append(asyncio.run(once(args.subscribers, args.compact, url=url)))
                if server is not None and name:
                    server.drop_database(name)
            print(f"{db}, {args.subscribers} subscribers, medians of {args.runs} runs:")
            for key in results[0]:
                values = [r[key] for r in results]
                median = statistics.median(values)
                line = f"{key:>15}: median {median:8.3f}  runs {[round(v, 3) for v in values]}"
                if key.endswith("stall_ms"):
                    line += f"  ratio to {STALL_TARGET_MS:g} ms: {median / STALL_TARGET_MS:.2f}"
                print(line, flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
