"""The editor's commands: `archive list`, `archive add`, `archive search`, `new` and `schema`.

``archive search`` imports only the archive: the scheduler (what ``add`` and ``new`` ask for
a post time) is imported by the commands that need it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bots.cli.common import EXIT_USAGE, parse_date
from digest_core.archive import Archive
from digest_core.archive.adding import MAX_ADD_BYTES, add_issue
from digest_core.archive.template import issue_template
from digest_core.errors import IssueFormatError, IssuePublished
from digest_core.models import Issue, issue_json_schema, shorten

if TYPE_CHECKING:
    from digest_core.settings import Settings

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED = 0, 1


def configure_archive(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``archive list``, ``archive add`` and ``archive search`` under ``archive``."""
    asub = p.add_subparsers(title="archive commands", metavar="ACTION", required=True)
    a = asub.add_parser(
        "list",
        parents=[common],
        help="every issue: date, published/scheduled/invalid, headline, briefs (exit 1 if any "
        "file is invalid)",
    )
    a.set_defaults(handler=cmd_archive_list, reports=True)
    a = asub.add_parser(
        "add",
        parents=[common],
        help="check an issue file and store it in the archive as YYYY-MM-DD.<type>",
    )
    a.add_argument("file", type=Path, metavar="FILE", help="the issue file (.txt, .json, .yaml)")
    a.add_argument("--date", type=parse_date, help="the issue's date when the name carries none")
    a.add_argument(
        "--correct",
        action="store_true",
        help="replace an issue that is already published (a correction)",
    )
    a.set_defaults(handler=cmd_archive_add, reports=True)
    a = asub.add_parser("search", parents=[common], help="find a word in titles and bodies")
    a.add_argument("word", help="word to look for (substring match)")
    a.add_argument("--limit", type=int, default=20, help="at most this many hits (default 20)")
    a.set_defaults(handler=cmd_archive_search, reports=True, core_settings=True)


def configure_new(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The argument and option of ``new``."""
    p.add_argument(
        "date",
        nargs="?",
        type=parse_date,
        metavar="DATE",
        help="the issue's date YYYY-MM-DD (default: the day of the next post)",
    )
    p.add_argument("-o", "--output", type=Path, help="where to write it (default: ./DATE.yaml)")
    p.set_defaults(handler=cmd_new, reports=True)


def configure_schema(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """``schema`` has no options of its own."""
    p.set_defaults(handler=cmd_schema, reports=True)


# ---------------------------------------------------------------- archive list


def _published(settings: Settings) -> Any:
    """Published = visible to readers, by the core's one embargo rule: from the schedule, or
    since an admin published the day early (read from the ledger's audit log, as the running
    bot does; a ledger not created yet has none)."""
    from digest_core.clock import SystemClock
    from digest_core.publishing.embargo import Embargo

    embargo = Embargo(
        zone=settings.zone,
        post_time=settings.schedule.time,
        clock=SystemClock(),
        early=early_publishes_of(settings),
    )
    return embargo.visible


def early_publishes_of(settings: Settings) -> dict[dt.date, dt.datetime]:
    """The early publishes the configured ledger records (see
    :func:`digest_core.publishing.approval.early_publishes`).

    Raises:
        LedgerError: the ledger exists but cannot be read (named, with the fix).
    """
    import asyncio

    from digest_core.delivery import Ledger
    from digest_core.delivery.ledger.engine import sqlite_file
    from digest_core.publishing.approval import early_publishes

    database = sqlite_file(settings.database_url)
    if database is not None and not database.exists():
        return {}

    async def read() -> dict[dt.date, dt.datetime]:
        async with Ledger.open(
            settings.database_url, upgrade=settings.ledger.auto_upgrade
        ) as ledger:
            return await early_publishes(ledger)

    return asyncio.run(read())


def _summary(issue: Issue) -> str:
    n = len(issue.briefs)
    return f"{shorten(issue.headline.title, 50)} · {n} brief{'' if n == 1 else 's'}"


def cmd_archive_list(args: argparse.Namespace, settings: Settings) -> int:
    """One line per issue file: ``date  state  headline · N briefs`` where state is published
    (its post time has come), scheduled or invalid (then the problem instead of the
    headline); misnamed files are listed as invalid too. Exit 1 if any file is invalid."""
    # each problem is a line of the listing: the archive's own log line would repeat it
    logging.getLogger("digest_core.archive").setLevel(logging.ERROR)
    archive = Archive(settings.archive_dir, index=False)
    published = _published(settings)
    entries = archive.list()
    invalid = 0
    for entry in entries:
        if entry.loaded and entry.issue is not None:
            state = "published" if published(entry.date) else "scheduled"
            print(f"{entry.date}  {state:<9}  {_summary(entry.issue)}")
            continue
        invalid += 1
        detail = str(entry.problem) if entry.problem is not None else f"{entry.path}: broken"
        if entry.stale and entry.issue is not None:
            detail += f" (the last good version is served: {_summary(entry.issue)})"
        print(f"{entry.date}  {'invalid':<9}  {detail}")
    listed = {str(e.problem) for e in entries if e.problem is not None}
    for problem in archive.problems:
        if str(problem) not in listed:  # misnamed files, a folder that cannot be read
            invalid += 1
            print(f"{'?':<10}  {'invalid':<9}  {problem}")
    if not entries and not invalid:
        print(f"no issues in {settings.archive_dir}", file=sys.stderr)
    if invalid:
        print(f"{invalid} invalid file(s): digest-bot validate shows each problem", file=sys.stderr)
    return EXIT_FAILED if invalid else EXIT_OK


# ---------------------------------------------------------------- archive search


def cmd_archive_search(args: argparse.Namespace, settings: Settings) -> int:
    """The issues that mention ``args.word``, newest first; exit 1 when none does."""
    # one search in a fresh process: it reads the index the bot keeps beside an SQLite ledger
    # when there is one of this folder (never making or changing it), and scans what that does
    # not hold as it is now; without one, every file is scanned, its raw text first
    if not args.word.strip():
        print("digest-bot: archive search: give a word to look for, e.g. 模型", file=sys.stderr)
        return EXIT_USAGE
    import sqlite3

    from digest_core.archive.fulltext import SqliteFullText, index_path_for

    path = index_path_for(settings.database_url)
    kept = SqliteFullText.kept(path, root=settings.archive_dir) if path is not None else None
    archive = Archive(settings.archive_dir, index=kept or False)
    try:
        hits = archive.search(args.word, limit=args.limit)
    except sqlite3.Error as exc:  # the bot's index went away or cannot be read here
        print(f"digest-bot: the bot's search index cannot be read ({exc}); scanning the files",
              file=sys.stderr)  # fmt: skip
        archive.close()  # the index set aside, the same archive (and its listing) scans
        hits = archive.search(args.word, limit=args.limit)
    for hit in hits:
        print(hit.describe())
    for problem in archive.known_problems():
        print(f"skipped: {problem}", file=sys.stderr)
    archive.close()
    if not hits:
        print(f"no issue mentions {args.word!r}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# ---------------------------------------------------------------- archive add


def cmd_archive_add(args: argparse.Namespace, settings: Settings) -> int:
    """Validate FILE and store it in the archive (see :func:`add_issue`); errors are one
    ``path:line: detail`` line and exit 1."""
    path: Path = args.file
    try:
        size = path.stat().st_size
        if size > MAX_ADD_BYTES:
            print(
                f"{path}: the file is {size} bytes; an issue file is at most 1 MiB", file=sys.stderr
            )
            return EXIT_FAILED
        data = path.read_bytes()
    except OSError as exc:
        print(f"{path}: cannot read the file: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        added = add_issue(
            settings.archive_dir,
            data,
            name=path.name,
            date=args.date,
            published=_published(settings),
            correct=args.correct,
            shown=str(path),
        )
    except IssueFormatError as exc:
        for line in exc.lines():  # one line per problem, each with its own line number
            print(line, file=sys.stderr)
        return EXIT_FAILED
    except IssuePublished as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:  # the archive folder is not writable, a folder in the way, disk full
        where = exc.filename or settings.archive_dir
        print(f"{where}: cannot store the issue: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    for hint in added.hints:
        print(hint, file=sys.stderr)
    from digest_core.clock import zoned_text
    from digest_core.publishing.schedule import post_time_of

    issue = added.issue
    when = post_time_of(issue.date, zone=settings.zone, post_time=settings.schedule.time)
    if added.unchanged:
        print(f"{added.path}: unchanged (the same issue is stored already)")
        return EXIT_OK
    state = (
        "a correction of the published issue" if added.corrected else f"posts {zoned_text(when)}"
    )
    print(f"stored {added.path}: {issue.date} · {_summary(issue)} · {state}")
    for removed in added.removed:
        print(f"removed {removed} (the new file replaces it)")
    if added.corrected:
        print("readers who got it keep the old text until the correction is sent")
    return EXIT_OK


# ---------------------------------------------------------------- new, schema


def cmd_new(args: argparse.Namespace, settings: Settings) -> int:
    """Write the commented template of the issue of DATE (default: the next post's day)."""
    date = args.date or _next_post_day(settings)
    out: Path = args.output or Path(f"{date.isoformat()}.yaml")
    try:
        with out.open("x", encoding="utf-8") as file:  # never over an editor's work
            file.write(issue_template(date, name=str(out)))
    except FileExistsError:
        print(f"{out}: already exists; not overwritten (give -o PATH)", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(f"{out}: cannot write it: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {out}: fill it in, then `digest-bot archive add {out}`")
    return EXIT_OK


def _next_post_day(settings: Settings) -> dt.date:
    from digest_core.publishing.schedule import post_time_of

    now = dt.datetime.now(dt.UTC)
    today = now.astimezone(settings.zone).date()
    due = post_time_of(today, zone=settings.zone, post_time=settings.schedule.time)
    return today if now < due else today + dt.timedelta(days=1)


def cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    """Print the JSON schema of the structured issue files (the contract for tools)."""
    try:
        json.dump(issue_json_schema(), sys.stdout, ensure_ascii=False, indent=2)
        print(flush=True)
    except BrokenPipeError:  # `digest-bot schema | head`: the reader had enough
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (nothing more is flushed to the pipe)
    return EXIT_OK
