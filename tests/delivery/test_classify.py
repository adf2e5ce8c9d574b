"""Properties of planning's pure classification (digest_core.delivery.ledger.classify)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import example, given, settings
from hypothesis import strategies as st

from digest_core.delivery.ledger import PartState
from digest_core.delivery.ledger.classify import Classification, FoundRow, Situation, classify
from tests.quick import examples

#: the delivery being completed; 2 and 3 are other deliveries of the day
CURRENT = 1
REVISION = "a"
MAYBE_SENT = (PartState.IN_FLIGHT, PartState.UNKNOWN)


@dataclass(frozen=True)
class Case:
    finals: list[str]
    rows: list[FoundRow]
    alias: dict[str, str]
    situation: Situation


@st.composite
def cases(draw: st.DrawFn, *, force: bool = False) -> Case:
    """Targets (some moved from earlier ids), the day's deliveries and rows as the database
    can hold them: at most one row per (delivery, recorded id, part)."""
    n_parts = draw(st.integers(1, 4))
    finals = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    alias = {f: f for f in finals}
    for f in finals:
        for k in range(draw(st.integers(0, 2))):
            alias[f"{f}~{k}"] = f
    if force:  # a new generation: no revisions read, no rows
        situation = Situation(CURRENT, REVISION, {}, n_parts)
        return Case(finals, [], {}, situation)
    revisions = {CURRENT: REVISION, 2: draw(st.sampled_from("ab")), 3: draw(st.sampled_from("ab"))}
    slots = draw(
        st.dictionaries(
            st.tuples(
                st.sampled_from(sorted(revisions)),
                st.sampled_from(sorted(alias)),
                st.integers(0, n_parts),  # a part past n_parts: an older delivery had more
            ),
            st.sampled_from(list(PartState)),
            max_size=24,
        )
    )
    ids = draw(st.permutations(range(1, len(slots) + 1)))
    rows = [
        FoundRow(row_id, d_id, stored, part, state)
        for row_id, ((d_id, stored, part), state) in zip(ids, sorted(slots.items()), strict=True)
    ]
    row_ids = [r.id for r in rows]
    live_rows = draw(st.frozensets(st.sampled_from(row_ids))) if row_ids else frozenset[int]()
    situation = Situation(
        CURRENT, REVISION, revisions, n_parts, live_rows=live_rows, foreign=draw(st.booleans())
    )
    return Case(finals, draw(st.permutations(rows)), alias, situation)


def run(case: Case) -> Classification:
    return classify(case.finals, case.rows, case.alias, case.situation)


def planned(result: Classification) -> list[tuple[str, int]]:
    """Every (target, part) the plan will send: inserted or an existing unsent row."""
    return result.inserts + [(t, p) for t, p, _ in result.kept]


def sent_keys(case: Case, *, current_only: bool = False) -> set[tuple[str, int]]:
    """(target, part) sent under the delivered revision, in this or an older generation."""
    revisions = case.situation.revisions
    return {
        (case.alias[r.target], r.part)
        for r in case.rows
        if r.state is PartState.SENT
        and revisions[r.delivery_id] == REVISION
        and (r.delivery_id == CURRENT or not current_only)
    }


@given(cases())
def test_every_part_of_a_target_is_in_exactly_one_verdict(case: Case) -> None:
    result = run(case)
    seen = planned(result) + result.sent
    assert len(seen) == len(set(seen)), "a part planned twice"
    n_parts = case.situation.n_parts
    for target in case.finals:
        verdicts = [key for key in seen if key[0] == target]
        if target in result.superseded:
            assert verdicts == []
        else:
            assert sorted(verdicts) == [(target, part) for part in range(n_parts)]
            assert result.already.get(target, 0) == sum(1 for t, _ in result.sent if t == target)


@given(cases())
def test_a_sent_part_is_never_planned_again_without_force(case: Case) -> None:
    result = run(case)
    # sent in the generation being completed: never again
    assert not set(planned(result)) & sent_keys(case, current_only=True)
    # sent by an older generation: no new row for it (a row a forced generation already
    # has is that generation's to complete)
    assert not set(result.inserts) & sent_keys(case)


@given(cases())
def test_a_kept_row_is_an_unsent_row_of_the_delivery_and_its_target(case: Case) -> None:
    result = run(case)
    by_id = {r.id: r for r in case.rows}
    kept_ids = [row_id for _, _, row_id in result.kept]
    assert len(kept_ids) == len(set(kept_ids))
    for target, part, row_id in result.kept:
        row = by_id[row_id]
        assert row.delivery_id == CURRENT
        assert case.alias[row.target] == target and row.part == part
        assert row.state is not PartState.SENT
        assert (row_id in result.resets) == (row.state in (PartState.FAILED, PartState.GONE))
        moved = row.target != target
        assert moved == (row_id in result.retarget.get(target, ()))
    for target, ids in result.retarget.items():
        assert all(by_id[i].target != target for i in ids)


@given(cases())
def test_maybe_sent_parts_of_a_dead_delivery_are_planned_again(case: Case) -> None:
    result = run(case)
    kept = {row_id for _, _, row_id in result.kept}
    situation = case.situation
    for row in case.rows:
        final = case.alias[row.target]
        if (
            row.delivery_id == CURRENT
            and row.target == final
            and row.part < situation.n_parts
            and row.state in MAYBE_SENT
            and (final, row.part) not in sent_keys(case, current_only=True)
            and final not in result.superseded
        ):
            assert row.id in kept  # the row under the current id is the one that counts
            live = row.state is PartState.IN_FLIGHT and (
                row.id in situation.live_rows or situation.foreign
            )
            if live:
                assert final in result.live
    for target in result.live:  # only a row in flight in a live delivery makes a target live
        assert any(
            case.alias[r.target] == target
            and r.id in kept
            and r.state is PartState.IN_FLIGHT
            and (r.id in situation.live_rows or situation.foreign)
            for r in case.rows
        )


@given(cases())
def test_a_target_that_got_another_revision_only_is_superseded(case: Case) -> None:
    result = run(case)
    for target, revision in result.superseded.items():
        assert revision != REVISION
        assert not any(
            case.alias[r.target] == target
            and r.part < case.situation.n_parts
            and (r.delivery_id == CURRENT or r.state is PartState.SENT)
            and case.situation.revisions[r.delivery_id] == REVISION
            for r in case.rows
        )
        assert not planned_for(result, target)


def planned_for(result: Classification, target: str) -> list[tuple[str, int]]:
    return [key for key in planned(result) if key[0] == target]


@given(cases(force=True))
def test_force_sends_every_part_once_in_a_new_generation(case: Case) -> None:
    result = run(case)
    n_parts = case.situation.n_parts
    assert result.inserts == [(t, p) for t in case.finals for p in range(n_parts)]
    assert not (result.kept or result.sent or result.superseded or result.live)


#: a target moved twice, with an unsent row of the delivery under each earlier id
TIED = Case(
    ["t0"],
    [
        FoundRow(7, CURRENT, "t0~0", 0, PartState.FAILED),
        FoundRow(3, CURRENT, "t0~1", 0, PartState.UNKNOWN),
    ],
    {"t0": "t0", "t0~0": "t0", "t0~1": "t0"},
    Situation(CURRENT, REVISION, {CURRENT: REVISION}, 1),
)


@settings(max_examples=examples(200))
@given(cases(), st.randoms(use_true_random=False))
@example(TIED, random.Random(0))
def test_the_result_does_not_depend_on_row_order(case: Case, rnd: random.Random) -> None:
    shuffled = list(case.rows)
    rnd.shuffle(shuffled)
    again = classify(case.finals, shuffled, case.alias, case.situation)
    assert again == run(case)
    assert again == classify(case.finals, list(reversed(case.rows)), case.alias, case.situation)


def test_of_rows_tied_under_earlier_ids_the_oldest_counts() -> None:
    result = run(TIED)
    assert result.kept == [("t0", 0, 3)]
    assert result.retarget == {"t0": [3]} and result.resets == []
