"""What ``status`` tells: the next post, readiness, the ledger's health, each target's last
delivery, waits, failures and outcomes unknown; and the texts of a delivery's report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from digest_core.clock import zoned_text
from digest_core.delivery import DeliveryReport, Ledger, PartState
from digest_core.delivery.health import is_transient, read_trouble, short_error
from digest_core.delivery.reports import due_of
from digest_core.platform import Target
from digest_core.port import Adapter, Tallied
from digest_core.publishing.approval import Publishing
from digest_core.publishing.schedule import DailyPoster

if TYPE_CHECKING:
    from digest_core.delivery.resuming import Resumer

#: at most this many targets of a platform are listed one by one
LISTED_TARGETS = 20


@dataclass
class StatusReport:
    """The ``status`` text of the running service's parts."""

    ledger: Ledger
    zone: dt.tzinfo
    platforms: Mapping[str, Adapter]
    poster: DailyPoster
    publishing: Publishing
    resumer: Resumer
    targets: Callable[[Adapter], Awaitable[list[Target]]]
    #: platforms not started yet -> why; deliveries that raised
    unavailable: Mapping[str, str]
    interrupted: Mapping[tuple[dt.date, str], Interrupted]

    async def text(self) -> str:
        lines = [f"下次推送 / next post: {zoned_text(self.poster.next_post())}"]
        for name, why in sorted(self.unavailable.items()):
            lines.append(f"⚠ {name} 未连接 / not connected: {why}")
        next_day = self.publishing.next_day()
        for day in sorted({next_day, self.poster.today() + dt.timedelta(days=1)}):
            lines.append("  " + (await self.publishing.readiness(day))[1])
        health = self.ledger.health
        if health.lost is not None:
            lines.append(f"⚠ 账本丢失 / {health.lost}")
            return "\n".join(lines)
        # this process's view, else what a running bot published (``digest-bot status``)
        trouble = health.trouble or (read_trouble(health.file) if health.file else None)
        if trouble is not None:
            lines.append(f"⚠ 账本异常 / {trouble.describe(self.zone)}")
        for stopped in sorted(self.interrupted.values(), key=lambda i: (i.day, i.platform)):
            lines.append("⚠ 推送中断 / " + stopped.describe(self.zone))
        try:
            lines += await self._ledger()
        except Exception as exc:
            if not is_transient(exc):
                raise
            lines.append(f"账本暂不可读 / the ledger cannot be read now: {short_error(exc)}")
        lines += self.resumer.describe(self.zone)
        lines += self.poster.notes[-3:]
        return "\n".join(lines)

    async def _ledger(self) -> list[str]:
        waiting = await self.ledger.waiting(limit=500)
        due = {(w.platform, w.target): due_of(w.last_error) for w in reversed(waiting)}
        lines: list[str] = []
        for platform in self.platforms.values():
            lines += await self._platform(platform, due)
        failures = await self.ledger.failures(limit=5)
        if failures:
            lines.append("最近失败 / recent failures:")
            lines += [
                f"  {f.platform}:{f.target} {f.issue_date} #{f.part + 1}: {f.last_error}"
                for f in failures
            ]
        if waiting:
            lines.append("等待重发 / waiting to be sent again (reason; due):")
            lines += [
                f"  {w.platform}:{w.target} {w.issue_date} #{w.part + 1}: "
                f"{_until(w.last_error, self.zone)}"
                for w in waiting[:5]
            ]
        unknown = await self.ledger.records(states=[PartState.UNKNOWN], limit=5)
        if unknown:
            lines.append(
                "结果未知，将重发（可能重复）/ outcome unknown, to be sent again (possibly twice):"
            )
            lines += [
                f"  {u.platform}:{u.target} {u.issue_date} #{u.part + 1}: {u.last_error}"
                for u in unknown
            ]
        return lines

    async def _platform(
        self, platform: Adapter, due: Mapping[tuple[str, str], dt.datetime | None]
    ) -> list[str]:
        """A platform's targets: the last delivery of each (the first ones), the inactive."""
        targets = await self.targets(platform)
        lines = [f"{platform.name}: {len(targets)} 个目标 / targets"]
        if isinstance(platform, Tallied):  # its own counts (never an address)
            for group, kinds in (await platform.tallies()).items():
                lines.append(f"  {group}: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
        for target in targets[:LISTED_TARGETS]:
            last = await self.ledger.last_sent(platform.name, target.id)
            when = "—"
            if last is not None:
                at = last.updated_at.astimezone(self.zone)
                when = f"{last.issue_date} (#{last.part + 1}, {at:%m-%d %H:%M})"
            elif old := await self.ledger.last_summarised(platform.name, target.id):
                when = f"{old.issue_date} (已归档 / rows pruned; parts sent: {old.sent})"
            if (until := due.get((platform.name, target.id))) is not None:
                local = until.astimezone(self.zone)
                when += f"; 等待至 / waiting until {local:%m-%d %H:%M:%S}"
            lines.append(f"  {target.id}: 最近 / last {when}")
        if len(targets) > LISTED_TARGETS:
            lines.append(f"  … {len(targets) - LISTED_TARGETS} more")
        for inactive in await self.ledger.inactive_targets(platform.name):
            since = inactive.since.astimezone(self.zone)
            lines.append(
                f"  {inactive.id}: 已停用 / deactivated {since:%m-%d %H:%M} "
                f"({inactive.reason or 'gone'}); /reactivate {platform.name}:{inactive.id}"
            )
        return lines

    async def describe(self, report: DeliveryReport, *, force: str = "force") -> str:
        """:func:`describe_report`, and when nothing was sent because everything had been,
        when it was delivered and that ``force`` (how the caller spells it) sends it again."""
        text = describe_report(report, zone=self.zone)
        if report.sent or not any(t.already_sent for t in report.targets):
            return text
        last = await self.ledger.records(
            report.ref, platform=report.platform, states=[PartState.SENT], limit=1
        )
        when = f"{last[0].updated_at.astimezone(self.zone):%Y-%m-%d %H:%M}" if last else "?"
        return (
            f"{text}\n  已于 {when} 送达，没有重发；加 {force} 可再发一遍。/ already delivered at "
            f"{when}; nothing sent again (add {force} to send it again)"
        )


def _until(error: str | None, zone: dt.tzinfo) -> str:
    """A waiting row's error with its due time in the digest's zone."""
    text, due = error or "", due_of(error)
    if due is None:
        return text
    return text[: text.rfind("; due at ")] + f"; due {due.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}"


def describe_waits(day: dt.date, reports: Sequence[DeliveryReport], zone: dt.tzinfo) -> str:
    """The admins' alert about parts a post left waiting: how many, where, why, when."""
    lines = [f"{day} 的推送有部分在等待重发 / parts of the post of {day} wait:"]
    for r in reports:
        waiting = [t for t in r.targets if t.waiting]
        first = next((e for t in waiting for e in t.errors), "")
        reason = _until(first.split(": ", 1)[-1], zone)
        due = f"{r.due.astimezone(zone):%H:%M:%S}" if r.due is not None else "?"
        lines.append(
            f"  {r.platform}: {r.waiting} part(s) to {len(waiting)} target(s), first due {due}"
            f" (e.g. {waiting[0].target.id}: {reason}); the running bot sends them then"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Interrupted:
    """A delivery of ``day`` on ``platform`` that raised at ``at`` (aware UTC) with
    ``error``; ``resumes``: it is posted again once the ledger answers."""

    day: dt.date
    platform: str
    at: dt.datetime
    error: str
    resumes: bool

    def describe(self, zone: dt.tzinfo) -> str:
        then = (
            "resumes once the ledger answers"
            if self.resumes
            else "`digest-bot post` sends what is left"
        )
        return (
            f"delivery {self.platform} {self.day} failed at "
            f"{self.at.astimezone(zone):%H:%M}: {self.error} ({then})"
        )


def describe_report(report: DeliveryReport, *, zone: dt.tzinfo = dt.UTC) -> str:
    """One line per platform plus one per target that did not complete (times in ``zone``)."""
    head = (
        f"{report.platform} {report.ref.date}: 发送 / sent {report.sent}, "
        f"失败 / failed {report.failed}, 失效 / gone {len(report.gone)}"
    )
    if report.unknown or report.maybe_twice:
        # a cut send may have arrived: counted apart, never as "not sent"
        head += (
            f", 结果未知（下次重发）/ outcome unknown (sent again next time) {report.unknown}, "
            f"可能重复 / possibly twice {report.maybe_twice}"
        )
    if report.waiting and report.due is not None:
        head += (
            f", 等待重发 / waiting {report.waiting} (first due "
            f"{report.due.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}; a running bot sends them "
            "then)"
        )
    lines = [head]
    for t in report.targets:
        moved = f" → {t.moved_to}" if t.moved_to else ""
        if not t.complete or t.moved_to:
            why = "; ".join(_until(e, zone) for e in t.errors[-2:]) or ("gone" if t.gone else "")
            if t.waiting:
                why = f"{t.waiting} part(s) wait: {why}"
            lines.append(f"  {t.target.id}{moved}: {why}")
        elif t.sent_revision:
            lines.append(
                f"  {t.target.id}: 已收到修订前的版本 {t.sent_revision}（force 可重发）/ "
                f"already had revision {t.sent_revision}; force sends the correction"
            )
        elif t.in_progress:
            lines.append(
                f"  {t.target.id}: 另一次推送正在发送 / being sent by another delivery "
                f"({t.in_progress} parts)"
            )
    for target in report.inactive:
        lines.append(
            f"  {target.id}: 已停用，未发送（/reactivate {target.id} 恢复）/ deactivated "
            f"earlier, not sent (/reactivate {target.id} to resume)"
        )
    return "\n".join(lines)
