"""A posted day's file changed after the post: corrected in place by itself
(``corrections = "auto"``) or the admins told how to (``"manual"``), once per revision."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from digest_core.archive import Archive
from digest_core.delivery import DayState, Ledger
from digest_core.errors import IssueNotFound
from digest_core.platform import Editor
from digest_core.port import Adapter
from digest_core.publishing.corrections import CorrectionReport

log = logging.getLogger(__name__)


@dataclass
class FileChanges:
    """Looks at yesterday's and today's files against what was posted (the minute job)."""

    archive: Archive
    ledger: Ledger
    platforms: Mapping[str, Adapter]
    today: Callable[[], dt.date]
    correct: Callable[[dt.date, Sequence[str]], Awaitable[list[CorrectionReport]]]
    alert: Callable[[str], Awaitable[None]]
    #: (day, revision) that ``auto_correct`` found served everywhere
    auto_checked: set[tuple[dt.date, str]] = field(default_factory=set)
    #: (day, file revision, what each platform was sent) that ``check_posted_files`` told
    told: set[tuple[dt.date, str, tuple[tuple[str, str], ...]]] = field(default_factory=set)

    async def auto_correct(self) -> list[CorrectionReport]:
        """``corrections = "auto"``: correct yesterday and today on every platform that can
        edit and has posted the day, once per revision of the day's file (a correction with
        nothing to change changes nothing; one that failed is tried again next time). Admins
        are told what changed."""
        today = self.today()
        done: list[CorrectionReport] = []
        for day in (today - dt.timedelta(days=1), today):
            try:
                issue = await asyncio.to_thread(self.archive.on, day)
            except IssueNotFound:
                continue
            if (day, issue.revision) in self.auto_checked:
                continue
            stale = []
            for name, platform in self.platforms.items():
                if not isinstance(platform, Editor):
                    continue
                if await self.ledger.day_state(day, platform=name) is not DayState.NONE:
                    stale.append(name)  # posted there: what it shows is compared
            if stale:
                reports = await self.correct(day, stale)
                done += reports
                changed = [r for r in reports if r.changed or not r.ok]
                if changed:
                    await self.alert(
                        f"{day} 的日报已自动更正 / the issue of {day} was corrected in place:\n"
                        + "\n".join(r.describe() for r in changed)
                    )
                if not all(r.ok for r in reports):
                    continue
            self.auto_checked.add((day, issue.revision))
        return done

    async def check_posted_files(self) -> list[str]:
        """``corrections = "manual"``: when the file of a day already posted (yesterday or
        today) changed since (a save completed after the post, a file replaced), log it and
        alert the admins that readers see another version than the file, and how to correct
        it: once per (file revision, revisions posted). Returns what it told, as
        ``platform:date`` (the platforms showing another revision than the file)."""
        today = self.today()
        found: list[str] = []
        for day in (today - dt.timedelta(days=1), today):
            try:
                issue = await asyncio.to_thread(self.archive.on, day)
            except IssueNotFound:
                continue
            stale: dict[str, str] = {}  # platform -> the revision its readers were sent
            for name in self.platforms:
                posted = await self.ledger.posted_revision(day, platform=name)
                # (not posted there yet: the post sends the file as it is)
                if posted is not None and posted != issue.revision:
                    stale[name] = posted
            told = (day, issue.revision, tuple(sorted(stale.items())))
            if not stale or told in self.told:
                continue
            self.told.add(told)
            found += [f"{name}:{day}" for name in stale]
            log.warning(
                "the issue file of %s changed after it was posted: %s; the file is now revision %s",
                day,
                ", ".join(f"{n} readers see revision {r}" for n, r in stale.items()),
                issue.revision,
            )
            await self.alert(
                f"{day} 的日报文件在推送后改过了，读者看到的仍是推送时的版本。\n"
                f"The issue file of {day} changed after it was posted on {', '.join(stale)}: "
                f"readers see the version that was posted, not the file (now revision "
                f"{issue.revision}). To edit the posted messages to match: /correct {day} or "
                f'`digest-bot correct --date {day}` (`[schedule] corrections = "auto"` does '
                f"it by itself); to send it again as new messages: `digest-bot post --date "
                f"{day} --force`. If the change was a mistake, put the posted version back."
            )
        return found
