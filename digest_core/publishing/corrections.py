"""Corrections edited in place: make every message of a posted day show the issue's new revision.

The ledger plans (:meth:`~digest_core.delivery.ledger.Ledger.plan_correction`); this module
runs the plan through the delivery engine's fan-out, so a correction has a post's pacing,
claims, retries and crash-resume: each row is committed in flight before its edit, send or
delete and recorded after it, and a rerun resumes what a killed run left.

Each target is corrected in the variant (format) it got: the channels' full issue, a
subscriber's compact message or headline (see :mod:`digest_core.delivery.ledger.corrections`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from digest_core.delivery.fanout import YIELD_EVERY, DeliveryEngine, Fanout, TargetRun
from digest_core.delivery.ledger import (
    FULL_VARIANT,
    MAYBE_SENT,
    CorrectionAction,
    CorrectionPlan,
    PlannedPart,
)
from digest_core.delivery.reports import ProgressCallback, TargetReport
from digest_core.delivery.threads import placed_in
from digest_core.errors import MessageGone
from digest_core.heap import frozen_heap, refreeze
from digest_core.models import IssueRef
from digest_core.platform import Editor, PartKey, Platform, PlatformLimits, Target, Threads
from digest_core.rendering import Message

log = logging.getLogger(__name__)

#: what a surplus message that may not be deleted is edited to
REMOVED_NOTE = "（此部分已在更正中删去 / this part was removed by a correction）"


def correction_mark(at: dt.datetime) -> str:
    """The short mark an edited message carries: ``已更正 / corrected 09:30`` (``at`` in the
    digest's zone)."""
    return f"已更正 / corrected {at:%H:%M}"


@dataclass
class CorrectionReport:
    """What one correction run did on one platform."""

    ref: IssueRef
    platform: str
    #: messages edited, sent anew (added parts), deleted or replaced by a note
    edited: int = 0
    added: int = 0
    removed: int = 0
    #: messages that showed their new content already (not touched)
    unchanged: int = 0
    #: messages someone deleted before the correction reached them
    gone: int = 0
    #: rows of a killed run this run finished
    resumed: int = 0
    targets: list[TargetReport] = field(default_factory=list)
    #: why nothing could be done (a send-only platform)
    note: str | None = None

    @property
    def failed(self) -> int:
        """Rows that failed, were skipped or ended of unknown outcome (the next run retries
        them)."""
        return sum(t.failed + t.skipped + t.unknown for t in self.targets)

    @property
    def changed(self) -> int:
        return self.edited + self.added + self.removed

    @property
    def ok(self) -> bool:
        return self.failed == 0 and all(t.complete for t in self.targets)

    def describe(self) -> str:
        """One line for replies and the CLI."""
        if self.note:
            return f"{self.platform} {self.ref.date}: {self.note}"
        line = (
            f"{self.platform} {self.ref.date} → {self.ref.revision}: 已更正 / edited "
            f"{self.edited}, 新增 / added {self.added}, 删去 / removed {self.removed}, "
            f"未变 / unchanged {self.unchanged}"
        )
        if self.gone:
            line += f", 已不存在 / gone {self.gone}"
        if self.failed:
            line += f", 失败 / failed {self.failed}"
        if self.resumed:
            line += f" (resumed {self.resumed})"
        return line


class _Correcting:
    """The platform as the fan-out sees it during a correction: its "send" of a row does
    the row's action (edit, send anew, delete) with the row's part in the row's variant
    (``marked``: the new revision's marked messages per variant; a variant it lacks is
    corrected to the full one, as the ledger planned it)."""

    def __init__(
        self,
        platform: Platform,
        editor: Editor,
        actions: dict[tuple[str, int], tuple[CorrectionAction, str | None, str]],
        marked: Mapping[str, Sequence[Message]],
        note: Message,
        report: CorrectionReport,
    ) -> None:
        self.name = platform.name
        self.limits: PlatformLimits = platform.limits
        self.flavor = platform.flavor
        self.post_options = platform.post_options
        self._platform = platform
        self._editor = editor
        self._actions = actions
        self._marked = marked
        self._note = note
        self._report = report

    async def send(self, target: Target, message: Message, *, key: PartKey | None = None) -> str:
        assert key is not None
        action, message_id, variant = self._actions[(target.id, key.part)]
        if action is not CorrectionAction.DELETE:
            message = (self._marked.get(variant) or self._marked[FULL_VARIANT])[key.part]
        if action is CorrectionAction.SEND:
            sent = await self._platform.send(target, message, key=key)
            self._report.added += 1
            return sent
        assert message_id
        if action is CorrectionAction.DELETE:
            if await self._editor.delete(target, message_id):
                self._report.removed += 1
                return ""
            try:
                await self._editor.edit(target, message_id, self._note)
            except MessageGone:
                return ""
            self._report.removed += 1
            return message_id
        try:
            await self._editor.edit(target, message_id, message)
        except MessageGone as exc:
            log.info("%s: message %s was deleted; not corrected (%s)", target, message_id, exc)
            self._report.gone += 1
            return ""
        self._report.edited += 1
        return message_id


async def correct(
    engine: DeliveryEngine,
    ref: IssueRef,
    platform: Platform,
    messages: Sequence[Message] | Mapping[str, Sequence[Message]],
    *,
    zone: dt.tzinfo,
    progress: ProgressCallback | None = None,
) -> CorrectionReport:
    """Make every message of ``ref.date`` posted on ``platform`` show ``messages`` (the
    rendered parts of revision ``ref``, per variant: ``{"full": …, "compact": …}``, rendered
    as the post renders each; one list is the full variant's): each target's messages in the
    variant it got (one the mapping lacks: full), changed ones edited with a
    :func:`correction_mark`, added parts sent after the last, surplus ones deleted (or
    replaced by :data:`REMOVED_NOTE`). A run a crash cut is resumed first; a run with
    nothing to do changes nothing.

    Raises:
        ValueError: no full variant, or a variant without messages.
        DeliveryBusy: another process holds this platform's delivery lease.
    """
    by_variant = (
        {variant: list(m) for variant, m in messages.items()}
        if isinstance(messages, Mapping)
        else {FULL_VARIANT: list(messages)}
    )
    if not by_variant.get(FULL_VARIANT) or not all(by_variant.values()):
        raise ValueError("nothing to correct to: no messages")
    report = CorrectionReport(ref, platform.name)
    if not isinstance(platform, Editor):
        report.note = (
            "此平台无法编辑已发消息 / this platform cannot edit sent messages (send-only); "
            "`digest-bot post --force` posts the corrected issue again"
        )
        return report
    digests = {variant: [m.digest for m in m_list] for variant, m_list in by_variant.items()}
    # the plan's and the runs' objects out of the collector's full passes while it runs, as a
    # post's (heap.py): at 100k targets each pass stalled the loop 0.1-0.2 s
    async with engine.holding_lease(platform.name):
        with frozen_heap():
            await _correct(engine, ref, platform, by_variant, digests, zone, progress, report)
    log.info("correction: %s", report.describe())
    return report


async def _correct(
    engine: DeliveryEngine,
    ref: IssueRef,
    platform: Platform,
    by_variant: Mapping[str, Sequence[Message]],
    digests: Mapping[str, Sequence[str]],
    zone: dt.tzinfo,
    progress: ProgressCallback | None,
    report: CorrectionReport,
) -> None:
    assert isinstance(platform, Editor)
    # at most: the rest of a killed run, then the new plan (a failed row waits for the
    # next run, so a run always ends)
    for _ in range(2):
        plan = await engine.ledger.plan_correction(ref, platform.name, digests)
        if plan is None:
            return
        resumed = plan.resumed
        await _run(engine, plan, platform, platform, by_variant, zone, progress, report)
        del plan  # its entries were copied into the runs (and dropped in slices there)
        if not resumed:
            return


async def _run(
    engine: DeliveryEngine,
    plan: CorrectionPlan,
    platform: Platform,
    editor: Editor,
    messages: Mapping[str, Sequence[Message]],
    zone: dt.tzinfo,
    progress: ProgressCallback | None,
    report: CorrectionReport,
) -> None:
    report.unchanged += plan.unchanged
    mark = correction_mark(plan.created_at.astimezone(zone))
    note = editor.corrected(_note_of(platform), mark)
    marked = {v: [editor.corrected(m, mark) for m in m_list] for v, m_list in messages.items()}
    # what the fan-out hands each row (the row's own variant is chosen when it is acted on)
    deepest = max((row[1] for _, _, rows in plan.entries for row in rows), default=0)
    padded = [*marked[FULL_VARIANT], *[note] * max(0, deepest + 1 - len(marked[FULL_VARIANT]))]
    actions, runs = await _runs(engine, plan, platform, report)
    log.info(
        "%s %s: correcting to revision %s: %d rows for %d targets%s",
        platform.name,
        plan.ref.date,
        plan.ref.revision,
        sum(len(r.parts) for r in runs),
        len(runs),
        " (resuming a cut run)" if plan.resumed else "",
    )
    correcting = _Correcting(platform, editor, actions, marked, note, report)
    key = functools.partial(PartKey, plan.ref.date, plan.ref.revision, plan.generation)
    fanout = Fanout(engine, correcting, padded, progress, key)
    await fanout.run(runs)
    for _ in fanout.pacer.forget_idle_steps(engine.clock.monotonic()):
        await asyncio.sleep(0)
    del fanout, correcting
    # dropped in slices while the heap is still frozen, as a post's runs (fanout.py): 100k
    # targets' runs and actions freed at once hold the loop for a few hundred ms
    while runs:
        del runs[-YIELD_EVERY:]
        await asyncio.sleep(0)
    for i, key_ in enumerate(list(actions)):
        del actions[key_]
        if i % (4 * YIELD_EVERY) == 0:
            await asyncio.sleep(0)


async def _runs(
    engine: DeliveryEngine, plan: CorrectionPlan, platform: Platform, report: CorrectionReport
) -> tuple[dict[tuple[str, int], tuple[CorrectionAction, str | None, str]], list[TargetRun]]:
    """The fan-out's runs of ``plan``, one per target, and each row's action by (target id,
    part); a post in a thread is corrected there (its edits, and the parts it lacked)."""
    threads = (
        await engine.ledger.day_threads(plan.ref.date, platform.name)
        if isinstance(platform, Threads)
        else {}
    )
    actions: dict[tuple[str, int], tuple[CorrectionAction, str | None, str]] = {}
    runs: list[TargetRun] = []
    for order, (target, rows) in enumerate(plan.target_rows()):
        if order % YIELD_EVERY == 0:
            refreeze()  # what is built here lives as long as the run (see heap.py)
            await asyncio.sleep(0)  # 100k subscribers must not stall the loop
        for r in rows:
            actions[(target.id, r.part)] = (r.action, r.message_id, r.variant)
        todo = [PlannedPart(r.id, r.part, r.state, r.attempts) for r in rows]
        told = TargetReport(target)
        report.targets.append(told)
        uncertain = {p.id for p in todo if p.state in MAYBE_SENT}
        if plan.resumed:
            report.resumed += len(todo)
        runs.append(TargetRun(order, placed_in(target, threads), todo, told, uncertain=uncertain))
    return actions, runs


def _note_of(platform: Platform) -> Message:
    """The short note a surplus message that cannot be deleted is edited to."""
    return platform.flavor.notice(REMOVED_NOTE)[0]
