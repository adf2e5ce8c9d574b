"""Properties of corrections' pure decisions (digest_core.delivery.ledger.diffing)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from digest_core.delivery.ledger import FULL_VARIANT, PartState
from digest_core.delivery.ledger.diffing import (
    CorrectionAction,
    Row,
    action,
    behind,
    compare,
    nothing_to_do,
    unchanged,
    view,
)

SENT, PENDING = PartState.SENT.value, PartState.PENDING.value
#: the post compared (delivery 1)
POST = 1

message_ids = st.one_of(st.none(), st.just(""), st.sampled_from(["m1", "m2", "m3"]))


@st.composite
def posts(draw: st.DrawFn) -> list[Row]:
    """A target's rows of one post: at most one row per part, one variant."""
    variant = draw(st.sampled_from([None, "compact"]))
    parts = draw(st.lists(st.integers(0, 5), unique=True, min_size=1, max_size=6))
    return [
        Row(i, POST, part, draw(st.sampled_from(list(PartState))), draw(message_ids), variant)
        for i, part in enumerate(parts, start=1)
    ]


digest_lists = st.lists(st.sampled_from("abc"), min_size=1, max_size=5)


@given(
    rows=posts(),
    new_full=digest_lists,
    new_compact=st.one_of(st.none(), digest_lists),
    old=st.lists(st.sampled_from("abc"), max_size=6),
    default_parts=st.integers(1, 6),
)
def test_compare_plans_every_part_once_in_order_and_keeps_only_known_equal_content(
    rows: list[Row],
    new_full: list[str],
    new_compact: list[str] | None,
    old: list[str],
    default_parts: int,
) -> None:
    digests = {FULL_VARIANT: new_full}
    if new_compact is not None:
        digests["compact"] = new_compact
    showing = rows[0].variant or FULL_VARIANT
    shown = {(POST, showing, i): d for i, d in enumerate(old)}
    recorded = {(POST, showing): len(old)} if old else {}
    variant, planned = compare(
        rows,
        POST,
        digests=digests,
        recorded=recorded,
        shown=shown,
        default_parts=default_parts,
    )
    # the target's own variant if the new revision has it
    assert variant == (showing if showing in digests else FULL_VARIANT)
    new = digests[variant]
    n = len(new)
    seen = view(rows, len(old) if old else default_parts)
    # every part of the new revision once, in order, then the surplus messages to delete
    assert [p for p, _, _ in planned[:n]] == list(range(n))
    surplus = planned[n:]
    assert [p for p, _, _ in surplus] == sorted(p for p, (m, _) in seen.items() if p >= n and m)
    assert all(st_ == PENDING and m for _, st_, m in surplus)
    for part, state, message_id in planned[:n]:
        found = seen.get(part)
        if found is None:
            assert (state, message_id) == (PENDING, None)  # sent anew
        elif found[0] == "":
            assert (state, message_id) == (SENT, "")  # gone stays gone
        else:
            same = (
                found[1] and shown.get((POST, showing if old else FULL_VARIANT, part)) == new[part]
            )
            assert (state, message_id) == ((SENT if same else PENDING), found[0])
    assert unchanged(planned) == sum(1 for _, s, m in planned if s == SENT and m)
    assert nothing_to_do(planned) == all(s == SENT for _, s, _ in planned)


@given(n=st.integers(1, 5), gone=st.sets(st.integers(0, 4)))
def test_a_correction_to_the_same_content_does_nothing(n: int, gone: set[int]) -> None:
    new = [f"d{i}" for i in range(n)]
    rows = [
        Row(i + 1, POST, i, PartState.SENT, "" if i in gone else f"m{i}", None) for i in range(n)
    ]
    shown = {(POST, FULL_VARIANT, i): d for i, d in enumerate(new)}
    _, planned = compare(
        rows,
        POST,
        digests={FULL_VARIANT: new},
        recorded={(POST, FULL_VARIANT): n},
        shown=shown,
        default_parts=n,
    )
    assert nothing_to_do(planned)
    assert unchanged(planned) == sum(1 for i in range(n) if i not in gone)


@given(
    posts_=st.dictionaries(
        st.integers(1, 5),
        st.lists(
            st.builds(
                Row,
                st.integers(1, 99),
                st.just(0),
                st.integers(0, 3),
                st.sampled_from(list(PartState)),
                message_ids,
                st.none(),
            ),
            min_size=1,
            max_size=4,
        ),
        max_size=5,
    ),
    revisions=st.lists(st.sampled_from("ab"), min_size=5, max_size=5),
)
def test_behind_is_the_latest_post_that_reached_the_target_if_it_shows_another_revision(
    posts_: dict[int, list[Row]], revisions: list[str]
) -> None:
    by_id = {d: revisions[d - 1] for d in range(1, 6)}
    found = behind(posts_, by_id, "a")
    reached = [
        d
        for d, rows in posts_.items()
        if any(r.state is PartState.SENT and r.message_id for r in rows)
    ]
    if not reached or by_id[max(reached)] == "a":
        assert found is None
    else:
        assert found == max(reached)


@given(
    part=st.integers(0, 6),
    message_id=message_ids,
    variant=st.sampled_from([None, "compact", "headline"]),
    full=st.integers(1, 4),
    compact=st.integers(1, 4),
)
def test_a_row_past_its_variants_parts_deletes_else_edits_a_message_or_sends_anew(
    part: int, message_id: str | None, variant: str | None, full: int, compact: int
) -> None:
    sizes = {FULL_VARIANT: full, "compact": compact}  # no headline digests: taken as full
    limit = compact if variant == "compact" else full
    expected = (
        CorrectionAction.DELETE
        if part >= limit
        else CorrectionAction.EDIT
        if message_id
        else CorrectionAction.SEND
    )
    assert action(part, message_id, variant, sizes) == expected.value
