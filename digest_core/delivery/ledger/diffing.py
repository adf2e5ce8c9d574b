"""Corrections' pure part: what a target's post shows, and what each of its parts needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from digest_core.delivery.ledger.schema import FULL_VARIANT, PartState

__all__ = [
    "CorrectionAction",
    "Planned",
    "Row",
    "action",
    "behind",
    "compare",
    "nothing_to_do",
    "shows",
    "unchanged",
    "view",
]

#: a part of a target's correction as decided: (part, state value, message id); sent with a
#: message id: unchanged; sent with ``""``: gone, stays gone; pending: to edit (message id),
#: send anew (None) or, past the new revision's parts, delete
Planned = tuple[int, str, str | None]

_SENT, _PENDING = PartState.SENT.value, PartState.PENDING.value


class CorrectionAction(StrEnum):
    """What a correction row does to its target."""

    EDIT = "edit"
    SEND = "send"
    DELETE = "delete"


@dataclass(slots=True)
class Row:
    """A part row of a target's post of the day, as a correction reads it."""

    id: int
    delivery_id: int
    part: int
    state: PartState
    message_id: str | None
    variant: str | None


def shows(row: Row) -> bool:
    """The row stands for a message that reached its target."""
    return row.state is PartState.SENT and bool(row.message_id)


def view(rows: Sequence[Row], n_parts: int) -> dict[int, tuple[str, bool]]:
    """What a post shows, part -> (message id, content known): a sent row shows its
    delivery's part (``""``: the message is gone); an unfinished row that names a message
    (an edit or delete a run did not finish) shows something unknown there. Surplus messages
    already deleted, or replaced by a note, are left out."""
    found: dict[int, tuple[str, bool]] = {}
    for row in rows:
        if row.part >= n_parts:
            if row.state is not PartState.SENT and row.message_id:
                found[row.part] = (row.message_id, False)  # a delete not done yet
        elif row.state is PartState.SENT and row.message_id is not None:
            found[row.part] = (row.message_id, True)
        elif row.message_id:
            found[row.part] = (row.message_id, False)
    return found


def behind(
    posts: Mapping[int, Sequence[Row]], revisions: Mapping[int, str], revision: str
) -> int | None:
    """The delivery of a target's latest post that reached it (``posts``: its rows per
    delivery of the day, ``revisions``: each delivery's revision), if that post shows
    another revision than ``revision``; None if it shows ``revision`` or nothing reached it
    (a post's business, not a correction's)."""
    showing = [d for d, rows in posts.items() if any(shows(r) for r in rows)]
    if not showing:
        return None
    last = max(showing)
    return last if revisions[last] != revision else None


def compare(
    rows: Sequence[Row],
    delivery_id: int,
    *,
    digests: Mapping[str, Sequence[str]],
    recorded: Mapping[tuple[int, str], int],
    shown: Mapping[tuple[int, str, int], str],
    default_parts: int,
) -> tuple[str, list[Planned]]:
    """The variant a target is corrected to and each part's :data:`Planned` fate.

    ``rows`` are the target's rows of its post ``delivery_id``; ``digests`` the new
    revision's per variant (the full one always there), ``recorded`` the number of parts per
    (delivery, variant) the day's deliveries recorded digests for, ``shown`` those digests
    per (delivery, variant, part), ``default_parts`` the post's own number of parts (for
    rows recorded before digests were kept per variant). The target is compared in its own
    variant if the new revision has it, else the full one: a part it lacks is sent anew, a
    gone one stays gone, one whose known content has the new digest is unchanged, any other
    is edited; messages past the new revision's parts are deleted. Parts come in order,
    surplus ones last.
    """
    # the variant the target shows, if the new revision has it (a target's rows of one
    # delivery are inserted together, by one run: they share it)
    showing = (rows[0].variant or FULL_VARIANT) if rows else FULL_VARIANT
    variant = showing if showing in digests else FULL_VARIANT
    new = digests[variant]
    n = len(new)
    # what the old delivery recorded of that variant (else of the full one: old rows)
    was = showing if (delivery_id, showing) in recorded else FULL_VARIANT
    seen = view(rows, recorded.get((delivery_id, was), default_parts))
    planned: list[Planned] = []
    for part in range(n):
        found = seen.get(part)
        if found is None:
            planned.append((part, _PENDING, None))
        elif found[0] == "":
            planned.append((part, _SENT, ""))  # gone: stays gone
        elif found[1] and shown.get((delivery_id, was, part)) == new[part]:
            planned.append((part, _SENT, found[0]))
        else:
            planned.append((part, _PENDING, found[0]))
    for part, (message_id, _) in sorted(seen.items()):
        if part >= n and message_id:
            planned.append((part, _PENDING, message_id))
    return variant, planned


def unchanged(planned: Sequence[Planned]) -> int:
    """The messages found showing their new content already."""
    return sum(1 for _, state, message_id in planned if state == _SENT and message_id)


def nothing_to_do(planned: Sequence[Planned]) -> bool:
    """Every part is unchanged or gone: nothing to record or do."""
    return all(state == _SENT for _, state, _ in planned)


def action(part: int, message_id: str | None, variant: str | None, sizes: Mapping[str, int]) -> str:
    """What an unfinished correction row does (``sizes``: the new revision's number of
    parts per variant; a row past its variant's deletes)."""
    full = sizes[FULL_VARIANT]
    if part >= (full if variant is None else sizes.get(variant, full)):
        return CorrectionAction.DELETE.value
    return CorrectionAction.EDIT.value if message_id else CorrectionAction.SEND.value
