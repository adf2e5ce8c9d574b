"""`digest-bot validate` and `digest-bot preview`: an editor's checks of issue files."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bots import registry
from bots.cli import publishing as cli_publishing
from bots.cli.common import EXIT_FAILED, EXIT_OK, parse_date
from digest_core.archive import Archive
from digest_core.archive import files as archive_files
from digest_core.errors import IssueFormatError
from digest_core.loading import Hint, date_from_name, load_issue
from digest_core.rendering import Part, RenderOptions, preview, render

if TYPE_CHECKING:
    from digest_core.models import Issue
    from digest_core.settings import Settings


def configure_validate(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The arguments of ``validate``."""
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="issue files or folders (default: the configured archive folder)",
    )
    p.add_argument(
        "--date", type=parse_date, help="date of files whose name carries none (YYYY-MM-DD)"
    )
    p.set_defaults(handler=cmd_validate, reports=True)


def configure_preview(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The options of ``preview``."""
    p.add_argument(
        "--date",
        type=parse_date,
        help="issue date YYYY-MM-DD (default: the latest); with --file, the date of a file "
        "whose name carries none",
    )
    p.add_argument("--file", type=Path, help="an issue file outside the archive")
    p.add_argument(
        "--platform",
        choices=[*registry.names(), "plain"],
        default="telegram",
        help="render as this platform does (plain: no markup, as the console)",
    )
    p.add_argument(
        "--section",
        choices=["all", "headline", "briefs", "classic", "toc"],
        default="all",
        help="which part of the issue",
    )
    p.add_argument("--brief", type=int, metavar="N", help="only brief N (from 1)")
    p.add_argument("--buttons", action="store_true", help="include the section buttons")
    p.add_argument("--no-embeds", action="store_true", help="Discord: plain-markdown fallback")
    p.add_argument(
        "--json", action="store_true", help="print the exact API payloads, one per message"
    )
    cli_publishing.add_options(p)
    p.set_defaults(handler=cmd_preview, reports=True)


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    """Check files and folders with the archive's own rule (archive_files) and the loader.

    In a folder, only what the archive would look at is checked, and anything it would not
    serve as named (misnamed, a second file for a date, a link out of the folder, a FIFO) is an
    error. A file named on the command line may be an undated draft; it is checked as if dated
    ``--date`` (default today). Nothing outside a folder (or a file's own folder) is read.
    With no path, the configured archive folder is checked. Warnings (a body line that looks
    like a link without https://) are printed as ``path:line: warning: …`` and do not fail.
    """
    checked = failed = missing = 0
    for path in args.paths or [settings.archive_dir]:
        if not os.path.lexists(path):
            print(f"no such file or folder: {path}", file=sys.stderr)
            failed += 1
            missing += 1
            continue
        if path.is_dir():  # (a link to a folder too: its entries must stay inside its target)
            try:
                dated, misnamed = archive_files.scan(path)
            except OSError as exc:
                print(f"{path}: cannot list the folder: {exc.strerror or exc}", file=sys.stderr)
                failed += 1
                continue
            results = [_validate_entry(entry) for entry in (*dated, *misnamed)]
        else:
            results = [_validate_file(path, args.date, settings)]
        checked += len(results)
        failed += results.count(False)
    if not checked and not failed:
        print("no issue files given", file=sys.stderr)
        return EXIT_FAILED
    if failed and checked:
        print(f"{failed} of {checked + missing} files failed", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _validate_entry(entry: archive_files.FileEntry) -> bool:
    """One entry of a folder: the rule's verdict, then (when it passes) the loader's."""
    if entry.problem is not None:
        print(entry.problem)
        return False
    return _load_and_print(entry.path, entry.date, undated=False)


def _validate_file(path: Path, date: dt.date | None, settings: Settings) -> bool:
    """One file named on the command line (it may be an undated draft)."""
    _, file_problem = archive_files.check_file(archive_files.real_root(path.parent), path)
    if file_problem is not None:
        print(IssueFormatError(path, None, file_problem))
        return False
    name_date, name_problem = archive_files.check_name(path)
    undated = name_problem == archive_files.NO_DATE
    if name_problem is not None and not undated:
        print(IssueFormatError(path, None, name_problem))
        return False
    # an undated draft is checked as if dated today (the content is what is validated), unless
    # it is data that carries its own date (`digest-bot new -o draft.yaml` writes one)
    if undated and date is None and path.suffix.lower() in (".json", ".yaml", ".yml"):
        return _load_and_print(path, None, undated=False)
    return _load_and_print(path, date or name_date or _today(settings), undated=undated)


def _load_and_print(path: Path, date: dt.date | None, *, undated: bool) -> bool:
    hints: list[Hint] = []
    try:
        issue = load_issue(path, date=date, hints=hints)
    except IssueFormatError as exc:
        print("\n".join(exc.lines()))
        return False
    for hint in hints:
        print(hint)
    when = "undated (name it YYYY-MM-DD.txt to publish it)" if undated else str(issue.date)
    briefs = len(issue.briefs)
    links = sum(len(item.links) for _, item in issue.items())
    print(
        f"{path}: ok — {when}, 1 headline, {briefs} brief{'' if briefs == 1 else 's'}, "
        f"{'1 classic review' if issue.classic else 'no classic review'}, "
        f"{links} link{'' if links == 1 else 's'}"
    )
    return True


# ---------------------------------------------------------------- preview


def cmd_preview(args: argparse.Namespace, settings: Settings) -> int:
    if args.to_admins:
        return cli_publishing.cmd_preview_to_admins(args, settings)
    issue = _pick_issue(args, settings)
    part = Part(args.section)
    if args.brief is not None:
        part = Part.BRIEF
    options = RenderOptions(
        buttons=args.buttons, embeds=not args.no_embeds, site_url=settings.site.base_url
    )
    # plain: the console's renderer
    renderer = registry.spec("console" if args.platform == "plain" else args.platform).renderer()
    try:
        messages = render(issue, renderer, part, brief=args.brief, options=options)
    except IndexError as exc:
        print(f"digest-bot: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        json.dump([m.payload for m in messages], sys.stdout, ensure_ascii=False, indent=2)
        print()
        return EXIT_OK
    for n, message in enumerate(messages, 1):
        print(f"──── {args.platform} message {n}/{len(messages)} ────")
        print(preview(message, renderer))
    return EXIT_OK


def _today(settings: Settings) -> dt.date:
    return dt.datetime.now(settings.zone).date()


def _pick_issue(args: argparse.Namespace, settings: Settings) -> Issue:
    if args.file is not None:
        date = args.date
        if date is None and date_from_name(args.file) is None:
            date = _today(settings)
            print(f"{args.file}: no date in the name; previewing it as {date}", file=sys.stderr)
        return load_issue(args.file, date=date)
    archive = Archive(settings.archive_dir, index=False)
    return archive.on(args.date) if args.date else archive.latest()
