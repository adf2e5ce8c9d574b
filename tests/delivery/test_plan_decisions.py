"""Properties of planning's pure decisions beside classify (delivery.ledger.classify)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from digest_core.delivery.ledger import PartState, PlannedPart
from digest_core.delivery.ledger.classify import (
    all_sent,
    check_request,
    counts,
    entries,
    fresh_entries,
    new_rows,
    split_unsent,
)
from digest_core.platform import Target, TargetKind

NOW = dt.datetime(2026, 1, 1, 8, tzinfo=dt.UTC)
UNSENT = [s.value for s in PartState if s is not PartState.SENT]

target_ids = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def unsent_rows(draw: st.DrawFn) -> list[tuple[int, str, int, str, int]]:
    """A delivery's unsent rows as planning reads them: in target, then part order."""
    keys = sorted(draw(st.sets(st.tuples(target_ids, st.integers(0, 3)), max_size=12)))
    return [
        (i, t, part, draw(st.sampled_from(UNSENT)), draw(st.integers(0, 3)))
        for i, (t, part) in enumerate(keys, start=1)
    ]


@given(rows=unsent_rows(), live=st.frozensets(target_ids))
def test_every_unsent_row_is_to_send_or_left_to_its_live_delivery_in_order(
    rows: list[tuple[int, str, int, str, int]], live: frozenset[str]
) -> None:
    todo, in_progress = split_unsent(rows, live)
    assert set(todo).isdisjoint(live) and set(in_progress) <= live
    for target in {t for _, t, _, _, _ in rows}:
        mine = [r for r in rows if r[1] == target]
        if target in live:
            assert in_progress[target] == len(mine) and target not in todo
        else:
            assert todo[target] == [PlannedPart(i, p, PartState(s), a) for i, _, p, s, a in mine]


def _pairs(ids: list[str]) -> list[tuple[Target, Target]]:
    return [
        (Target("fake", f"old-{t}", TargetKind.PRIVATE), Target("fake", t, TargetKind.PRIVATE))
        for t in ids
    ]


@given(
    ids=st.lists(target_ids, unique=True, max_size=4),
    rows=unsent_rows(),
    already=st.dictionaries(target_ids, st.integers(0, 3)),
    in_progress=st.dictionaries(target_ids, st.integers(1, 3)),
    superseded=st.dictionaries(target_ids, st.sampled_from("xy")),
)
def test_one_entry_per_pair_in_order_with_what_it_needs(
    ids: list[str],
    rows: list[tuple[int, str, int, str, int]],
    already: dict[str, int],
    in_progress: dict[str, int],
    superseded: dict[str, str],
) -> None:
    pairs = _pairs(ids)
    todo, _ = split_unsent(rows, frozenset())
    found = entries(pairs, todo, already, in_progress, superseded)
    assert [(e[0], e[2]) for e in found] == [(f"old-{t}", t) for t in ids]
    for (_, _, final, parts, got, busy, revision), t in zip(found, ids, strict=True):
        assert final == t and parts == tuple(todo.get(t, ()))
        assert (got, busy, revision) == (
            already.get(t, 0),
            in_progress.get(t, 0),
            superseded.get(t),
        )
    assert counts(found) == (
        sum(1 for t in ids if t in superseded),
        sum(1 for t in ids if in_progress.get(t)),
    )


@given(ids=st.lists(target_ids, unique=True, max_size=4), n_parts=st.integers(1, 4))
def test_targets_sent_or_fresh_need_nothing_or_every_part(ids: list[str], n_parts: int) -> None:
    pairs = _pairs(ids)
    assert all(e[3] == () and e[4] == n_parts for e in all_sent(pairs, n_parts))
    inserted = {(t, p): 10 * i + p for i, t in enumerate(ids) for p in range(n_parts)}
    for entry, t in zip(fresh_entries(pairs, inserted, n_parts), ids, strict=True):
        assert entry[3] == tuple(
            PlannedPart(inserted[t, p], p, PartState.PENDING, 0) for p in range(n_parts)
        )
        assert entry[4:] == (0, 0, None)


@given(
    keys=st.lists(st.tuples(target_ids, st.integers(0, 3)), unique=True, max_size=8),
    variant=st.sampled_from([None, "compact"]),
)
def test_new_rows_are_pending_in_order_and_name_a_variant_only_when_not_full(
    keys: list[tuple[str, int]], variant: str | None
) -> None:
    kinds = {t: TargetKind.PRIVATE.value for t in "abcd"}
    rows = new_rows(keys, kinds, delivery_id=7, now=NOW, variant=variant)
    assert [(r["target"], r["part"]) for r in rows] == keys
    assert all(r["state"] == PartState.PENDING.value and r["delivery_id"] == 7 for r in rows)
    assert all(("variant" in r) == (variant is not None) for r in rows)
    assert all(r.get("variant") == variant for r in rows)


def test_a_plan_needs_a_part_and_targets_of_its_platform() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        check_request("fake", [], 0)
    with pytest.raises(ValueError, match="not on platform 'fake'"):
        check_request("fake", [Target("other", "1", TargetKind.CHANNEL)], 1)
    check_request("fake", [Target("fake", "1", TargetKind.CHANNEL)], 1)
